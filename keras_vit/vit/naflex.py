"""NaFlex (SigLIP 2's variable-resolution mode, after NaViT and FlexiViT): each image keeps its aspect ratio and
is cut into at most `max_patches` patches; a batch is the patches of every image, padded to one length, with
each patch's (row, column) and a mask of the real ones (timm's `naflexvit` batches: `patches`, `patch_coord`,
`patch_valid`).

`naflex_batch` makes such a batch from images as timm's NaFlex evaluation does: the largest size whose patch
grid fits the budget (timm's `get_image_size_for_seq`: each side rounded up to whole patches), an antialiased
bicubic resize to it, the checkpoint's mean and std, patches flattened row by row with the channels fastest.

`from_transformers` reads transformers' batches (`Siglip2ImageProcessor`'s) into that form; `naflex_forward` and
an image-text model's `encode_image` take either.

`naflex_forward` runs a `VisionTransformer` whose position table is resampled per input (`position_resampling`)
on such a batch, with its own layers and weights: each image's position table is resampled to its own grid and
read at its patches' coordinates. Padding never takes part: where timm masks the padded keys out of every
attention and out of the pooling, this computes each image on its real patches alone, images with as many
patches stacked together (one call per distinct count). The result per image is the same; nothing is padded.
It runs eagerly (the grids are read off the batch), so it is not part of the model's graph or its exports.
"""

from __future__ import annotations

import math
from typing import Dict, Sequence, Tuple

import keras
import numpy as np
from keras import ops

from keras_vit.utils import validate
from keras_vit.vit import pixels
from keras_vit.vit.preprocessing import _two_passes, resampling_matrix


