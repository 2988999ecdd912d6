"""Multihead attention pooling (MAP): the head of SigLIP and of big_vision's `pool_type="map"` ViTs.

Instead of reading a class token or averaging, one learned query (the "probe") attends over the encoded patch
tokens; the result goes through a residual MLP block (LayerNorm, MLP) like a Transformer block's second half.
Weights are named as big_vision's `MAPHead` (`probe`, `MultiHeadDotProductAttention_0`, `LayerNorm_0`,
`MlpBlock_0`); timm's `AttentionPoolLatent` holds the same tensors (`latent`, `q`, `kv` fused, `proj`, `norm`,
`mlp`).
"""

from __future__ import annotations

import math
from typing import Optional

import keras
from keras import ops

from keras_vit.nn.initializers import PACKAGE, xavier_uniform
from keras_vit.nn.rms_norm import normalization
from keras_vit.nn.projection import Projection
from keras_vit.nn.mlp import MlpBlock, activation_name
from keras_vit.nn.specs import ArraySpecs


@keras.saving.register_keras_serializable(package=PACKAGE)
class AttentionPooling(ArraySpecs, keras.layers.Layer):
    """(batch, tokens, D) -> (batch, D): a learned probe's attention over the tokens, then y + MLP(LN(y)).

    Args:
      num_heads: attention heads (the encoder's).
      mlp_dim: the MLP's hidden width (the encoder's).
      activation: the MLP's activation (`keras_vit.nn.mlp.ACTIVATIONS`; default the tanh GELU, big_vision's).
      layer_norm_epsilon: the LayerNorm's epsilon.
      num_prefix_tokens: leading tokens (class, registers) the probe does not attend to (timm's default).
    """

    def __init__(
        self,
        num_heads: int,
        mlp_dim: int,
        activation: Optional[str] = None,
        layer_norm_epsilon: float = 1e-6,
        num_prefix_tokens: int = 0,
        rms_norm: bool = False,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.num_heads, self.mlp_dim = int(num_heads), int(mlp_dim)
        self.num_prefix_tokens = int(num_prefix_tokens)  # rows skipped: the probe attends to patch tokens only
        self.activation = activation_name(activation, None)
        self.layer_norm_epsilon = float(layer_norm_epsilon)
        self.rms_norm = bool(rms_norm)
        self.layer_norm = normalization(self.layer_norm_epsilon, "LayerNorm_0", self.dtype_policy, self.rms_norm)
        self.mlp = MlpBlock(self.mlp_dim, activation=self.activation, dtype=self.dtype_policy, name="MlpBlock_0")

    def build(self, input_shape):
        d = int(input_shape[-1])
        if d % self.num_heads:
            raise ValueError(f"hidden_size {d} is not divisible by num_heads {self.num_heads}.")
        h, dh = self.num_heads, d // self.num_heads
        self.probe = self.add_weight(name="probe", shape=(1, 1, d), initializer=xavier_uniform(1, d))
        init = xavier_uniform(d, d)
        for name in ("query", "key", "value"):
            layer = Projection(
                "btd,dhk->bthk",
                output_shape=(None, h, dh),
                bias_axes="hk",
                input_axes=1,
                kernel_initializer=init,
                dtype=self.dtype_policy,
                name=name,
            )
            layer.build((None, None, d))
            setattr(self, name, layer)
        self.out = Projection(
            "bthk,hkd->btd",
            output_shape=(None, d),
            bias_axes="d",
            input_axes=2,
            kernel_initializer=init,
            dtype=self.dtype_policy,
            name="out",
        )
        self.out.build((None, None, h, dh))
        self.layer_norm.build((None, 1, d))
        self.mlp.build((None, 1, d))

    def call(self, x, return_attention: bool = False):
        x = x[:, self.num_prefix_tokens :] if self.num_prefix_tokens else x
        probe = ops.broadcast_to(ops.cast(self.probe, x.dtype), (ops.shape(x)[0], 1, ops.shape(x)[-1]))
        q, k, v = self.query(probe), self.key(x), self.value(x)
        scale = ops.cast(1.0 / math.sqrt(int(q.shape[-1])), q.dtype)
        probs = ops.softmax(ops.cast(ops.einsum("bqhd,bkhd->bhqk", q * scale, k), "float32"), axis=-1)
        y = self.out(ops.einsum("bhqk,bkhd->bqhd", ops.cast(probs, v.dtype), v))
        y = y + self.mlp(self.layer_norm(y))
        return (y[:, 0], probs) if return_attention else y[:, 0]

    def compute_output_shape(self, input_shape):
        return (input_shape[0], input_shape[-1])

    def get_config(self):
        return {
            **super().get_config(),
            "num_heads": self.num_heads,
            "mlp_dim": self.mlp_dim,
            "activation": self.activation,
            "layer_norm_epsilon": self.layer_norm_epsilon,
            "num_prefix_tokens": self.num_prefix_tokens,
            "rms_norm": self.rms_norm,
        }
