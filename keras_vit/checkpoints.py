"""Official `.npz` checkpoints <-> Keras models, and position-embedding resizing.

The key names are those of the released google-research/vision_transformer
files (REFERENCE §2), e.g. `Transformer/encoderblock_3/MlpBlock_3/Dense_0/kernel`.
Our layers keep the same shapes, so a conversion is a rename, except that old
hybrid files store GroupNorm parameters as (1, 1, 1, C).
"""

from __future__ import annotations

import logging
import os
import tempfile
import zipfile
from typing import Dict, Optional, Sequence

import keras
import numpy as np

from keras_vit import configs
from keras_vit.layers import AddPositionEmbedding, ClassToken, Encoder, PatchEmbedding
from keras_vit.resnet import ResNetStem

logger = logging.getLogger("keras_vit")

POSEMB_KEY = "Transformer/posembed_input/pos_embedding"
_HEAD_KEYS = ("head/kernel", "head/bias")
_PRE_LOGITS_KEYS = ("pre_logits/kernel", "pre_logits/bias")


# ----------------------------------------------------------------------------- model <-> keys

def _find(model: keras.Model, cls):
    found = [layer for layer in model.layers if isinstance(layer, cls)]
    return found[0] if found else None


def _dense(model: keras.Model, name: str):
    try:
        return model.get_layer(name)
    except ValueError:
        return None


def weight_map(model: keras.Model) -> Dict[str, keras.Variable]:
    """Official checkpoint key -> the model's variable, for every parameter of `model`."""
    embedding = _find(model, PatchEmbedding)
    encoder = _find(model, Encoder)
    if embedding is None or encoder is None:
        raise ValueError(f"Model {model.name!r} is not a keras_vit Vision Transformer "
                         "(no PatchEmbedding / Encoder layer).")
    out = {"embedding/kernel": embedding.kernel, "embedding/bias": embedding.bias}
    cls = _find(model, ClassToken)
    if cls is not None:
        out["cls"] = cls.cls
    out[POSEMB_KEY] = _find(model, AddPositionEmbedding).pos_embedding
    for i, block in enumerate(encoder.blocks):
        p = f"Transformer/encoderblock_{i}/"
        for ln, name in ((block.layer_norm_0, "LayerNorm_0"), (block.layer_norm_2, "LayerNorm_2")):
            out[p + name + "/scale"], out[p + name + "/bias"] = ln.gamma, ln.beta
        att = block.attention
        for part in ("query", "key", "value", "out"):
            out[f"{p}MultiHeadDotProductAttention_1/{part}/kernel"] = getattr(att, f"{part}_kernel")
            out[f"{p}MultiHeadDotProductAttention_1/{part}/bias"] = getattr(att, f"{part}_bias")
        for dense, name in ((block.mlp.dense_0, "Dense_0"), (block.mlp.dense_1, "Dense_1")):
            out[f"{p}MlpBlock_3/{name}/kernel"], out[f"{p}MlpBlock_3/{name}/bias"] = dense.kernel, dense.bias
    out["Transformer/encoder_norm/scale"] = encoder.encoder_norm.gamma
    out["Transformer/encoder_norm/bias"] = encoder.encoder_norm.beta
    for name in ("pre_logits", "head"):
        dense = _dense(model, name)
        if dense is not None:
            out[f"{name}/kernel"], out[f"{name}/bias"] = dense.kernel, dense.bias
    stem = _find(model, ResNetStem)
    if stem is not None:
        out["conv_root/kernel"] = stem.conv_root.kernel
        out["gn_root/scale"], out["gn_root/bias"] = stem.gn_root.gamma, stem.gn_root.beta
        for unit in stem.units:
            p = unit.checkpoint_prefix + "/"
            for conv, gn in (("conv1", "gn1"), ("conv2", "gn2"), ("conv3", "gn3"),
                             ("conv_proj", "gn_proj")):
                if getattr(unit, conv) is None:
                    continue
                out[p + conv + "/kernel"] = getattr(unit, conv).kernel
                out[p + gn + "/scale"] = getattr(unit, gn).gamma
                out[p + gn + "/bias"] = getattr(unit, gn).beta
    return out


def architecture(model: keras.Model) -> dict:
    """The sizes of a keras_vit model read off its layers (works for loaded models too)."""
    weight_map(model)  # validates that this is one of ours
    embedding, encoder = _find(model, PatchEmbedding), _find(model, Encoder)
    posemb = _find(model, AddPositionEmbedding)
    stem = _find(model, ResNetStem)
    head, pre_logits = _dense(model, "head"), _dense(model, "pre_logits")
    return dict(
        patch_size=embedding.patch_size, hidden_size=embedding.hidden_size,
        mlp_dim=encoder.mlp_dim, num_heads=encoder.num_heads, num_layers=encoder.num_layers,
        resnet_layers=stem.stage_sizes if stem is not None else None,
        resnet_width=stem.width if stem is not None else 1,
        classifier="token" if posemb.num_prefix_tokens else "gap",
        grid_size=posemb.grid_size, num_prefix_tokens=posemb.num_prefix_tokens,
        classes=None if head is None else head.units,
        representation_size=None if pre_logits is None else pre_logits.units)


