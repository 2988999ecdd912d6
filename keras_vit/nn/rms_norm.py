"""RMSNorm (Zhang and Sennrich, 2019): x / sqrt(mean(x^2) + epsilon) * scale, no centring and no bias.

AIMv2, Sapiens2 and timm's RMSNorm ViTs normalise with it where the paper's model has LayerNorm. This is Keras'
own `RMSNormalization` with its statistics taken in float32 for 16-bit inputs, as keras_vit's LayerNorm takes
them; `normalization` picks between the two for every norm of a model.
"""

from __future__ import annotations

import keras
from keras import ops

from keras_vit.nn.initializers import PACKAGE
from keras_vit.nn.layer_norm import LayerNorm


@keras.saving.register_keras_serializable(package=PACKAGE)
class RMSNorm(keras.layers.RMSNormalization):
    """`keras.layers.RMSNormalization` over the last axis, computed in float32 (weights: `scale`)."""

    def call(self, x):
        wide = ops.cast(x, keras.backend.result_type(x.dtype, "float32"))
        y = ops.rms_normalization(wide, scale=ops.cast(self.scale, wide.dtype), axis=self.axis, epsilon=self.epsilon)
        return ops.cast(y, self.compute_dtype)


def normalization(epsilon: float, name: str, dtype=None, rms: bool = False) -> keras.layers.Layer:
    """A LayerNorm, or with `rms` an RMSNorm, over the last axis."""
    if rms:
        return RMSNorm(epsilon=epsilon, dtype=dtype, name=name)
    return LayerNorm(epsilon=epsilon, dtype=dtype, name=name)
