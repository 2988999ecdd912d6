"""Learned position embeddings, and their resizing at call time for models of any input size.

Two resizing rules, as the sources' own code resizes: "linear", the original code's (`scipy.ndimage.zoom
(order=1)` per axis, end points aligned: `interpolate_grid`), and "bicubic", timm's (`F.interpolate(...,
mode="bicubic", antialias=True)`: separable Keys kernels, a = -0.5, pixel centres aligned, widened when
shrinking: `keras_vit.nn.resampling.resampling_matrix`). Both are written in `keras.ops`, so they run on
every backend and under XLA; `keras_vit.resize_position_embeddings` applies the same rules to checkpoints.
"""

from __future__ import annotations

from typing import Optional, Sequence

import keras
from keras import ops

from keras_vit.utils import validate
from keras_vit.nn.initializers import PACKAGE as _PACKAGE
from keras_vit.nn.initializers import initial
from keras_vit.nn.resampling import resampling_matrix
from keras_vit.nn.specs import ArraySpecs


@keras.saving.register_keras_serializable(package=_PACKAGE)
class AddPositionEmbedding(ArraySpecs, keras.layers.Layer):
    """Adds learned 1-D position embeddings, one row per token (normal(0.02) init).

    `grid_size` (rows, cols of patches) and `num_prefix_tokens` (1 with a class
    token, 0 for 'gap') are kept so the table can be resized and inspected. With
    `stride` set (a model of any input size), `call(tokens, images)` resizes the
    patch rows to the grid of `images` (H // stride, W // stride) by the original
    code's rule (`zoom(order=1)`, see `interpolate_grid`); the prefix rows stay.
    """

    def __init__(
        self,
        grid_size: Sequence[int],
        num_prefix_tokens: int = 1,
        stride: Optional[int] = None,
        interpolation: str = "linear",
        **kwargs,
    ):
        super().__init__(**kwargs)
        if interpolation not in INTERPOLATIONS:
            raise ValueError(f"interpolation={interpolation!r}; expected one of {INTERPOLATIONS}.")
        self.interpolation = interpolation
        self.grid_size = tuple(int(g) for g in grid_size)
        self.num_prefix_tokens = int(num_prefix_tokens)
        self.stride = None if stride is None else int(stride)

    @property
    def num_tokens(self) -> int:
        return self.grid_size[0] * self.grid_size[1] + self.num_prefix_tokens

    def build(self, tokens_shape, images_shape=None):
        if self.stride is None and tokens_shape[1] is not None and tokens_shape[1] != self.num_tokens:
            raise ValueError(
                f"AddPositionEmbedding expects {self.num_tokens} tokens (grid {self.grid_size} + "
                f"{self.num_prefix_tokens} prefix), got {tokens_shape[1]}."
            )
        self.pos_embedding = self.add_weight(
            name="pos_embedding",
            shape=(1, self.num_tokens, tokens_shape[-1]),
            initializer=initial(keras.initializers.RandomNormal(stddev=0.02)),
        )

    def call(self, tokens, images=None):
        table = ops.cast(self.pos_embedding, tokens.dtype)
        if self.stride is not None and images is not None:
            table = self._table_for(table, images)
        return tokens + table

    def grid_of(self, images) -> tuple:
        """(rows, cols) of the patch grid of `images`: Python ints where the size is known, scalar tensors
        otherwise; a size that is not a multiple of the stride is refused naming the nearest that are."""
        for axis, size in (("height", images.shape[1]), ("width", images.shape[2])):
            if size is not None and size % self.stride:
                raise ValueError(
                    f"Input {axis} {size} is not a multiple of the effective patch size {self.stride}; "
                    f"{validate.nearest_multiples(size, self.stride)} would work."
                )
        return tuple(
            images.shape[i] // self.stride if images.shape[i] is not None else ops.shape(images)[i] // self.stride
            for i in (1, 2)
        )

    def _table_for(self, table, images):
        """The table for the patch grid of `images` (resized unless it is the stored grid)."""
        grid = self.grid_of(images)
        if all(isinstance(g, int) for g in grid) and tuple(grid) == self.grid_size:
            return table
        prefix, patches = table[:, : self.num_prefix_tokens], table[0, self.num_prefix_tokens :]
        patches = ops.reshape(patches, (*self.grid_size, -1))
        patches = resample_grid(patches, grid, self.interpolation)
        patches = ops.reshape(patches, (1, -1, ops.shape(table)[-1]))
        return ops.concatenate([prefix, patches], axis=1)

    def compute_output_shape(self, tokens_shape, images_shape=None):
        return tokens_shape

    def get_config(self):
        return {
            **super().get_config(),
            "grid_size": list(self.grid_size),
            "num_prefix_tokens": self.num_prefix_tokens,
            "stride": self.stride,
            "interpolation": self.interpolation,
        }


INTERPOLATIONS = ("linear", "bicubic")


def resample_grid(grid, new_grid, interpolation: str = "linear"):
    """(rows, cols, D) position embeddings resized to `new_grid` by `interpolation` ("linear": the original
    code's; "bicubic": timm's)."""
    if interpolation == "linear":
        return interpolate_grid(grid, new_grid)
    rows = resampling_matrix(ops.shape(grid)[0], new_grid[0], 0, new_grid[0], "bicubic", True)
    cols = resampling_matrix(ops.shape(grid)[1], new_grid[1], 0, new_grid[1], "bicubic", True)
    return ops.einsum("ih,hwd,jw->ijd", ops.cast(rows, grid.dtype), grid, ops.cast(cols, grid.dtype))


def _interpolate_axis(x, new_size, axis: int):
    """Linear interpolation of `x` along `axis` to `new_size` samples, end points aligned (scipy's
    `zoom(order=1)`: sample i of n reads input coordinate i * (old - 1) / (n - 1))."""
    old = x.shape[axis]
    if old == 1:
        return ops.repeat(x, new_size, axis=axis)
    positions = ops.cast(ops.arange(new_size), "float32")
    scale = ops.cast(old - 1, "float32") / ops.cast(ops.maximum(new_size - 1, 1), "float32")
    coords = positions * scale
    low = ops.minimum(ops.cast(ops.floor(coords), "int32"), old - 1)
    high = ops.minimum(low + 1, old - 1)
    weight = ops.cast(coords - ops.cast(low, "float32"), x.dtype)
    shape = [1] * len(x.shape)
    shape[axis] = -1
    weight = ops.reshape(weight, shape)
    return ops.take(x, low, axis=axis) * (1 - weight) + ops.take(x, high, axis=axis) * weight


def interpolate_grid(grid, new_grid):
    """(rows, cols, D) position embeddings resized to `new_grid` (ints or scalar tensors), in keras.ops:
    the same map as `keras_vit.resize_position_embeddings` (scipy `zoom(order=1)`), so it runs at call
    time on every backend and under XLA (one compilation per input size)."""
    return _interpolate_axis(_interpolate_axis(grid, new_grid[0], 0), new_grid[1], 1)
