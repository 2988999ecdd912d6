"""Looking inside a ViT (paper §4.5, appendix D.7-D.8): attention, rollout, distance, posemb, filters.

Each quantity has a pure-numpy core that takes arrays (so the maths can be checked
in closed form) and a model-level function that runs a keras_vit model. Plots live
in `keras_vit.analysis.plots`; `python -m keras_vit.analysis.inspect` writes all four figures.
"""

from __future__ import annotations

import argparse
import os
from typing import List, Sequence, Tuple

import keras
import numpy as np

from keras_vit.utils import validate
from keras_vit.vit.model import ensure_vit


HEAD_FUSIONS = ("mean", "max", "min")


# ----------------------------------------------------------------------------- plumbing


def check_images(model: keras.Model, images) -> np.ndarray:
    """Validates a batch against the model's input size and value range ([-1, 1], or [0, 255]
    for models built with include_preprocessing=True)."""
    images = np.asarray(images, dtype="float32")
    images = np.asarray(ensure_vit(model).check_images(images))
    bad = int(images.size - np.count_nonzero(np.isfinite(images)))
    if bad:
        raise ValueError(f"images hold {bad} non-finite value(s) (NaN/Inf): attention maps of them would be NaN.")
    raw = model.include_preprocessing
    lo, hi = (0.0, 255.0) if raw else (-1.0, 1.0)
    if images.min() < lo - 1e-3 or images.max() > hi + 1e-3:
        raise ValueError(
            f"images must lie in [{lo:g}, {hi:g}] for this model, got values in "
            f"[{images.min():.3g}, {images.max():.3g}]"
            + ("" if raw else " (use keras_vit.preprocess_input on [0, 255] pixels)")
            + "."
        )
    return images


def attention_weights(model: keras.Model, images) -> List[np.ndarray]:
    """Attention probabilities of every block: a list of [batch, heads, tokens, tokens]."""
    images = check_images(model, images)
    attention = model.intermediates(images, attention=True)["attention"]
    return [np.asarray(keras.ops.convert_to_numpy(attention[i]), dtype="float64") for i in sorted(attention)]


# ----------------------------------------------------------------------------- rollout


def rollout_from_attention(
    attention: Sequence[np.ndarray], head_fusion: str = "mean", discard_ratio: float = 0.0
) -> np.ndarray:
    """Attention rollout (Abnar & Zuidema 2020): [batch, tokens, tokens] joint attention.

    Per layer: fuse heads (mean/max/min), optionally zero the weakest `discard_ratio`
    of each row's weights, add the identity for the residual path, renormalise rows,
    then multiply the layers' matrices from the first block to the last.
    """
    if head_fusion not in HEAD_FUSIONS:
        raise ValueError(f"head_fusion must be one of {HEAD_FUSIONS}, got {head_fusion!r}.")
    if not 0.0 <= discard_ratio < 1.0:
        raise ValueError(f"discard_ratio must be in [0, 1), got {discard_ratio}.")
    result = None
    for a in attention:
        a = np.asarray(a, dtype="float64")
        fused = getattr(a, head_fusion)(axis=1)  # [batch, tokens, tokens]
        if discard_ratio:
            k = int(fused.shape[-1] * discard_ratio)
            if k:
                cut = np.sort(fused, axis=-1)[..., k - 1 : k]
                fused = np.where(fused <= cut, 0.0, fused)
        fused = fused + np.eye(fused.shape[-1])
        fused = fused / fused.sum(axis=-1, keepdims=True)
        result = fused if result is None else fused @ result
    if result is None:
        raise ValueError("attention must hold at least one layer.")
    return result


def _upsample(maps: np.ndarray, size: Tuple[int, int]) -> np.ndarray:
    import scipy.ndimage

    b, gh, gw = maps.shape
    return np.stack([scipy.ndimage.zoom(m, (size[0] / gh, size[1] / gw), order=1) for m in maps])


