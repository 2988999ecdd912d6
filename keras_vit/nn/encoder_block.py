"""The Transformer encoder block (paper eq. 2-3) and the family's options on it, in `keras` / `keras.ops` only.

Weight names and shapes follow the official checkpoints, so converting one is a rename: attention kernels are
(D, heads, D/heads) and (heads, D/heads, D).
"""

from __future__ import annotations

from typing import Optional, Union

import keras
import numpy as np
from keras import ops

from keras_vit.nn.attention import MultiHeadDotProductAttention
from keras_vit.nn.differential_attention import DifferentialAttention
from keras_vit.nn.drop_path import DropPath
from keras_vit.nn.initializers import PACKAGE as _PACKAGE
from keras_vit.nn.layer_norm import LAYER_NORM_EPSILON, LayerNorm
from keras_vit.nn.layer_scale import LayerScale
from keras_vit.nn.mlp import MlpBlock, activation_name
from keras_vit.nn.rms_norm import normalization
from keras_vit.nn.specs import ArraySpecs
from keras_vit.nn.swiglu import SwiGLU


def layer_norm(name: str, dtype_policy, epsilon: float = LAYER_NORM_EPSILON, rms: bool = False) -> LayerNorm:
    """A LayerNorm over the last axis (epsilon 1e-6 as flax and timm; CLIP's checkpoints use 1e-5), or with `rms`
    an RMSNorm (AIMv2)."""
    return normalization(epsilon, name, dtype_policy, rms)


REMAT_MODES = (False, True, "attention")


def remat_mode(remat: Union[bool, str]) -> Union[bool, str]:
    """The constructors' `remat` checked: False (keep what the backward pass needs), True (recompute each
    block) or "attention" (recompute only the attention probabilities: what training on TensorFlow and JAX
    does by default since 0.3.0, `keras_vit.nn.attention_core`; kept so that configs and saved models naming
    it still load)."""
    if isinstance(remat, (bool, np.bool_)):
        return bool(remat)
    if remat == "attention":
        return remat
    raise ValueError(f"remat must be one of {REMAT_MODES}, got {remat!r}.")


# The block options beyond the paper's sizes and rates (the ViT family's variations), with their defaults: the
# paper's ViT. Encoder and EncoderBlock take and report them alike.
BLOCK_OPTIONS = dict(
    activation=None,
    layer_norm_epsilon=LAYER_NORM_EPSILON,
    qk_norm=False,
    qkv_bias=True,
    swiglu=False,
    mlp_norm=False,
    attention_norm=False,
    rotate_half=False,
    key_bias=True,
    mixed_rotary_temperature=None,
    rms_norm=False,
    projection_bias=True,
    post_norm=False,
    attention_only_layer_scale=False,
    parallel_layers=False,
    differential_attention=False,
    causal=False,
)


