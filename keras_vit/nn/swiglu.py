"""The SwiGLU MLP (Shazeer, "GLU Variants Improve Transformer", 2020): (Swish(x W) * x V) W2.

EVA-02, DINOv3's "plus" models, Perception Encoder's language-aligned towers and AIMv2 use it in place of the
paper's GELU MLP; EVA-02's base and large models add a LayerNorm on the gated hidden layer before W2 (its
"sub-LN", timm's `scale_mlp`). The layers keep the MLP block's names where they play the same part, so that
LoRA's "Dense_0" / "Dense_1" targets and the sharding rules carry over: `Dense_0` is V (the linear branch),
`gate` is W (the Swish branch), `Dense_1` is W2. timm stores W and V either packed in one `fc1` (gate first)
or as `fc1_g` / `fc1_x`; both are read into these.
"""

from __future__ import annotations

import keras
from keras import ops

from keras_vit.nn.affine import dense_affine
from keras_vit.nn.initializers import PACKAGE, mlp_bias_init, xavier_uniform
from keras_vit.nn.norm_core import fuses, normed_matmul
from keras_vit.nn.rms_norm import normalization
from keras_vit.nn.specs import ArraySpecs


@keras.saving.register_keras_serializable(package=PACKAGE)
class SwiGLU(ArraySpecs, keras.layers.Layer):
    """(batch, tokens, D) -> Dense_1(norm(silu(gate(x)) * Dense_0(x))), with dropout after the product and
    after Dense_1.

    Args:
      mlp_dim: the hidden width (of each of the two branches).
      dropout_rate: dropout after the gated product and after the output projection.
      hidden_norm: a LayerNorm on the gated hidden layer (EVA-02's sub-LN).
      layer_norm_epsilon: that LayerNorm's epsilon.
      rms_norm: that norm an RMSNorm (AIMv2).
      use_bias: biases on the three Dense layers (AIMv2 has none).

    Called with a `norm` layer (a pre-norm block's LayerNorm), the MLP reads `norm(x)`; training calls take the norm
    and the two input kernels as one product (`keras_vit.nn.norm_core`).
    """

    def __init__(
        self,
        mlp_dim: int,
        dropout_rate: float = 0.0,
        hidden_norm: bool = False,
        layer_norm_epsilon: float = 1e-6,
        rms_norm: bool = False,
        use_bias: bool = True,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.mlp_dim, self.dropout_rate = int(mlp_dim), float(dropout_rate)
        self.hidden_norm, self.layer_norm_epsilon = bool(hidden_norm), float(layer_norm_epsilon)
        self.rms_norm, self.use_bias = bool(rms_norm), bool(use_bias)
        self.activation = "silu"  # what `SwiGLU` means; recorded for the block function's cache key
        self.dropout = keras.layers.Dropout(self.dropout_rate, dtype=self.dtype_policy)
        self.norm = (
            normalization(self.layer_norm_epsilon, "norm", self.dtype_policy, self.rms_norm)
            if self.hidden_norm
            else None
        )

    def build(self, input_shape):
        d = input_shape[-1]
        hidden = tuple(input_shape[:-1]) + (self.mlp_dim,)
        for attribute, name, fan_in, fan_out in (
            ("dense_0", "Dense_0", d, self.mlp_dim),
            ("gate", "gate", d, self.mlp_dim),
            ("dense_1", "Dense_1", self.mlp_dim, d),
        ):
            layer = keras.layers.Dense(
                fan_out,
                kernel_initializer=xavier_uniform(fan_in, fan_out),
                use_bias=self.use_bias,
                bias_initializer=mlp_bias_init(),
                dtype=self.dtype_policy,
                name=name,
            )
            layer.build(hidden if name == "Dense_1" else input_shape)
            setattr(self, attribute, layer)
        if self.norm is not None:
            self.norm.build(hidden)

    def call(self, x, training=None, norm=None):
        gate, linear = self._branches(x, training, norm)
        y = ops.silu(gate) * linear
        y = self.dropout(y, training=training)
        if self.norm is not None:
            y = self.norm(y)
        return self.dropout(dense_affine(self.dense_1, y), training=training)

    def _branches(self, x, training, norm):
        """(x W, x V) of `norm(x)` (of `x` without a `norm`). A training call takes the norm and both products as
        one matmul over the two kernels side by side (`keras_vit.nn.norm_core`) where both are float (LoRA
        included); otherwise each Dense layer runs on its own (one product with its bias on PyTorch)."""
        layers = (self.gate, self.dense_0)
        if any(d.quantization_mode is not None for d in layers) or not fuses(norm, training, x):
            x = x if norm is None else norm(x)
            return dense_affine(self.gate, x), dense_affine(self.dense_0, x)
        kernel = ops.concatenate([ops.cast(d.kernel, x.dtype) for d in layers], axis=-1)
        h = normed_matmul(x, norm, kernel)
        if self.use_bias:
            h = h + ops.concatenate([ops.cast(d.bias, h.dtype) for d in layers], axis=-1)
        return ops.split(h, [self.mlp_dim], axis=-1)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return {
            **super().get_config(),
            "mlp_dim": self.mlp_dim,
            "dropout_rate": self.dropout_rate,
            "hidden_norm": self.hidden_norm,
            "layer_norm_epsilon": self.layer_norm_epsilon,
            "rms_norm": self.rms_norm,
            "use_bias": self.use_bias,
        }
