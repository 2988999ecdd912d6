"""Position embeddings kept at the grid they were trained on and resampled to each input's grid when called:
FlexiViT's and NaFlex's (SigLIP 2's variable-resolution mode; timm's `naflexvit`: SigLIP 2 NaFlex, RADIO).

The table holds the patches' rows only (the class and register tokens have none). For a grid of rows x cols it
is resampled with the source's own rule, written as two resampling matrices (one per axis) so it runs in
`keras.ops` on every backend, for a static grid (a fixed-size model: worked out once) or a symbolic one:

- "learned": one (rows, cols, D) table, resized by `interpolation` ("bicubic": Keys a = -0.5; "bilinear"),
  antialiased when shrinking if `antialias` (PyTorch's `F.interpolate(..., antialias=True)`), sample centres
  aligned, or end points aligned with `align_corners` (bilinear without antialiasing only);
- "factorized": a (rows, D) and a (cols, D) table, each resized linearly (no antialiasing, centres aligned),
  their sum broadcast over the grid.

With `aspect_preserving` both axes are first resized to the longer side (a square), and the grid's top-left
rows x cols are kept (RADIO, timm's `pos_embed_ar_preserving`). A grid equal to the stored one reads the table
unchanged.
"""

from __future__ import annotations

import dataclasses
from typing import Optional, Tuple, Union

import keras
from keras import ops

from keras_vit.nn.initializers import PACKAGE, initial
from keras_vit.utils import validate
from keras_vit.nn.position_embedding import AddPositionEmbedding, _interpolate_axis
from keras_vit.nn.resampling import resampling_matrix


@dataclasses.dataclass(frozen=True)
class PositionResampling:
    """How a resampled position table is stored and resized (a `VisionTransformer(position_resampling=...)`
    dict).

    Attributes:
      grid: (rows, cols) the table is stored at.
      factorized: one table per axis, summed (timm's `pos_embed='factorized'`), instead of one 2-D table.
      interpolation: "bicubic" or "bilinear" (the 2-D table's; a factorized one is always linear).
      antialias: widen the kernel when shrinking (PyTorch's antialias=True).
      align_corners: end points aligned instead of sample centres (bilinear, without antialias).
      aspect_preserving: resize to a square of the longer side, then keep the grid's top-left corner.
    """

    grid: Tuple[int, int] = (16, 16)
    factorized: bool = False
    interpolation: str = "bicubic"
    antialias: bool = True
    align_corners: bool = False
    aspect_preserving: bool = False

    @classmethod
    def from_config(cls, value: Union[None, dict, "PositionResampling"]) -> Optional["PositionResampling"]:
        """The checked record of a constructor's `position_resampling` (None: the paper's table)."""
        if value is None or isinstance(value, PositionResampling):
            return value
        names = [f.name for f in dataclasses.fields(cls)]
        if not isinstance(value, dict):
            raise ValueError(f"position_resampling must be None or a dict of {names}, got {value!r}.")
        unknown = sorted(set(value) - set(names))
        if unknown:
            raise ValueError(f"position_resampling has unknown keys {unknown}.")
        v = dict(value)
        grid = tuple(validate.integers("position_resampling grid", v.get("grid", (16, 16))))
        if len(grid) != 2:
            raise ValueError(f"position_resampling grid is (rows, cols), got {grid}.")
        v["grid"] = grid
        for field in ("factorized", "antialias", "align_corners", "aspect_preserving"):
            if field in v:
                validate.boolean(f"position_resampling {field}", v[field])
        validate.choice("position_resampling interpolation", v.get("interpolation", "bicubic"), ("bicubic", "bilinear"))
        record = cls(**v)
        if record.align_corners and (record.antialias or record.interpolation != "bilinear" or record.factorized):
            raise ValueError(
                "position_resampling align_corners=True is PyTorch's bilinear rule without "
                "antialiasing on a 2-D table: set interpolation='bilinear' and antialias=False."
            )
        return record

    def to_config(self) -> dict:
        out = dataclasses.asdict(self)
        out["grid"] = list(self.grid)
        return out

    def axis_matrix(self, axis: int, size, longest):
        """(size, stored) float32 weights taking the stored table's `axis` to `size` samples (`longest`: the
        grid's longer side, what an aspect-preserving table is first resized to)."""
        stored = self.grid[axis]
        resized = longest if self.aspect_preserving else size
        if self.factorized:
            return resampling_matrix(stored, resized, 0, size, "bilinear", False)
        if self.align_corners:  # the original code's end-aligned linear rule, applied to the identity
            return _interpolate_axis(ops.eye(stored, dtype="float32"), resized, 0)[:size]
        return resampling_matrix(stored, resized, 0, size, self.interpolation, self.antialias)


@keras.saving.register_keras_serializable(package=PACKAGE)
class ResampledPositionEmbedding(AddPositionEmbedding):
    """Adds a position table stored at `resampling.grid` and resampled to the grid of the images
    (`call(tokens, images)`, `stride` pixels per patch side) or to any grid (`table(rows, cols)`), to tokens that
    are the patches alone (prefix tokens join afterwards). Weights: `pos_embedding` (1, rows * cols, D), or
    `pos_embedding_y` (1, rows, D) and `pos_embedding_x` (1, cols, D) when factorized."""

    def __init__(self, resampling: Union[dict, PositionResampling], stride: int, **kwargs):
        kwargs.pop("grid_size", None), kwargs.pop("num_prefix_tokens", None), kwargs.pop("interpolation", None)
        self.resampling = PositionResampling.from_config(resampling)
        super().__init__(self.resampling.grid, 0, stride=stride, **kwargs)

    def build(self, tokens_shape, images_shape=None):
        init = initial(keras.initializers.RandomNormal(stddev=0.02))
        width = tokens_shape[-1]
        if self.resampling.factorized:
            self.pos_embedding_y = self.add_weight(
                name="pos_embedding_y", shape=(1, self.grid_size[0], width), initializer=init
            )
            self.pos_embedding_x = self.add_weight(
                name="pos_embedding_x", shape=(1, self.grid_size[1], width), initializer=init
            )
        else:
            self.pos_embedding = self.add_weight(
                name="pos_embedding", shape=(1, self.num_tokens, width), initializer=init
            )

    def table(self, rows, cols, dtype="float32"):
        """The (1, rows * cols, D) table for a grid of rows x cols (ints or scalar tensors)."""
        longest = None
        if self.resampling.aspect_preserving:
            longest = max(rows, cols) if isinstance(rows, int) and isinstance(cols, int) else ops.maximum(rows, cols)
        r = self.resampling.axis_matrix(0, rows, longest)
        c = self.resampling.axis_matrix(1, cols, longest)
        if self.resampling.factorized:
            y = ops.matmul(r, ops.cast(self.pos_embedding_y[0], "float32"))
            x = ops.matmul(c, ops.cast(self.pos_embedding_x[0], "float32"))
            grid = y[:, None, :] + x[None, :, :]
        else:
            stored = ops.reshape(ops.cast(self.pos_embedding, "float32"), (*self.grid_size, -1))
            grid = ops.einsum("ih,hwd,jw->ijd", r, stored, c)
        return ops.cast(ops.reshape(grid, (1, -1, ops.shape(grid)[-1])), dtype)

    def call(self, tokens, images=None):
        return tokens + self.table(*self.grid_of(images), tokens.dtype)

    def get_config(self):
        config = super().get_config()
        for key in ("grid_size", "num_prefix_tokens", "interpolation"):
            config.pop(key)
        return {**config, "resampling": self.resampling.to_config()}
