"""The official Flax code's initializers, and the package name every keras_vit layer registers under.

While weights follow the build (`VisionTransformer(weights=...)`: the loader assigns every variable right
after), `initial` gives zeros instead of random draws: drawing a ViT-B's 86 M random values only to overwrite
them was a measurable part of every cold start (docs/benchmarks-history.md, "Cold start"). On JAX those zeros
are made on the host, one array per shape shared by every variable of that shape (JAX arrays are immutable and the loader
replaces each variable's array): `jax.numpy.zeros` compiles an XLA program per shape, 0.4 s of a ViT-B's build.
On TensorFlow each variable keeps a block of zeros the operating system hands out untouched
(`keras_vit.utils.assign.variables_adopt_fresh_zeros`): `tf.Variable` would fill its zeros and copy them, 2 x
344 MB written for a ViT-B/16 before the loader replaces them.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
from typing import Iterator

import keras
import numpy as np

from keras_vit.utils.assign import fresh_zeros, variables_adopt_fresh_zeros

PACKAGE = "keras_vit"
# None, or while weights follow the build: {(shape, dtype): the zeros JAX variables of that shape share}
_WEIGHTS_FOLLOW: contextvars.ContextVar = contextvars.ContextVar("keras_vit_weights_follow", default=None)


@contextlib.contextmanager
def weights_follow(active: bool = True) -> Iterator[None]:
    """Within it, layers built get zeros from `initial`: a loader overwrites them at once. `active=False`
    changes nothing (an enclosing `weights_follow` still holds)."""
    enclosing = _WEIGHTS_FOLLOW.get()
    starts = active and enclosing is None
    token = _WEIGHTS_FOLLOW.set({} if starts else enclosing)
    try:
        with variables_adopt_fresh_zeros() if starts else contextlib.nullcontext():
            yield
    finally:
        _WEIGHTS_FOLLOW.reset(token)


def initial(initializer) -> keras.initializers.Initializer:
    """`initializer` (an initializer or its name), or zeros while weights follow the build."""
    return FollowedZeros() if _WEIGHTS_FOLLOW.get() is not None else keras.initializers.get(initializer)


@keras.saving.register_keras_serializable(package=PACKAGE)
class FollowedZeros(keras.initializers.Zeros):
    """Zeros for a variable a loader assigns right after the build (see the module docstring)."""

    def __call__(self, shape, dtype=None):
        shared, backend = _WEIGHTS_FOLLOW.get(), keras.backend.backend()
        if shared is None or backend not in ("jax", "tensorflow"):
            return super().__call__(shape, dtype)
        key = (tuple(shape), keras.backend.standardize_dtype(dtype or keras.backend.floatx()))
        if backend == "tensorflow":  # one untouched block per variable, which the variable keeps
            zeros = fresh_zeros(*key)
            return super().__call__(shape, dtype) if zeros is None else zeros
        import jax  # the JAX backend is active: already imported

        if key not in shared:
            shared[key] = jax.device_put(np.zeros(key[0], dtype=jax.numpy.dtype(key[1])))
        return shared[key]


def xavier_uniform(fan_in: int, fan_out: int) -> keras.initializers.Initializer:
    """Glorot uniform for kernels whose "in" and "out" span several axes (flax `DenseGeneral`)."""
    limit = math.sqrt(6.0 / (fan_in + fan_out))
    return initial(keras.initializers.RandomUniform(-limit, limit))


def mlp_bias_init() -> keras.initializers.Initializer:
    """The MLP biases' near-zero normal init (stddev 1e-6), as in the official `MlpBlock`."""
    return initial(keras.initializers.RandomNormal(stddev=1e-6))
