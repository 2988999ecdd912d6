"""The BiT ResNet stem of the hybrid models (paper 3.1 "Hybrid Architecture").

Weight-standardised convolutions + GroupNorm(32), bottleneck units, TF-style
'SAME' padding, as in the original `models_resnet.py`. The stem's feature map is
what the hybrid's 1x1 patch embedding sees.
"""

from __future__ import annotations

from typing import Sequence

import keras
from keras import ops

from keras_vit.nn.initializers import PACKAGE as _PACKAGE
from keras_vit.nn.initializers import initial
from keras_vit.nn.specs import ArraySpecs

GROUP_NORM_GROUPS = 32
GROUP_NORM_EPSILON = 1e-6
STD_CONV_EPSILON = 1e-5
# The stem's numerics: the original code's weight standardisation (w - mean) / (std + 1e-5) and GroupNorm
# epsilon 1e-6, or timm's hybrids' (w - mean) / sqrt(var + 1e-8) and 1e-5: a relative change of about 1e-5 / std
# per kernel, small on random weights (3e-6 on the test fixture) and larger on trained kernels of small spread.
STEM_NUMERICS = {
    "original": dict(root=False, epsilon=STD_CONV_EPSILON, group_norm_epsilon=GROUP_NORM_EPSILON),
    "timm": dict(root=True, epsilon=1e-8, group_norm_epsilon=1e-5),
}


@keras.saving.register_keras_serializable(package=_PACKAGE)
class StdConv2D(ArraySpecs, keras.layers.Conv2D):
    """Conv2D whose kernel is standardised per output channel before use.

    numerics "original": `w = (w - mean) / (std + 1e-5)` over (kh, kw, in) — std plus eps, exactly as the
    original code; "timm": `(w - mean) / sqrt(var + 1e-8)` as timm's `StdConv2dSame`. No bias; 'same' padding
    is TF's (timm's "Same" convolutions pad the same way).
    """

    def __init__(self, filters, kernel_size, strides=1, numerics: str = "original", **kwargs):
        kwargs.setdefault("padding", "same")
        kwargs.setdefault("use_bias", False)
        kwargs.setdefault("kernel_initializer", initial("glorot_uniform"))
        super().__init__(filters, kernel_size, strides=strides, **kwargs)
        if numerics not in STEM_NUMERICS:
            raise ValueError(f"numerics={numerics!r}; expected one of {tuple(STEM_NUMERICS)}.")
        self.numerics = numerics

    def convolution_op(self, inputs, kernel):
        w = ops.cast(kernel, "float32")
        rule = STEM_NUMERICS[self.numerics]
        mean = ops.mean(w, axis=(0, 1, 2), keepdims=True)
        if rule["root"]:
            w = (w - mean) / ops.sqrt(ops.var(w, axis=(0, 1, 2), keepdims=True) + rule["epsilon"])
        else:
            w = (w - mean) / (ops.std(w, axis=(0, 1, 2), keepdims=True) + rule["epsilon"])
        return super().convolution_op(inputs, ops.cast(w, inputs.dtype))

    def get_config(self):
        return {**super().get_config(), "numerics": self.numerics}


def _group_norm(name: str, dtype, zero_scale: bool = False, numerics: str = "original"):
    return keras.layers.GroupNormalization(
        groups=GROUP_NORM_GROUPS,
        epsilon=STEM_NUMERICS[numerics]["group_norm_epsilon"],
        gamma_initializer=initial("zeros" if zero_scale else "ones"),
        beta_initializer=initial("zeros"),
        dtype=dtype,
        name=name,
    )


