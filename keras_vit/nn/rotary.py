"""Rotary position embeddings (RoPE; Su et al., 2021) over a ViT's 2-D patch grid, in the forms the rotary backbones (EVA-02, DINOv3, PE, RoPE-ViT)
backbones use.

Each head's queries and keys are rotated, pair of channels by pair of channels, by angles that grow with the
token's row and column: `q' = q cos(a) + rot(q) sin(a)`. A quarter of the head's channels is given to each
axis' frequencies (their sines and their cosines), so the head width must be a multiple of 4. Three forms occur:

- "axial" (EVA-02, Perception Encoder, RoPE-ViT, timm's `RotaryEmbeddingCat`): integer grid positions plus an
  `offset`, frequencies `1 / temperature ** (k / n)`; with a `reference_grid` (EVA-02) the positions are
  rescaled so that any grid spans the grid it was pre-trained on.
- "centered" (DINOv3, timm's `RotaryEmbeddingDinoV3`): positions at the patch centres normalised to [-1, 1] per
  axis, frequencies `2 pi / temperature ** (k / n)`.
- "mixed" (RoPE-Mixed, Heo et al. 2024, timm's `RotaryEmbeddingMixed`): each block and head learns its own
  frequencies, a 2-vector per channel pair, so a pair turns by `f_0 . p_0 + f_1 . p_1` (`temperature` only sets
  their initial magnitudes). The table is then the grid positions themselves, (tokens, 2), and each attention
  layer turns them into angles with its `rotary_frequencies` weight (`apply_mixed_rotary`).

`axis_order` says whose frequencies come first in each head ("ij": the row's, "xy": the column's; timm's
`grid_indexing`), and `rotate_half` how channels are paired: the two halves of the head (GPT-NeoX, DINOv3)
or neighbouring channels (the RoFormer paper's interleaved pairs, EVA-02). Prefix tokens (class, registers)
are not rotated: their rows of the table are the identity. Nothing here is a weight.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Optional, Tuple, Union

import keras
import numpy as np
from keras import ops

from keras_vit.nn.initializers import PACKAGE
from keras_vit.nn.specs import ArraySpecs
from keras_vit.utils import validate

ROTARY_FORMS = ("axial", "centered", "mixed")


@dataclasses.dataclass(frozen=True)
class Rotary:
    """How a model's rotary embeddings are laid out (a `VisionTransformer(rotary_embedding=...)` dict).

    Attributes:
      form: "axial", "centered" or "mixed" (see the module docstring).
      temperature: the frequencies' base (10000 EVA-02 and PE, 100 DINOv3 and RoPE-ViT).
      offset: added to every grid position before scaling (PE: 1).
      axis_order: "ij" (the row's frequencies first) or "xy" (the column's first).
      reference_grid: (rows, cols) that positions are rescaled to span, whatever the grid ("axial" only).
      rotate_half: pair channel i with i + head_dim / 2 (True) or with its neighbour (False).
    """

    form: str = "axial"
    temperature: float = 10000.0
    offset: float = 0.0
    axis_order: str = "ij"
    reference_grid: Optional[Tuple[int, int]] = None
    rotate_half: bool = False

    @classmethod
    def from_config(cls, value: Union[None, dict, "Rotary"]) -> Optional["Rotary"]:
        """The checked record of a constructor's `rotary_embedding` (None: no rotary embeddings)."""
        if value is None or isinstance(value, Rotary):
            return value
        if not isinstance(value, dict):
            raise ValueError(
                f"rotary_embedding must be None or a dict of {[f.name for f in dataclasses.fields(cls)]}, "
                f"got {value!r}."
            )
        unknown = sorted(set(value) - {f.name for f in dataclasses.fields(cls)})
        if unknown:
            raise ValueError(f"rotary_embedding has unknown keys {unknown}.")
        v = dict(value)
        validate.choice("rotary_embedding form", v.get("form", "axial"), ROTARY_FORMS)
        validate.choice("rotary_embedding axis_order", v.get("axis_order", "ij"), ("ij", "xy"))
        v["temperature"] = validate.number("rotary_embedding temperature", v.get("temperature", 10000.0), positive=True)
        v["offset"] = float(validate.number("rotary_embedding offset", v.get("offset", 0.0)))
        v["rotate_half"] = validate.boolean("rotary_embedding rotate_half", v.get("rotate_half", False))
        if v.get("reference_grid") is not None:
            grid = tuple(validate.integers("rotary_embedding reference_grid", v["reference_grid"]))
            if len(grid) != 2 or v.get("form", "axial") != "axial":
                raise ValueError("rotary_embedding reference_grid is (rows, cols), for the 'axial' form only.")
            v["reference_grid"] = grid
        if v.get("form") == "mixed" and (v["rotate_half"] or v["offset"]):
            raise ValueError(
                "rotary_embedding form 'mixed' pairs neighbouring channels at integer grid positions: "
                "rotate_half and offset do not apply."
            )
        return cls(**v)

    def to_config(self) -> dict:
        out = dataclasses.asdict(self)
        out["reference_grid"] = list(self.reference_grid) if self.reference_grid is not None else None
        return out


