"""Stochastic depth (Huang et al., 2016), as timm's DropPath: a residual branch dropped for whole examples while
training, the kept ones scaled by 1 / keep so the expectation is unchanged; the identity at inference."""

from __future__ import annotations

from typing import Optional

import keras
from keras import ops

from keras_vit.nn.initializers import PACKAGE
from keras_vit.nn.specs import ArraySpecs


@keras.saving.register_keras_serializable(package=PACKAGE)
class DropPath(ArraySpecs, keras.layers.Layer):
    """Stochastic depth: drops a whole residual branch per example while training."""

    def __init__(self, rate: float = 0.0, seed: Optional[int] = None, **kwargs):
        super().__init__(**kwargs)
        if not 0.0 <= rate < 1.0:
            raise ValueError(f"DropPath rate must be in [0, 1), got {rate}.")
        self.rate = float(rate)
        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator(seed)

    def call(self, x, training=None):
        if not training or self.rate == 0.0:
            return x
        keep = 1.0 - self.rate
        shape = (ops.shape(x)[0],) + (1,) * (len(x.shape) - 1)
        mask = keras.random.uniform(shape, seed=self.seed_generator) < keep
        return ops.where(mask, x / ops.cast(keep, x.dtype), ops.zeros_like(x))

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return {**super().get_config(), "rate": self.rate, "seed": self.seed}