def sequence_size(height: int, width: int, patch_size: int, max_patches: int) -> Tuple[int, int]:
    """(height, width) an image is resized to so that its patch grid holds at most `max_patches` patches: the
    largest scale found by bisection (down to 1e-5), each side then rounded up to whole patches, at least one
    (timm's `get_image_size_for_seq` with `divisible_by_patch`)."""

    def size_at(ratio: float) -> Tuple[int, int]:
        return tuple(
            int(max(patch_size * math.ceil(side * ratio / patch_size), patch_size)) for side in (height, width)
        )

    low, high = 1e-6, 100.0
    while high - low >= 1e-5:
        mid = (low + high) / 2.0
        h, w = size_at(mid)
        if (h // patch_size) * (w // patch_size) <= max_patches:
            low = mid
        else:
            high = mid
    if low <= 1e-5 or low >= 100.0:
        raise ValueError(f"An image of {height}x{width} cannot be fitted to {max_patches} patches of {patch_size}.")
    return size_at(low)


def _resize(image: np.ndarray, size: Tuple[int, int], interpolation: str = "bicubic") -> np.ndarray:
    """(H, W, C) float32 -> `size`, antialiased, without clipping (torch's `F.interpolate` on the float tensors
    timm's NaFlex evaluation resizes): `ImagePreprocessing`'s two matrix passes."""
    rows, cols = (
        resampling_matrix(image.shape[axis], size[axis], 0, size[axis], interpolation, True) for axis in (0, 1)
    )
    return ops.convert_to_numpy(_two_passes(ops.convert_to_tensor(image[None]), rows, cols, False, False))[0]


def naflex_batch(
    images: Sequence[np.ndarray],
    patch_size: int,
    max_patches: int,
    mean: Sequence[float] = (0.5, 0.5, 0.5),
    std: Sequence[float] = (0.5, 0.5, 0.5),
    interpolation: str = "bicubic",
) -> Dict[str, np.ndarray]:
    """A NaFlex batch of `images` ((H, W, C) arrays in [0, 255], each of its own size).

    Returns {"patches": (B, max_patches, patch_size**2 * C) float32, "patch_coord": (B, max_patches, 2) int32
    (row, column), "patch_valid": (B, max_patches) bool}; padding rows are zero and not valid.
    Args:
      images: the images, any sizes and aspect ratios.
      patch_size: the model's patch size (pixels per patch side).
      max_patches: the patch budget per image (SigLIP 2 NaFlex: 256 ... 1024).
      mean, std: the checkpoint's normalisation of [0, 1] pixels (`model.data_config`).
      interpolation: "bicubic" (timm's NaFlex evaluation) or "bilinear" (transformers' `Siglip2ImageProcessor`),
        antialiased, on float pixels (transformers' processor resizes 8-bit pixels and rounds them: a pixel may
        differ by one level).
    """
    if interpolation not in ("bicubic", "bilinear"):
        raise ValueError(f"naflex_batch: interpolation={interpolation!r}: 'bicubic' or 'bilinear'.")
    validate.integer("patch_size", patch_size, minimum=1)
    validate.integer("max_patches", max_patches, minimum=1)
    if not len(images):
        raise ValueError("naflex_batch needs at least one image.")
    images = [pixels.check_image(image, "naflex_batch") for image in images]
    channels = {image.shape[-1] for image in images}
    if len(channels) != 1:
        raise ValueError(
            f"naflex_batch takes images with one channel count, got shapes {[image.shape for image in images]}."
        )
    pixels.warn_if_unit_range(images, "naflex_batch")
    c = channels.pop()
    for name, values in (("mean", mean), ("std", std)):
        if len(values) != c or (name == "std" and min(values) <= 0):
            raise ValueError(
                f"naflex_batch: {name}={tuple(values)} must give one {'positive ' * (name == 'std')}"
                f"value per channel of the images ({c})."
            )
        if max(values) > 1:  # the data config's units; [0, 255] units would give logits far off, silently
            raise ValueError(
                f"naflex_batch: {name}={tuple(values)} is in [0, 255] units; it takes the checkpoint's values for "
                "[0, 1] pixels (model.data_config.mean / .std): divide them by 255."
            )
    out = dict(
        patches=np.zeros((len(images), max_patches, patch_size * patch_size * c), "float32"),
        patch_coord=np.zeros((len(images), max_patches, 2), "int32"),
        patch_valid=np.zeros((len(images), max_patches), bool),
    )
    for i, image in enumerate(images):
        image = np.asarray(image, "float32")
        size = sequence_size(image.shape[0], image.shape[1], patch_size, max_patches)
        x = (_resize(image, size, interpolation) / 255.0 - np.asarray(mean, "float32")) / np.asarray(std, "float32")
        gh, gw = size[0] // patch_size, size[1] // patch_size
        patches = x.reshape(gh, patch_size, gw, patch_size, c).transpose(0, 2, 1, 3, 4).reshape(gh * gw, -1)
        out["patches"][i, : gh * gw] = patches
        out["patch_coord"][i, : gh * gw] = np.stack(
            np.meshgrid(np.arange(gh), np.arange(gw), indexing="ij"), -1
        ).reshape(-1, 2)
        out["patch_valid"][i, : gh * gw] = True
    return out


TRANSFORMERS_KEYS = {"pixel_values", "pixel_attention_mask", "spatial_shapes"}


def from_transformers(batch) -> Dict[str, np.ndarray]:
    """transformers' NaFlex batch (`Siglip2ImageProcessor`: `pixel_values` (B, N, P*P*C), `pixel_attention_mask`
    (B, N), `spatial_shapes` (B, 2) rows and columns of patches, the first rows*columns patches real, row by row)
    as this module's dict."""
    patches = np.asarray(batch["pixel_values"], "float32")
    mask = np.asarray(batch["pixel_attention_mask"]).astype(bool)
    shapes = np.asarray(batch["spatial_shapes"]).astype("int64")
    if patches.ndim != 3 or mask.shape != patches.shape[:2] or shapes.shape != (len(patches), 2):
        raise ValueError(
            f"transformers NaFlex batch shapes pixel_values {patches.shape}, pixel_attention_mask {mask.shape}, "
            f"spatial_shapes {shapes.shape}: expected (B, N, values), (B, N), (B, 2)."
        )
    coords = np.zeros((*patches.shape[:2], 2), "int32")
    for i, (rows, cols) in enumerate(shapes):
        count = int(rows) * int(cols)
        if count < 1 or count > patches.shape[1] or not mask[i, :count].all() or mask[i, count:].any():
            raise ValueError(
                f"transformers NaFlex batch image {i}: spatial_shapes {int(rows)}x{int(cols)} does not match its "
                f"attention mask ({int(mask[i].sum())} patches marked)."
            )
        coords[i, :count] = np.stack(np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij"), -1).reshape(-1, 2)
    return dict(patches=patches, patch_coord=coords, patch_valid=mask)


def _check(model, batch) -> tuple:
    """(patches, coords, valid) as numpy arrays, or a ValueError naming what does not fit `model`."""
    from keras_vit.vit.model import ensure_vit

    ensure_vit(model)
    if "patches" not in batch and TRANSFORMERS_KEYS <= set(batch):
        batch = from_transformers(batch)
    missing = [k for k in ("patches", "patch_coord", "patch_valid") if k not in batch]
    if missing:
        raise ValueError(f"A NaFlex batch holds patches, patch_coord and patch_valid; this one lacks {missing}.")
    if getattr(model.position_embedding, "resampling", None) is None and model.position_embedding is not None:
        raise ValueError(
            f"Model {model.name!r} has a position table for one grid; NaFlex batches need one "
            "resampled per input (position_resampling: timm's naflexvit models)."
        )
    if (
        model.rotary_embedding is not None
        or model.stem is not None
        or model.include_preprocessing
        or model.pooling is not None
    ):
        raise ValueError(
            f"Model {model.name!r} has rotary embeddings, a ResNet stem, in-model preprocessing or "
            f"pooling={model.pooling!r}: NaFlex batches are built for none of those."
        )
    patches, coords, valid = (np.asarray(batch[k]) for k in ("patches", "patch_coord", "patch_valid"))
    kernel = model.patch_embedding.kernel
    width = int(np.prod(kernel.shape[:3]))
    if (
        patches.ndim != 3
        or patches.shape[-1] != width
        or coords.shape != (*patches.shape[:2], 2)
        or valid.shape != patches.shape[:2]
    ):
        raise ValueError(
            f"NaFlex batch shapes patches {patches.shape}, patch_coord {coords.shape}, patch_valid "
            f"{valid.shape}; model {model.name!r} takes patches of {width} values "
            f"({kernel.shape[0]}x{kernel.shape[1]}x{kernel.shape[2]})."
        )
    if not valid.any(axis=1).all():
        raise ValueError("Every image of a NaFlex batch needs at least one valid patch.")
    if coords.dtype.kind not in "iu":
        raise ValueError(f"NaFlex patch_coord holds (row, column) integers, got dtype {coords.dtype}.")
    valid = valid.astype(bool)
    for i in range(len(coords)):
        mine = coords[i][valid[i]]
        if (mine < 0).any():
            raise ValueError(
                f"NaFlex batch image {i}: a valid patch at a negative (row, column) {mine.min(0).tolist()}."
            )
        if len(np.unique(mine, axis=0)) != len(mine):
            raise ValueError(f"NaFlex batch image {i}: two valid patches at the same (row, column).")
    return patches, coords.astype("int64"), valid


def _embed_image(model, patches, coords, tables: dict):
    """One image's valid patches (n, P*P*C) at (n, 2) coordinates -> (1, n, D) tokens with position rows
    (`tables`: the resampled tables by grid, filled as grids come, each computed once per batch)."""
    layer = model.patch_embedding
    kernel = ops.reshape(ops.cast(layer.kernel, "float32"), (patches.shape[-1], -1))
    x = ops.matmul(ops.convert_to_tensor(patches, "float32"), kernel)
    x = x + ops.cast(layer.bias, x.dtype) if layer.bias is not None else x
    x = ops.cast(x[None], model.compute_dtype)
    if model.patch_norm is not None:
        x = model.patch_norm(x)
    if model.position_embedding is not None:
        rows, cols = int(coords[:, 0].max()) + 1, int(coords[:, 1].max()) + 1
        if (rows, cols) not in tables:
            tables[rows, cols] = model.position_embedding.table(rows, cols, x.dtype)
        x = x + ops.take(tables[rows, cols], ops.convert_to_tensor(coords[:, 0] * cols + coords[:, 1]), axis=1)
    return x


def naflex_forward(
    model, batch: Dict[str, np.ndarray], training: bool = False, pre_logits: bool = False
) -> "keras.KerasTensor":
    """`model`'s output for each image of a NaFlex batch (`naflex_batch`'s dict, or timm's collated one):
    (B, classes) with the top (after its activation), else the pooled features; `pre_logits=True`: the pooled,
    normalised features before the head. See the module docstring for how padding is kept out."""
    patches, coords, valid = _check(model, batch)
    counts, tables = valid.sum(axis=1), {}
    results: list = [None] * len(patches)
    for count in sorted(set(int(c) for c in counts)):
        members = [i for i in range(len(patches)) if counts[i] == count]
        x = ops.concatenate(
            [_embed_image(model, patches[i][valid[i]], coords[i][valid[i]], tables) for i in members], 0
        )
        for token in [t for t in (model.register_tokens, model.distillation_token, model.class_token) if t is not None]:
            x = token(x)
        x = model.embedding_dropout(x, training=training)
        x = model.pre_norm(x) if model.pre_norm is not None else x
        tokens = model.encoder(x, training=training)
        out = model._pool(tokens)
        if model.include_top and not pre_logits:
            out = model._logits(tokens, out)
            out = model.predictions(out) if model.predictions is not None else out
        for j, i in enumerate(members):
            results[i] = out[j]
    return ops.stack(results, axis=0)
