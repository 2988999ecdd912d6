"""The official Flax code's initializers, and the package name every keras_vit layer registers under."""

from __future__ import annotations

import math

import keras

PACKAGE = "keras_vit"


def xavier_uniform(fan_in: int, fan_out: int) -> keras.initializers.Initializer:
    """Glorot uniform for kernels whose "in" and "out" span several axes (flax `DenseGeneral`)."""
    limit = math.sqrt(6.0 / (fan_in + fan_out))
    return keras.initializers.RandomUniform(-limit, limit)


def mlp_bias_init() -> keras.initializers.Initializer:
    """The MLP biases' near-zero normal init (stddev 1e-6), as in the official `MlpBlock`."""
    return keras.initializers.RandomNormal(stddev=1e-6)