@keras.saving.register_keras_serializable(package=_PACKAGE)
class ResidualUnit(ArraySpecs, keras.layers.Layer):
    """Bottleneck unit: 1x1 -> 3x3 (strided) -> 1x1 (4x features), GN after each, gn3 zero-init."""

    def __init__(self, features: int, strides: int = 1, numerics: str = "original", **kwargs):
        super().__init__(**kwargs)
        self.features = int(features)
        self.strides = int(strides)
        self.numerics = numerics
        dt, n = self.dtype_policy, numerics
        self.conv1 = StdConv2D(self.features, 1, numerics=n, dtype=dt, name="conv1")
        self.gn1 = _group_norm("gn1", dt, numerics=n)
        self.conv2 = StdConv2D(self.features, 3, strides=self.strides, numerics=n, dtype=dt, name="conv2")
        self.gn2 = _group_norm("gn2", dt, numerics=n)
        self.conv3 = StdConv2D(4 * self.features, 1, numerics=n, dtype=dt, name="conv3")
        self.gn3 = _group_norm("gn3", dt, zero_scale=True, numerics=n)
        self.conv_proj = None
        self.gn_proj = None

    def build(self, input_shape):
        if input_shape[-1] != 4 * self.features or self.strides != 1:
            self.conv_proj = StdConv2D(
                4 * self.features,
                1,
                strides=self.strides,
                numerics=self.numerics,
                dtype=self.dtype_policy,
                name="conv_proj",
            )
            self.gn_proj = _group_norm("gn_proj", self.dtype_policy, numerics=self.numerics)
            self.conv_proj.build(input_shape)
            self.gn_proj.build(self.conv_proj.compute_output_shape(input_shape))
        shape = input_shape
        for conv, gn in ((self.conv1, self.gn1), (self.conv2, self.gn2), (self.conv3, self.gn3)):
            conv.build(shape)
            shape = conv.compute_output_shape(shape)
            gn.build(shape)

    def call(self, x):
        residual = x
        if self.conv_proj is not None:
            residual = self.gn_proj(self.conv_proj(x))
        y = ops.relu(self.gn1(self.conv1(x)))
        y = ops.relu(self.gn2(self.conv2(y)))
        y = self.gn3(self.conv3(y))
        return ops.relu(residual + y)

    def compute_output_shape(self, input_shape):
        return self.conv3.compute_output_shape(self.conv2.compute_output_shape(input_shape))

    def get_config(self):
        return {**super().get_config(), "features": self.features, "strides": self.strides, "numerics": self.numerics}


@keras.saving.register_keras_serializable(package=_PACKAGE)
class ResNetStem(ArraySpecs, keras.layers.Layer):
    """conv_root 7x7/2 -> gn_root -> ReLU -> max-pool 3x3/2 -> stages block1..blockN.

    `numerics`: "original" or "timm" (`STEM_NUMERICS`: the weight standardisation and GroupNorm epsilon).

    Stage i has width 64 * width * 2^(i-1) (output 4x that); its first unit
    strides by 2 except in stage 1. Total down-sampling: 4 * 2^(N-1).
    """

    def __init__(self, layers: Sequence[int], width: float = 1, numerics: str = "original", **kwargs):
        super().__init__(**kwargs)
        self.stage_sizes = tuple(int(n) for n in layers)
        self.width = width
        self.numerics = numerics
        root = int(64 * width)
        dt = self.dtype_policy
        self.conv_root = StdConv2D(root, 7, strides=2, numerics=numerics, dtype=dt, name="conv_root")
        self.gn_root = _group_norm("gn_root", dt, numerics=numerics)
        self.pool = keras.layers.MaxPooling2D(3, strides=2, padding="same", dtype=dt)
        self.units = []
        for s, size in enumerate(self.stage_sizes):
            for u in range(size):
                strides = 2 if (s > 0 and u == 0) else 1
                self.units.append(
                    ResidualUnit(
                        root * 2**s, strides, numerics, dtype=dt, name=f"block{s + 1}/unit{u + 1}".replace("/", "_")
                    )
                )
                self.units[-1].checkpoint_prefix = f"block{s + 1}/unit{u + 1}"

    def build(self, input_shape):
        self.conv_root.build(input_shape)
        shape = self.conv_root.compute_output_shape(input_shape)
        self.gn_root.build(shape)
        shape = self.pool.compute_output_shape(shape)
        for unit in self.units:
            unit.build(shape)
            shape = unit.compute_output_shape(shape)

    def call(self, x):
        x = self.pool(ops.relu(self.gn_root(self.conv_root(x))))
        for unit in self.units:
            x = unit(x)
        return x

    def compute_output_shape(self, input_shape):
        shape = self.pool.compute_output_shape(self.conv_root.compute_output_shape(input_shape))
        for unit in self.units:
            shape = unit.compute_output_shape(shape)
        return shape

    def get_config(self):
        return {
            **super().get_config(),
            "layers": list(self.stage_sizes),
            "width": self.width,
            "numerics": self.numerics,
        }