def _positions(rotary: Rotary, size):
    """One axis' positions (float32) for a grid side of `size` (a Python int or a scalar tensor)."""
    index = ops.cast(ops.arange(size), "float32")
    side = ops.cast(size, "float32")
    if rotary.form == "centered":
        return 2.0 * (index + 0.5 + rotary.offset) / side - 1.0
    return index + rotary.offset


def rotary_angles(rotary: Rotary, head_dim: int, rows, cols):
    """(rows * cols, head_dim / 2) angles, row-major over the grid: each token's axis positions times the
    frequencies, the first axis' (per `axis_order`) first."""
    bands = head_dim // 4
    scale = 2.0 * math.pi if rotary.form == "centered" else 1.0
    freqs = scale / rotary.temperature ** (np.arange(bands, dtype="float64") / bands)
    r, c = _positions(rotary, rows), _positions(rotary, cols)
    if rotary.reference_grid is not None:  # EVA-02: the grid spans the pre-training grid
        r = r / ops.cast(rows, "float32") * rotary.reference_grid[0]
        c = c / ops.cast(cols, "float32") * rotary.reference_grid[1]
    rr, cc = ops.meshgrid(r, c, indexing="ij")
    axes = (rr, cc) if rotary.axis_order == "ij" else (cc, rr)
    freqs = ops.convert_to_tensor(freqs.astype("float32"))
    return ops.concatenate([ops.reshape(a, (-1, 1)) * freqs for a in axes], axis=-1)


def rotation_matrix(head_dim: int, rotate_half: bool) -> np.ndarray:
    """R with x @ R = rot(x): (-x[j + d/2], x[j]) per half (`rotate_half`), or (-x[2i+1], x[2i]) per pair."""
    m = np.zeros((head_dim, head_dim), "float32")
    half = head_dim // 2
    for j in range(half):
        a, b = (j, j + half) if rotate_half else (2 * j, 2 * j + 1)
        m[b, a], m[a, b] = -1.0, 1.0
    return m


