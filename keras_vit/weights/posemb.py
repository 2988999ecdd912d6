"""Position-embedding tables between grids: the resize rules of the source's code (the original code's
`zoom(order=1)`, timm's bicubic) applied to checkpoint arrays, and fitting a file's table to a model's."""

from __future__ import annotations

from typing import Optional, Sequence

import keras
import numpy as np

from keras_vit.utils import validate
from keras_vit.nn.position_embedding import resample_grid


def resize_position_embeddings(
    posemb: np.ndarray,
    new_grid: Sequence[int],
    num_prefix_tokens: int = 1,
    old_grid: Optional[Sequence[int]] = None,
    interpolation: str = "linear",
) -> np.ndarray:
    """Resizes a position-embedding table to a new patch grid, as the source's code does.

    The prefix rows (class token) are kept; the grid rows are reshaped to (gh, gw, D) and resized with one
    factor per axis (so non-square grids work), then flattened back. `interpolation`: "linear", the original
    code's `scipy.ndimage.zoom(order=1)`; "bicubic", timm's antialiased bicubic (the model's
    `variant.position_interpolation`, which loaders set from the source).

    Args:
      posemb: (1, tokens, D) or (tokens, D).
      new_grid: (rows, cols) of the target patch grid.
      num_prefix_tokens: rows before the grid (1 for a class token, 0 for 'gap').
      old_grid: (rows, cols) of `posemb`'s grid; inferred when square.
    """
    import scipy.ndimage

    posemb = np.asarray(posemb)
    validate.integer("num_prefix_tokens", num_prefix_tokens, minimum=0)
    squeeze = posemb.ndim == 2
    if squeeze:
        posemb = posemb[None]
    if posemb.ndim != 3 or posemb.shape[0] != 1:
        raise ValueError(f"posemb must be (1, tokens, D) or (tokens, D), got {posemb.shape}.")
    prefix, grid = posemb[:, :num_prefix_tokens], posemb[0, num_prefix_tokens:]
    n = grid.shape[0]
    if old_grid is None:
        side = int(round(np.sqrt(n)))
        if side * side != n:
            raise ValueError(
                f"Cannot infer the grid of {n} position embeddings (not a square); pass old_grid=(rows, cols)."
            )
        old_grid = (side, side)
    old_grid, new_grid = tuple(int(g) for g in old_grid), tuple(int(g) for g in new_grid)
    if old_grid[0] * old_grid[1] != n:
        raise ValueError(f"old_grid {old_grid} does not match {n} position embeddings.")
    grid = grid.reshape(old_grid + (-1,))
    if interpolation == "bicubic":
        resized = resample_grid(keras.ops.convert_to_tensor(grid.astype("float32")), new_grid, "bicubic")
        zoomed = np.asarray(keras.ops.convert_to_numpy(resized)).reshape(1, new_grid[0] * new_grid[1], -1)
    else:
        factors = (new_grid[0] / old_grid[0], new_grid[1] / old_grid[1], 1)
        zoomed = scipy.ndimage.zoom(grid, factors, order=1).reshape(1, new_grid[0] * new_grid[1], -1)
    out = np.concatenate([prefix, zoomed.astype(posemb.dtype)], axis=1)
    return out[0] if squeeze else out


def fit_posemb(
    value: np.ndarray,
    model,
    file_prefix: int,
    resize: bool,
    old_grid: Optional[Sequence[int]],
    key: str,
    problems: list,
) -> Optional[np.ndarray]:
    """A file's position table fitted to `model`'s (its prefix rows dropped for a model without prefix tokens,
    the grid resized by the model's rule), or None after appending to `problems` why it cannot be."""
    layer = model.position_embedding
    resampled = getattr(layer, "resampling", None)
    if value.ndim == 4 or resampled is not None:
        return _fit_resampled(value, layer, resampled, model.name, key, problems)
    want = (1, layer.num_tokens, value.shape[-1])
    if file_prefix > layer.num_prefix_tokens:  # token checkpoint into a 'gap' model
        value, file_prefix = value[:, file_prefix:], 0
    if file_prefix != layer.num_prefix_tokens:
        problems.append(
            f"{key}: checkpoint has no class token row but the model needs one (build it with "
            "prefix_position_embedding=False, or keras_vit.load_model the file)"
        )
        return None
    if value.shape == want and (old_grid is None or tuple(old_grid) == layer.grid_size):
        return value
    if not resize:
        problems.append(
            f"{key}: checkpoint shape {value.shape}, model expects {want} (pass resize_posemb=True to interpolate)"
        )
        return None
    try:
        return resize_position_embeddings(
            value, layer.grid_size, file_prefix, old_grid, model.variant.position_interpolation
        )
    except ValueError as e:
        problems.append(f"{key}: {e}")
        return None


def _fit_resampled(value: np.ndarray, layer, resampled, name: str, key: str, problems: list) -> Optional[np.ndarray]:
    """A table kept at its training grid (NaFlex: (1, rows, cols, D)) for a model that resamples one stored at
    the same grid; anything else is refused by name (such a table is never resized on loading: the model
    resamples it per input, by the source's rule)."""
    stored = tuple(value.shape[1:3]) if value.ndim == 4 else None
    if resampled is None:
        problems.append(
            f"{key}: a position table kept at its training grid {stored} and resampled per input "
            f"(timm's NaFlexVit), but model {name!r} has a fixed table: build it with "
            "position_resampling, or by its timm architecture's name"
        )
    elif stored is None or stored != tuple(resampled.grid):
        problems.append(
            f"{key}: checkpoint table {value.shape}, model {name!r} resamples a table stored at grid "
            f"{tuple(resampled.grid)} (position_resampling grid)"
        )
    else:
        return value.reshape(1, stored[0] * stored[1], value.shape[-1])
    return None