@keras.saving.register_keras_serializable(package=_PACKAGE)
class EncoderBlock(ArraySpecs, keras.layers.Layer):
    """Pre-LN Transformer block (eq. 2-3): x + MSA(LN(x)), then x + MLP(LN(x)).

    The family's variations: LayerScale on both branches (`layer_scale_init`), the MLP's `activation`,
    `layer_norm_epsilon`, LayerNorm on queries and keys per head (`qk_norm`), `qkv_bias` (`key_bias=False`:
    EVA's query and value biases only); EVA-02's
    SwiGLU MLP (`swiglu`, with `mlp_norm` on its hidden layer), a LayerNorm on the attention's output
    (`attention_norm`) and the channel pairing of rotary embeddings (`rotate_half`; the table comes with each
    call as `rotary`), or RoPE-Mixed's learned frequencies (`mixed_rotary_temperature`: their initial scale);
    AIMv2's RMSNorm (`rms_norm`) and bias-free projections (`projection_bias=False`); each branch's norm after
    the branch instead of before it (`post_norm`: timm's ResPostBlock, EVA-CLIP enormous); attention and MLP side
    by side on one norm, x + LS(MSA(LN(x)) + MLP(LN(x))) (`parallel_layers`: ViT-22B's parallel layers, timm's
    ParallelScalingBlock; one LayerScale on their sum); the Differential Transformer's attention
    (`differential_attention`, its lambda_init set by the block's depth `block_index`); a causal mask
    (`causal`: CLIP's text tower). Call with
    `return_attention=True` to also get the attention probabilities (batch, heads,
    tokens, tokens), used by `keras_vit.inspect`.
    """

    def __init__(
        self,
        num_heads: int,
        mlp_dim: int,
        dropout_rate: float = 0.0,
        attention_dropout_rate: float = 0.0,
        drop_path_rate: float = 0.0,
        gelu_approximate=None,
        remat: Union[bool, str] = False,
        layer_scale_init: Optional[float] = None,
        activation: Optional[str] = None,
        layer_norm_epsilon: float = LAYER_NORM_EPSILON,
        qk_norm: bool = False,
        qkv_bias: bool = True,
        swiglu: bool = False,
        mlp_norm: bool = False,
        attention_norm: bool = False,
        rotate_half: bool = False,
        key_bias: bool = True,
        mixed_rotary_temperature: Optional[float] = None,
        rms_norm: bool = False,
        projection_bias: bool = True,
        post_norm: bool = False,
        attention_only_layer_scale: bool = False,
        num_key_value_heads: Optional[int] = None,
        parallel_layers: bool = False,
        differential_attention: bool = False,
        causal: bool = False,
        block_index: int = 0,
        **kwargs,
    ):
        super().__init__(**kwargs)
        # Differential Transformer's attention; its lambda_init depends on the block's depth (`block_index`)
        # (private: a plain setting would tell the blocks apart in `block_graph`'s key where it changes nothing)
        self.differential_attention, self._block_index = bool(differential_attention), int(block_index)
        self.causal = bool(causal)  # each token attends to itself and those before it (CLIP's text tower)
        self.attention_only_layer_scale = bool(attention_only_layer_scale)  # Sapiens2: no LayerScale on the MLP
        self.num_key_value_heads = None if num_key_value_heads is None else int(num_key_value_heads)
        self.post_norm = bool(post_norm)  # x + LN(branch(x)) instead of x + branch(LN(x)) (res-post-norm)
        self.parallel_layers = bool(parallel_layers)  # ViT-22B: both branches read one norm, their sum is added
        if self.parallel_layers and self.post_norm:
            raise ValueError(
                "parallel_layers=True and post_norm=True: no model combines them, and keras_vit does not build it."
            )
        self.swiglu, self.mlp_norm, self.attention_norm = bool(swiglu), bool(mlp_norm), bool(attention_norm)
        self.rotate_half, self.key_bias = bool(rotate_half), bool(key_bias) and bool(qkv_bias)
        self.mixed_rotary_temperature = None if mixed_rotary_temperature is None else float(mixed_rotary_temperature)
        self.rms_norm, self.projection_bias = bool(rms_norm), bool(projection_bias)
        self.layer_scale_init = None if layer_scale_init is None else float(layer_scale_init)
        self.num_heads, self.mlp_dim = int(num_heads), int(mlp_dim)
        self.activation = activation_name(activation, gelu_approximate)
        self.layer_norm_epsilon, self.qk_norm, self.qkv_bias = float(layer_norm_epsilon), bool(qk_norm), bool(qkv_bias)
        self.remat = remat_mode(remat)
        self.dropout_rate = float(dropout_rate)
        self.attention_dropout_rate = float(attention_dropout_rate)
        self.drop_path_rate = float(drop_path_rate)
        policy, eps, rms = self.dtype_policy, self.layer_norm_epsilon, self.rms_norm
        self.layer_norm_0 = layer_norm("LayerNorm_0", policy, eps, rms)
        attention, extra = MultiHeadDotProductAttention, dict(causal=True) if self.causal else {}
        if self.differential_attention:
            if self.causal:
                raise ValueError("differential_attention=True with causal=True: keras_vit builds no such model.")
            attention, extra = DifferentialAttention, dict(depth=self._block_index)
        self.attention = attention(
            self.num_heads,
            self.attention_dropout_rate,
            qk_norm=self.qk_norm,
            qkv_bias=self.qkv_bias,
            **extra,
            layer_norm_epsilon=eps,
            rotate_half=self.rotate_half,
            output_norm=self.attention_norm,
            key_bias=self.key_bias,
            mixed_rotary_temperature=self.mixed_rotary_temperature,
            rms_norm=rms,
            projection_bias=self.projection_bias,
            num_key_value_heads=self.num_key_value_heads,
            dtype=policy,
            name="MultiHeadDotProductAttention_1",
        )
        self.dropout = keras.layers.Dropout(self.dropout_rate, dtype=policy)
        self.drop_path = DropPath(self.drop_path_rate, dtype=policy)
        self.layer_norm_2 = None if self.parallel_layers else layer_norm("LayerNorm_2", policy, eps, rms)
        mlp = dict(
            hidden_norm=self.mlp_norm,
            layer_norm_epsilon=eps,
            rms_norm=rms,
            use_bias=self.projection_bias,
            dtype=policy,
            name="MlpBlock_3",
        )
        self.mlp = (
            SwiGLU(self.mlp_dim, self.dropout_rate, **mlp)
            if self.swiglu
            else MlpBlock(self.mlp_dim, self.dropout_rate, activation=self.activation, **mlp)
        )
        self.layer_scale_0 = self.layer_scale_2 = None  # LayerScale on the attention and MLP branches
        if self.layer_scale_init is not None:
            self.layer_scale_0 = LayerScale(self.layer_scale_init, dtype=policy, name="LayerScale_0")
            self.layer_scale_2 = (
                None
                if self.attention_only_layer_scale or self.parallel_layers
                else LayerScale(self.layer_scale_init, dtype=policy, name="LayerScale_2")
            )

    @property
    def gelu_approximate(self) -> bool:
        return self.activation == "gelu_tanh"

    def build(self, input_shape):
        for layer in (
            self.layer_norm_0,
            self.attention,
            self.layer_norm_2,
            self.mlp,
            self.drop_path,
            self.layer_scale_0,
            self.layer_scale_2,
        ):
            if layer is not None:  # the weightless DropPath too: model.quantize() wants every layer built
                layer.build(input_shape)

    def call(self, x, rotary=None, training=None, return_attention=False):
        if self.remat is True and not return_attention:
            return keras.remat(self._replayable_forward(training, rotary))(x)
        return self._forward(x, rotary, training, return_attention)

    def _replayable_forward(self, training, rotary=None):
        """The block as a function of its input alone (`training` stays a Python value: jax.checkpoint would
        trace an argument). TensorFlow's recomputation re-runs the dropout draws on stateful seed variables,
        so the function first rewinds them to their values at the forward pass: the same masks twice."""
        seeds = [
            layer.seed_generator.state
            for layer in self._flatten_layers()
            if isinstance(getattr(layer, "seed_generator", None), keras.random.SeedGenerator)
        ]
        rewind = [ops.copy(s.value) for s in seeds] if training and keras.backend.backend() == "tensorflow" else []

        def forward(tokens):
            for state, start in zip(seeds, rewind):
                state.assign(start)
            return self._forward(tokens, rotary, training)

        return forward

    def _forward(self, x, rotary=None, training=None, return_attention=False):
        if self.parallel_layers:
            return self._parallel_forward(x, rotary, training, return_attention)
        # pre-norm: each branch is given its norm, so that a training call can take the norm and the branch's first
        # product together (keras_vit.nn.norm_core); post-norm: the norm is applied to the branch's output
        norms = (None, None) if self.post_norm else (self.layer_norm_0, self.layer_norm_2)
        post = (lambda n, t: n(t)) if self.post_norm else (lambda n, t: t)
        y = self.attention(x, rotary=rotary, training=training, return_attention=return_attention, norm=norms[0])
        y, probs = y if return_attention else (y, None)
        y = post(self.layer_norm_0, self.dropout(y, training=training))
        y = self.layer_scale_0(y) if self.layer_scale_0 is not None else y
        x = x + ops.cast(self.drop_path(y, training=training), x.dtype)  # sublayers may differ (DTypePolicyMap)
        y = post(self.layer_norm_2, self.mlp(x, training=training, norm=norms[1]))
        y = self.layer_scale_2(y) if self.layer_scale_2 is not None else y
        x = x + ops.cast(self.drop_path(y, training=training), x.dtype)
        return (x, probs) if return_attention else x

    def _parallel_forward(self, x, rotary=None, training=None, return_attention=False):
        """x + LS(MSA(LN(x)) + MLP(LN(x))): ViT-22B's parallel layers."""
        h = self.layer_norm_0(x)
        y = self.attention(h, rotary=rotary, training=training, return_attention=return_attention)
        y, probs = y if return_attention else (y, None)
        y = self.dropout(y, training=training) + self.mlp(h, training=training)
        y = self.layer_scale_0(y) if self.layer_scale_0 is not None else y
        x = x + ops.cast(self.drop_path(y, training=training), x.dtype)
        return (x, probs) if return_attention else x

    def compute_output_shape(self, input_shape):
        return input_shape

    def options(self) -> dict:
        """The family options (`BLOCK_OPTIONS`' keys) as built."""
        return dict(
            activation=self.activation,
            layer_norm_epsilon=self.layer_norm_epsilon,
            qk_norm=self.qk_norm,
            qkv_bias=self.qkv_bias,
            swiglu=self.swiglu,
            mlp_norm=self.mlp_norm,
            attention_norm=self.attention_norm,
            rotate_half=self.rotate_half,
            key_bias=self.key_bias,
            mixed_rotary_temperature=self.mixed_rotary_temperature,
            rms_norm=self.rms_norm,
            projection_bias=self.projection_bias,
            post_norm=self.post_norm,
            attention_only_layer_scale=self.attention_only_layer_scale,
            parallel_layers=self.parallel_layers,
            differential_attention=self.differential_attention,
            causal=self.causal,
        )

    def computation(self) -> dict:
        """The config that decides what the block computes from its weights at inference: `get_config` less
        the name, trainability and stochastic depth (`keras_vit.nn.block_graph` keys its functions by it)."""
        return {
            "num_heads": self.num_heads,
            "mlp_dim": self.mlp_dim,
            "dropout_rate": self.dropout_rate,
            "num_key_value_heads": self.num_key_value_heads,
            "attention_dropout_rate": self.attention_dropout_rate,
            "remat": self.remat,
            "layer_scale_init": self.layer_scale_init,
            **self.options(),
            **({"block_index": self._block_index} if self.differential_attention else {}),
        }

    def get_config(self):
        return {**super().get_config(), **self.computation(), "drop_path_rate": self.drop_path_rate}