@keras.saving.register_keras_serializable(package=PACKAGE)
class RotaryPositionEmbedding(ArraySpecs, keras.layers.Layer):
    """Images -> the (tokens, 2 * head_dim) table [cos | sin] their tokens are rotated by: `num_prefix_tokens`
    identity rows, then one row per patch of the grid the images give (`stride` pixels per patch side), so an
    any-size model follows its input. No weights."""

    def __init__(self, rotary: Union[dict, Rotary], head_dim: int, stride: int, num_prefix_tokens: int = 0, **kwargs):
        super().__init__(**kwargs)
        self.rotary = Rotary.from_config(rotary)
        self.head_dim, self.stride, self.num_prefix_tokens = int(head_dim), int(stride), int(num_prefix_tokens)
        if self.head_dim % 4:
            raise ValueError(f"rotary embeddings need a head width divisible by 4, got {self.head_dim}.")

    def call(self, images):
        shape = ops.shape(images)
        rows, cols = shape[1] // self.stride, shape[2] // self.stride
        if self.rotary.form == "mixed":  # the positions: each attention layer has its own frequencies
            return grid_positions(self.rotary, rows, cols, self.num_prefix_tokens)
        angles = rotary_angles(self.rotary, self.head_dim, rows, cols)
        layout = (
            ops.concatenate([angles, angles], axis=-1)
            if self.rotary.rotate_half
            else ops.reshape(ops.repeat(ops.expand_dims(angles, -1), 2, axis=-1), (-1, self.head_dim))
        )
        table = ops.concatenate([ops.cos(layout), ops.sin(layout)], axis=-1)
        if self.num_prefix_tokens:
            identity = np.concatenate([np.ones(self.head_dim), np.zeros(self.head_dim)]).astype("float32")
            table = ops.concatenate([ops.convert_to_tensor(np.tile(identity, (self.num_prefix_tokens, 1))), table], 0)
        return table

    def compute_output_shape(self, input_shape):
        h, w = input_shape[1], input_shape[2]
        n = None if h is None or w is None else self.num_prefix_tokens + (h // self.stride) * (w // self.stride)
        return (n, 2 if self.rotary.form == "mixed" else 2 * self.head_dim)

    def get_config(self):
        return {
            **super().get_config(),
            "rotary": self.rotary.to_config(),
            "head_dim": self.head_dim,
            "stride": self.stride,
            "num_prefix_tokens": self.num_prefix_tokens,
        }


def apply_rotary(x, table, rotation: np.ndarray):
    """x (batch, tokens, heads, head_dim) rotated by `table` (tokens, 2 * head_dim) [cos | sin]:
    x cos + (x R) sin, in x's dtype (the angles in float32)."""
    d = rotation.shape[0]
    return _rotate(x, ops.reshape(table[:, :d], (1, -1, 1, d)), ops.reshape(table[:, d:], (1, -1, 1, d)), rotation)


def _rotate(x, cos, sin, rotation: np.ndarray):
    """x cos + (x R) sin, in x's dtype: each channel pair turned by its angle (cos and sin broadcast over x)."""
    return x * ops.cast(cos, x.dtype) + ops.matmul(x, ops.cast(rotation, x.dtype)) * ops.cast(sin, x.dtype)


def grid_positions(rotary: Rotary, rows, cols, num_prefix_tokens: int):
    """(prefix + rows * cols, 2) integer grid positions, row-major, per `axis_order` ("xy": column first); the
    prefix tokens' rows are 0, so any frequencies leave them unrotated."""
    r, c = ops.meshgrid(ops.cast(ops.arange(rows), "float32"), ops.cast(ops.arange(cols), "float32"), indexing="ij")
    axes = (r, c) if rotary.axis_order == "ij" else (c, r)
    positions = ops.stack([ops.reshape(a, (-1,)) for a in axes], axis=-1)
    return (
        ops.concatenate([ops.zeros((num_prefix_tokens, 2), "float32"), positions], 0)
        if num_prefix_tokens
        else positions
    )


def mixed_frequencies(num_heads: int, head_dim: int, temperature: float, rng: np.random.Generator) -> np.ndarray:
    """RoPE-Mixed's initial frequencies (2, heads, head_dim / 2): magnitudes `temperature ** (-4k / head_dim)`, the
    two axes' components of a direction drawn per head (and its perpendicular for the second half of the pairs)."""
    magnitude = 1.0 / temperature ** (np.arange(0, head_dim, 4) / head_dim)
    angle = rng.uniform(0, 2 * np.pi, (num_heads, 1))
    fx = np.concatenate([magnitude * np.cos(angle), magnitude * np.cos(angle + np.pi / 2)], -1)
    fy = np.concatenate([magnitude * np.sin(angle), magnitude * np.sin(angle + np.pi / 2)], -1)
    return np.stack([fx, fy]).astype("float32")


def apply_mixed_rotary(x, positions, frequencies, rotation: np.ndarray):
    """x (batch, tokens, heads, head_dim) rotated by RoPE-Mixed: pair j of head h turns by
    `positions . frequencies[:, h, j]` (positions (tokens, 2), frequencies (2, heads, head_dim / 2)); neighbouring
    channels pair up."""
    angles = ops.einsum("tc,chd->thd", ops.cast(positions, "float32"), ops.cast(frequencies, "float32"))
    angles = ops.repeat(angles, 2, axis=-1)[None]  # (1, tokens, heads, head_dim), interleaved pairs
    return _rotate(x, ops.cos(angles), ops.sin(angles), rotation)