def attention_rollout(
    model: keras.Model, images, head_fusion: str = "mean", discard_ratio: float = 0.0, upsample: bool = True
) -> np.ndarray:
    """Per-image rollout map over the patch grid, upsampled to the image size: [batch, H, W] in [0, 1]
    (`upsample=False`: [batch, grid_h, grid_w]).

    'token' models use the class token's row (DeiT: the mean of the class and distillation tokens' rows, as its
    two heads are averaged); models without a class token ('gap', 'map') the mean over all token rows, since
    their prediction pools every token. Register tokens are rows like any other but never columns of the map.
    """
    images = check_images(model, images)
    joint = rollout_from_attention(attention_weights(model, images), head_fusion, discard_ratio)
    layout = model.token_layout
    readers = [layout[part][0] for part in ("class", "distillation") if part in layout]
    start = layout["patches"][0]
    rows = joint[:, readers, start:].mean(axis=1) if readers else joint[:, :, start:].mean(axis=1)
    size, (gh, gw) = _sizes(model, images)
    maps = rows.reshape(-1, gh, gw)
    maps = maps / np.maximum(maps.max(axis=(1, 2), keepdims=True), 1e-12)
    return _upsample(maps, size) if upsample else maps


def _sizes(model, images) -> tuple:
    """((H, W), (grid rows, grid cols)) of `images` (checked): an any-size model's grid follows its input."""
    h, w = images.shape[1:3]
    p = model.effective_patch_size
    return (h, w), (h // p, w // p)


# ----------------------------------------------------------------------------- distance


def patch_centres(grid: Tuple[int, int], patch_px: Tuple[float, float]) -> np.ndarray:
    """Pixel coordinates (row, col) of the patch centres, row-major: [tokens, 2]."""
    rows, cols = np.meshgrid(np.arange(grid[0]), np.arange(grid[1]), indexing="ij")
    return np.stack([(rows.ravel() + 0.5) * patch_px[0], (cols.ravel() + 0.5) * patch_px[1]], axis=1)


def attention_distance_from_attention(
    attention: np.ndarray, grid: Tuple[int, int], patch_px, num_prefix_tokens: int = 1
) -> np.ndarray:
    """Mean attention distance per head, [heads], in pixels (appendix D.7).

    For each query patch: the distance to every key patch's centre weighted by the
    attention (renormalised over patch keys); averaged over queries and images.
    """
    a = np.asarray(attention, dtype="float64")[:, :, num_prefix_tokens:, num_prefix_tokens:]
    if a.shape[-1] != grid[0] * grid[1]:
        raise ValueError(f"attention has {a.shape[-1]} patch tokens but the grid {grid} has {grid[0] * grid[1]}.")
    a = a / np.maximum(a.sum(axis=-1, keepdims=True), 1e-12)
    patch_px = (patch_px, patch_px) if np.isscalar(patch_px) else patch_px
    c = patch_centres(grid, patch_px)
    dist = np.sqrt(((c[:, None, :] - c[None, :, :]) ** 2).sum(-1))
    return (a * dist).sum(axis=-1).mean(axis=(0, 2))


def mean_attention_distance(model: keras.Model, images) -> np.ndarray:
    """[layers, heads] mean attention distance in pixels (Fig. 7 right / Fig. 11)."""
    images = check_images(model, images)
    (h, w), (gh, gw) = _sizes(model, images)
    px = (h / gh, w / gw)
    return np.stack(
        [
            attention_distance_from_attention(a, (gh, gw), px, model.num_prefix_tokens)
            for a in attention_weights(model, images)
        ]
    )


# ----------------------------------------------------------------------------- embeddings


def similarity_from_posemb(posemb: np.ndarray, grid: Tuple[int, int], num_prefix_tokens: int = 1) -> np.ndarray:
    """Cosine similarity of every patch's position embedding with every other: [gh, gw, gh, gw]."""
    p = np.asarray(posemb, dtype="float64").reshape(-1, np.shape(posemb)[-1])[num_prefix_tokens:]
    p = p / np.maximum(np.linalg.norm(p, axis=-1, keepdims=True), 1e-12)
    return (p @ p.T).reshape(grid[0], grid[1], grid[0], grid[1])


def position_embedding_similarity(model: keras.Model) -> np.ndarray:
    """[grid_h, grid_w, grid_h, grid_w] cosine similarities, prefix-token rows excluded (Fig. 7 centre); a table
    resampled per input (NaFlex) is taken as resampled to the model's grid."""
    layer = ensure_vit(model).position_embedding
    if layer is None:
        raise ValueError(f"Model {model.name!r} has no learned position table (rotary embeddings alone).")
    if getattr(layer, "resampling", None) is not None:
        return similarity_from_posemb(keras.ops.convert_to_numpy(layer.table(*model.grid_size)), model.grid_size, 0)
    posemb = keras.ops.convert_to_numpy(layer.pos_embedding)
    return similarity_from_posemb(posemb, model.grid_size, layer.num_prefix_tokens)


def principal_components(filters: np.ndarray, n: int) -> Tuple[np.ndarray, np.ndarray]:
    """Top-`n` principal components of row vectors `filters` [count, dims] and their explained-variance ratios."""
    n = validate.integer("n", n)
    x = np.asarray(filters, dtype="float64")
    x = x - x.mean(axis=0, keepdims=True)
    _, s, vt = np.linalg.svd(x, full_matrices=False)
    var = s**2
    n = min(n, vt.shape[0])
    return vt[:n], var[:n] / var.sum()


def embedding_filter_components(model: keras.Model, n: int = 28) -> np.ndarray:
    """Top principal components of the patch-embedding filters, shaped [n, P, P, channels] (Fig. 7 left).

    For hybrids the filters act on ResNet features (1x1, many channels), not RGB.
    """
    n = validate.integer("n", n)
    kernel = keras.ops.convert_to_numpy(ensure_vit(model).patch_embedding.kernel)  # (P, P, C, D)
    p1, p2, c, d = kernel.shape
    components, _ = principal_components(kernel.reshape(-1, d).T, n)
    return components.reshape(-1, p1, p2, c)


# ----------------------------------------------------------------------------- CLI


def _load_image(path: str, model: keras.Model) -> np.ndarray:
    """The image file read at its real bit depth (16-bit scans are not clipped) and prepared as the checkpoint
    was evaluated (`model.preprocessor()`): (H, W, C) in the model's input range."""
    from keras_vit.analysis import images

    prepared = model.preprocessor()(images.read_image(path, "--image"))
    return np.asarray(keras.ops.convert_to_numpy(prepared))[0]


def _displayable(model: keras.Model, image: np.ndarray) -> np.ndarray:
    """One image in the model's input range back to [0, 1] RGB for the plots (the data config undone)."""
    if model.include_preprocessing:
        return np.clip(image / 255.0, 0.0, 1.0)
    mean, std = model.data_config.for_channels(image.shape[-1])
    return np.clip(image * np.asarray(std) + np.asarray(mean), 0.0, 1.0)


def write_figures(model: keras.Model, image: np.ndarray, out_dir: str) -> dict:
    """Writes the four figures for one image ([H, W, 3] in the model's range); returns their paths."""
    from keras_vit.analysis import plots

    os.makedirs(out_dir, exist_ok=True)
    image = check_images(model, image)
    shown = _displayable(model, image[0])
    paths = {
        "attention_rollout": plots.plot_attention_rollout(
            shown, attention_rollout(model, image)[0], os.path.join(out_dir, "attention_rollout.png")
        ),
        "attention_distance": plots.plot_attention_distance(
            mean_attention_distance(model, image), os.path.join(out_dir, "attention_distance.png")
        ),
        "position_embedding_similarity": plots.plot_position_similarity(
            position_embedding_similarity(model), os.path.join(out_dir, "position_embedding_similarity.png")
        ),
    }
    components = embedding_filter_components(model)
    if components.shape[-1] == 3:
        paths["embedding_filters"] = plots.plot_filter_components(
            components, os.path.join(out_dir, "embedding_filters.png")
        )
    return paths


def main(argv=None) -> int:
    import sys

    from keras_vit.weights.load import load_model

    p = argparse.ArgumentParser(prog="python -m keras_vit.analysis.inspect", description=__doc__)
    p.add_argument(
        "--weights",
        default=None,
        help="the weight source: a release name, an official .npz, a .keras model, a timm .safetensors "
        "file or a transformers directory (each says what model it is), or a .weights.h5 file (with "
        "--model); none: random weights",
    )
    p.add_argument("--model", default=None, help="table name; needed for .weights.h5 and release dataset names")
    p.add_argument("--image", required=True)
    p.add_argument("--image_size", type=int, default=0, help="resolution to run at (default: the file's)")
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    try:
        from keras_vit.utils.atomic import check_writable

        check_writable(args.out, "--out", directory=True)
        kwargs = {"input_shape": (args.image_size, args.image_size, 3)} if args.image_size else {}
        if args.weights:
            model = load_model(args.weights, model=args.model or None, **kwargs)
        else:
            from keras_vit.applications import create_model

            model = create_model(args.model or "ViT-B/16", **kwargs)
        paths = write_figures(model, _load_image(args.image, model), args.out)
    except (ValueError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for name, path in paths.items():
        print(f"{name}: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