def table_name(model: keras.Model) -> Optional[str]:
    """The paper's name of the variant `model` is built as (None for custom sizes)."""
    arch = architecture(model)
    for config in configs.MODELS.values():
        if all(arch[k] == v for k, v in config.model_kwargs().items() if k != "resnet_width") and (
                not config.is_hybrid or arch["resnet_width"] == config.resnet_width):
            return config.name
    return None


# ----------------------------------------------------------------------------- reading files

_BIG_VISION_RENAMES = (("MultiHeadDotProductAttention_0", "MultiHeadDotProductAttention_1"),
                       ("LayerNorm_1", "LayerNorm_2"), ("MlpBlock_0", "MlpBlock_3"))


def _normalise_keys(params: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
    """Accepts the big_vision layout (`params/` prefix, Linen block names) too."""
    if not any(k.startswith("params/") for k in params):
        return params
    out = {}
    for key, value in params.items():
        key = key[len("params/"):] if key.startswith("params/") else key
        if key == "pos_embedding":
            key = POSEMB_KEY
        if key.startswith("Transformer/encoderblock_"):
            for old, new in _BIG_VISION_RENAMES:
                key = key.replace(f"/{old}/", f"/{new}/")
        out[key] = value
    return out


def read_npz(path: str) -> Dict[str, np.ndarray]:
    """Reads an official-layout `.npz` into {key: array}, never unpickling anything."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"Checkpoint file {path!r} does not exist.")
    if not zipfile.is_zipfile(path):
        raise ValueError(f"Checkpoint {path!r} is not a readable .npz file (truncated, or not a zip archive).")
    try:
        with np.load(path, allow_pickle=False) as data:
            params = {key: np.asarray(data[key]) for key in data.files}
    except ValueError as e:
        if "pickle" in str(e):
            raise ValueError(f"Checkpoint {path!r} holds pickled object arrays; keras_vit never "
                             "unpickles checkpoints. Re-save it with plain numeric arrays.") from e
        raise ValueError(f"Checkpoint {path!r} is not a readable .npz file: {e}") from e
    except (zipfile.BadZipFile, EOFError, OSError, KeyError) as e:
        raise ValueError(f"Checkpoint {path!r} is not a readable .npz file (truncated or not a zip "
                         f"archive): {e}") from e
    if not isinstance(params, dict) or not params:
        raise ValueError(f"Checkpoint {path!r} holds no arrays.")
    for key, value in params.items():
        if value.dtype == object:
            raise ValueError(f"Checkpoint {path!r} entry {key!r} is an object array.")
    return _normalise_keys(params)


# ----------------------------------------------------------------------------- posemb resize

def resize_position_embeddings(posemb: np.ndarray, new_grid: Sequence[int],
                               num_prefix_tokens: int = 1,
                               old_grid: Optional[Sequence[int]] = None) -> np.ndarray:
    """Resizes a position-embedding table to a new patch grid, as the original code does.

    The prefix rows (class token) are kept; the grid rows are reshaped to
    (gh, gw, D) and zoomed with `scipy.ndimage.zoom(order=1)` with one factor per
    axis (so non-square grids work), then flattened back.

    Args:
      posemb: (1, tokens, D) or (tokens, D).
      new_grid: (rows, cols) of the target patch grid.
      num_prefix_tokens: rows before the grid (1 for a class token, 0 for 'gap').
      old_grid: (rows, cols) of `posemb`'s grid; inferred when square.
    """
    import scipy.ndimage

    posemb = np.asarray(posemb)
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
            raise ValueError(f"Cannot infer the grid of {n} position embeddings (not a square); "
                             "pass old_grid=(rows, cols).")
        old_grid = (side, side)
    old_grid, new_grid = tuple(int(g) for g in old_grid), tuple(int(g) for g in new_grid)
    if old_grid[0] * old_grid[1] != n:
        raise ValueError(f"old_grid {old_grid} does not match {n} position embeddings.")
    grid = grid.reshape(old_grid + (-1,))
    factors = (new_grid[0] / old_grid[0], new_grid[1] / old_grid[1], 1)
    zoomed = scipy.ndimage.zoom(grid, factors, order=1).reshape(1, new_grid[0] * new_grid[1], -1)
    out = np.concatenate([prefix, zoomed.astype(posemb.dtype)], axis=1)
    return out[0] if squeeze else out


# ----------------------------------------------------------------------------- load / save

def load_npz(model: keras.Model, path: str, *, resize_posemb: bool = True,
             reset_head="auto", old_grid: Optional[Sequence[int]] = None) -> keras.Model:
    """Loads an official-layout `.npz` checkpoint into a keras_vit model.

    Follows the original fine-tuning rules: `pre_logits` is dropped when the
    model has no representation layer; with `reset_head="auto"` a head whose class
    count differs is zero-initialised (and logged), `True` always zeroes it,
    `False` refuses a mismatch; position embeddings are resized when the patch grid
    differs (`resize_posemb`). Everything is validated before the first weight is
    assigned, so a failed load leaves the model unchanged.
    """
    if reset_head not in ("auto", True, False):
        raise ValueError(f"reset_head must be 'auto', True or False, got {reset_head!r}.")
    params = read_npz(path)
    targets = weight_map(model)
    stem_in_model = "conv_root/kernel" in targets
    stem_in_file = "conv_root/kernel" in params
    if stem_in_model != stem_in_file:
        kinds = ("a hybrid (ResNet stem)", "a plain ViT")
        raise ValueError(f"Checkpoint {path!r} is {kinds[not stem_in_file]} but model {model.name!r} is "
                         f"{kinds[not stem_in_model]}: model/checkpoint family mismatch.")

    assign: Dict[str, np.ndarray] = {}
    missing, problems, notes = [], [], []
    for key, var in targets.items():
        want = tuple(var.shape)
        if key in _HEAD_KEYS and (reset_head is True or (
                reset_head == "auto" and key in params and params[key].shape[-1:] != want[-1:])):
            assign[key] = np.zeros(want, dtype="float32")
            if key == "head/kernel":
                old = params["head/kernel"].shape[-1] if "head/kernel" in params else "no"
                notes.append(f"head: checkpoint has {old} classes, model has {want[-1]}; "
                             "new head zero-initialised")
            continue
        if key not in params:
            missing.append(key)
            continue
        value = params[key]
        if key == POSEMB_KEY and value.shape != want:
            value = _fit_posemb(value, model, "cls" in params, resize_posemb, old_grid, key, problems)
            if value is None:
                continue
            notes.append(f"position embeddings resized {params[key].shape} -> {want}")
        if value.shape != want and value.size == int(np.prod(want)) and value.ndim == 4 and len(want) == 1:
            value = value.reshape(want)  # (1, 1, 1, C) GroupNorm parameters of old hybrids
        if value.shape != want:
            problems.append(f"{key}: checkpoint shape {value.shape}, model expects {want}")
            continue
        assign[key] = value
    ignorable = set(_PRE_LOGITS_KEYS) | set(_HEAD_KEYS) | {"cls"}
    unexpected = sorted(k for k in params if k not in targets and k not in ignorable)
    if missing:
        raise ValueError(f"Checkpoint {path!r} lacks {len(missing)} weight(s) the model needs: "
                         f"{', '.join(missing[:10])}{' ...' if len(missing) > 10 else ''}.")
    if problems:
        raise ValueError(f"Checkpoint {path!r} does not fit model {model.name!r}: " + "; ".join(problems[:10]))
    if unexpected:
        raise ValueError(f"Checkpoint {path!r} has {len(unexpected)} weight(s) the model has no place for "
                         f"(wrong model size or family?): {', '.join(unexpected[:10])}"
                         f"{' ...' if len(unexpected) > 10 else ''}.")
    if "pre_logits/kernel" in params and "pre_logits/kernel" not in targets:
        notes.append("pre_logits dropped (the model has no representation layer)")
    for key, value in assign.items():
        targets[key].assign(value.astype(keras.backend.standardize_dtype(targets[key].dtype)))
    for note in notes:
        logger.warning("load_npz(%s): %s", os.path.basename(os.fspath(path)), note)
    return model


def _fit_posemb(value, model, file_has_cls, resize, old_grid, key, problems):
    layer = _find(model, AddPositionEmbedding)
    want = (1, layer.num_tokens, value.shape[-1])
    file_prefix = 1 if file_has_cls else 0
    if file_prefix > layer.num_prefix_tokens:  # token checkpoint into a 'gap' model
        value, file_prefix = value[:, file_prefix:], 0
    if file_prefix != layer.num_prefix_tokens:
        problems.append(f"{key}: checkpoint has no class token row but the model needs one")
        return None
    if value.shape == want:
        return value
    if not resize:
        problems.append(f"{key}: checkpoint shape {value.shape}, model expects {want} "
                        "(pass resize_posemb=True to interpolate)")
        return None
    try:
        return resize_position_embeddings(value, layer.grid_size, file_prefix, old_grid)
    except ValueError as e:
        problems.append(f"{key}: {e}")
        return None


def save_npz(model: keras.Model, path: str) -> str:
    """Writes `model`'s weights in the official `.npz` layout, atomically; returns the path."""
    path = os.fspath(path)
    if not path.endswith(".npz"):
        raise ValueError(f"save_npz writes .npz files; got {path!r}.")
    arrays = {key: np.asarray(keras.ops.convert_to_numpy(var), dtype="float32")
              for key, var in weight_map(model).items()}
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".npz", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **arrays)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    return path


# The release registry lives in keras_vit.releases; its names stay reachable here (the documented
# `keras_vit.checkpoints.available()`).
from keras_vit.releases import (  # noqa: E402,F401
    BASE_URL, Release, available, fetch, find_release, is_release_name, register_release, release_names)
