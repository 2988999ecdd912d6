"""Separable resampling as a matrix: the weights that take one axis of an image (or a position table) to another
size, in `keras.ops`, so a resize runs on every backend, under XLA / jit and for sizes known only at run time.

Each output pixel is a normalised weighted sum of the input pixels its kernel covers. With antialiasing the kernel
is widened by the downscaling factor, as PIL (and so timm and `transformers`) resize; without it the kernel keeps
its width, as `tf.image.resize` does. Kernels: bilinear (triangle), bicubic (Keys, a = -0.5, PIL's and
TensorFlow's), nearest.

The same formulas run in numpy on the host (`HOST`) where the sizes change with every image (a folder of photos):
`keras.ops` on JAX compiles each new shape, a numpy matrix costs microseconds.
"""

from __future__ import annotations

import numpy as np
from keras import ops


class _NumpyOps:
    """The few `keras.ops` names the formulas use, in numpy."""

    def __getattr__(self, name):
        return getattr(np, name)

    @staticmethod
    def cast(x, dtype):
        return np.asarray(x, dtype)


HOST = _NumpyOps()


def _kernel(x, interpolation: str, ops=ops):
    """The resampling kernel at distances `x` (a float tensor)."""
    x = ops.abs(x)
    if interpolation == "bilinear":
        return ops.maximum(1.0 - x, 0.0)
    if interpolation == "nearest":
        return ops.cast(ops.logical_and(ops.greater_equal(x, -0.5), ops.less(x, 0.5)), "float32")
    a = -0.5
    near = ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0
    far = ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a
    return ops.where(ops.less(x, 1.0), near, ops.where(ops.less(x, 2.0), far, 0.0))


def resampling_matrix(in_size, resized, offset, out_size: int, interpolation: str, antialias: bool, ops=ops):
    """(out_size, in_size) float32 weights taking an axis of `in_size` pixels to pixels `offset ...
    offset + out_size` of the same axis resized to `resized` pixels. Sizes may be ints or scalar tensors.
    `ops=HOST` evaluates it in numpy (int sizes)."""
    in_f = ops.cast(in_size, "float32")
    scale = in_f / ops.cast(resized, "float32")  # input pixels per output pixel
    width = ops.maximum(scale, 1.0) if antialias else ops.ones_like(scale)
    centers = (ops.cast(ops.arange(out_size), "float32") + ops.cast(offset, "float32") + 0.5) * scale
    positions = ops.cast(ops.arange(in_size), "float32") + 0.5
    if interpolation == "nearest":  # the input pixel the output centre falls in
        index = ops.minimum(ops.floor(centers), in_f - 1.0)
        return ops.cast(ops.equal(positions[None, :] - 0.5, index[:, None]), "float32")
    weights = _kernel((positions[None, :] - centers[:, None]) / width, interpolation, ops)
    return weights / ops.maximum(ops.sum(weights, axis=1, keepdims=True), 1e-12)
