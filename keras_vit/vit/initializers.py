"""The official Flax code's initializers, and the package name every keras_vit layer registers under.

While weights follow the build (`VisionTransformer(weights=...)`: the loader assigns every variable right
after), `initial` gives zeros instead of random draws: drawing a ViT-B's 86 M random values only to overwrite
them was a measurable part of every cold start (BENCHMARKS.md, "Cold start").
"""

from __future__ import annotations

import contextlib
import contextvars
import math
from typing import Iterator

import keras

PACKAGE = "keras_vit"
_WEIGHTS_FOLLOW = contextvars.ContextVar("keras_vit_weights_follow", default=False)


@contextlib.contextmanager
def weights_follow(active: bool = True) -> Iterator[None]:
    """Within it, layers built get zeros from `initial`: a loader overwrites them at once. `active=False`
    changes nothing (an enclosing `weights_follow` still holds)."""
    token = _WEIGHTS_FOLLOW.set(bool(active) or _WEIGHTS_FOLLOW.get())
    try:
        yield
    finally:
        _WEIGHTS_FOLLOW.reset(token)


def initial(initializer) -> keras.initializers.Initializer:
    """`initializer` (an initializer or its name), or zeros while weights follow the build."""
    return keras.initializers.Zeros() if _WEIGHTS_FOLLOW.get() else keras.initializers.get(initializer)


def xavier_uniform(fan_in: int, fan_out: int) -> keras.initializers.Initializer:
    """Glorot uniform for kernels whose "in" and "out" span several axes (flax `DenseGeneral`)."""
    limit = math.sqrt(6.0 / (fan_in + fan_out))
    return initial(keras.initializers.RandomUniform(-limit, limit))


def mlp_bias_init() -> keras.initializers.Initializer:
    """The MLP biases' near-zero normal init (stddev 1e-6), as in the official `MlpBlock`."""
    return initial(keras.initializers.RandomNormal(stddev=1e-6))
