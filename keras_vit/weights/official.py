"""Official `.npz` checkpoints <-> Keras models, and position-embedding resizing.

The key names are those of the released google-research/vision_transformer
files (docs/reference.md, "The official checkpoint layout"), e.g.
`Transformer/encoderblock_3/MlpBlock_3/Dense_0/kernel`.
Our layers keep the same shapes, so a conversion is a rename, except that old
hybrid files store GroupNorm parameters as (1, 1, 1, C).
"""

from __future__ import annotations

import json
import logging
import os
import warnings
import zipfile
from typing import Dict, Optional, Sequence

import keras
import numpy as np

from keras_vit.utils import atomic, validate
from keras_vit.utils.assign import assign_array
from keras_vit.nn.projection import base_variable
from keras_vit.weights import keys, big_vision
from keras_vit.weights.architecture import (  # noqa: F401 (public here)
    architecture_from_npz,
    check_family,
    posemb_prefix_rows,
    stated_grid,
)
from keras_vit.weights.posemb import fit_posemb, resize_position_embeddings  # noqa: F401 (public here)
from keras_vit.weights.packed import unflatten_patch_kernel, unpack_gated_mlp

logger = logging.getLogger("keras_vit")

POSEMB_KEY = keys.POSEMB_KEY
_HEAD_KEYS = ("head/kernel", "head/bias")
_HEAD_DIST_KEYS = ("head_dist/kernel", "head_dist/bias")  # DeiT's second head: reset with the first
_PRE_LOGITS_KEYS = ("pre_logits/kernel", "pre_logits/bias")


# ----------------------------------------------------------------------------- model <-> keys


def _check_model(model) -> None:
    if not hasattr(model, "vit_config") or not hasattr(model, "encoder"):
        raise ValueError(
            f"Model {getattr(model, 'name', model)!r} is not a keras_vit.VisionTransformer "
            "(build it with keras_vit, or load it with keras_vit.load_model)."
        )
    quantized = sorted(set(model.quantized_layers().values()))
    if quantized:
        raise ValueError(
            f"Model {model.name!r} is quantized ({', '.join(quantized)}): official-layout checkpoints "
            "hold float weights; load or save them before model.quantize(...)."
        )


def _stem_map(stem) -> Dict[str, keras.Variable]:
    if hasattr(stem, "stem_layers"):  # a convolutional stem (MobileCLIP): each conv, its BatchNorm and statistics
        out = {}
        for i, (conv, norm) in enumerate(zip(stem.convs, stem.norms)):
            out[f"convolutional_stem/conv_{i}/kernel"] = conv.kernel
            for ours, variable in (
                ("scale", norm.gamma),
                ("bias", norm.beta),
                ("mean", norm.moving_mean),
                ("var", norm.moving_variance),
            ):
                out[f"convolutional_stem/norm_{i}/{ours}"] = variable
        return out
    out = {
        "conv_root/kernel": stem.conv_root.kernel,
        "gn_root/scale": stem.gn_root.gamma,
        "gn_root/bias": stem.gn_root.beta,
    }
    for unit in stem.units:
        p = unit.checkpoint_prefix + "/"
        for conv, gn in (("conv1", "gn1"), ("conv2", "gn2"), ("conv3", "gn3"), ("conv_proj", "gn_proj")):
            if getattr(unit, conv) is None:
                continue
            out[p + conv + "/kernel"] = getattr(unit, conv).kernel
            out[p + gn + "/scale"] = getattr(unit, gn).gamma
            out[p + gn + "/bias"] = getattr(unit, gn).beta
    return out


def _dense(out: dict, key: str, layer) -> None:
    """`key`/kernel and `key`/bias of a Dense / EinsumDense (no bias entry for a layer built without one)."""
    out[key + "/kernel"] = base_variable(layer)
    if getattr(layer, "bias", None) is not None:
        out[key + "/bias"] = layer.bias


def _norm(out: dict, key: str, layer) -> None:
    """A LayerNorm's scale and bias, or an RMSNorm's scale (it has no bias)."""
    if getattr(layer, "gamma", None) is None:  # RMSNorm
        out[key + "/scale"] = layer.scale
        return
    out[key + "/scale"], out[key + "/bias"] = layer.gamma, layer.beta


def _block_map(out: dict, p: str, block) -> None:
    """One encoder block's variables under the prefix `p`."""
    if getattr(block, "branches", None):  # parallel branches: each a block's parts under `branch_<j>/`
        for j, branch in enumerate(block.branches):
            _block_map(out, f"{p}branch_{j}/", branch)
        return
    _norm(out, p + "LayerNorm_0", block.layer_norm_0)
    if block.layer_norm_2 is not None:  # none with parallel layers: one norm before both branches
        _norm(out, p + "LayerNorm_2", block.layer_norm_2)
    att = block.attention
    for part in ("query", "key", "value", "out"):
        _dense(out, f"{p}MultiHeadDotProductAttention_1/{part}", getattr(att, part))
    for norm, name in ((att.query_norm, "query_norm"), (att.key_norm, "key_norm")):
        if norm is not None:  # qk-norm: not in official files
            _norm(out, f"{p}MultiHeadDotProductAttention_1/{name}", norm)
    if getattr(att, "lambda_q1", None) is not None:  # differential attention: its lambda vectors and sub-norm
        for name in ("lambda_q1", "lambda_k1", "lambda_q2", "lambda_k2"):
            out[f"{p}MultiHeadDotProductAttention_1/{name}"] = getattr(att, name)
        _norm(out, f"{p}MultiHeadDotProductAttention_1/sub_norm", att.sub_norm)
    if att.rotary_frequencies is not None:  # RoPE-Mixed's learned frequencies (2, heads, head_dim / 2)
        out[f"{p}MultiHeadDotProductAttention_1/rotary_frequencies"] = att.rotary_frequencies
    if att.attention_norm is not None:  # EVA-CLIP's norm on the attention output
        _norm(out, f"{p}MultiHeadDotProductAttention_1/norm", att.attention_norm)
    for dense, name in (
        (block.mlp.dense_0, "Dense_0"),
        (block.mlp.dense_1, "Dense_1"),
        (getattr(block.mlp, "gate", None), "gate"),
    ):  # gate: the SwiGLU's Swish branch
        if dense is not None:
            _dense(out, f"{p}MlpBlock_3/{name}", dense)
    if getattr(block.mlp, "norm", None) is not None:  # EVA-02's and BEiT-3's norm inside the MLP
        _norm(out, f"{p}MlpBlock_3/norm", block.mlp.norm)
    for scale, name in ((block.layer_scale_0, "LayerScale_0"), (block.layer_scale_2, "LayerScale_2")):
        if scale is not None:  # not in official files (save_npz refuses it); timm's ls1 / ls2
            out[f"{p}{name}/scale"] = scale.scale


def _map_head_map(out: dict, head) -> None:
    """big_vision's MAPHead keys for an `AttentionPooling` layer."""
    out["MAPHead_0/probe"] = head.probe
    for part in ("query", "key", "value", "out"):
        _dense(out, f"MAPHead_0/MultiHeadDotProductAttention_0/{part}", getattr(head, part))
    _norm(out, "MAPHead_0/LayerNorm_0", head.layer_norm)
    _dense(out, "MAPHead_0/MlpBlock_0/Dense_0", head.mlp.dense_0)
    _dense(out, "MAPHead_0/MlpBlock_0/Dense_1", head.mlp.dense_1)


def weight_map(model: keras.Model) -> Dict[str, keras.Variable]:
    """Official checkpoint key -> the model's variable, for every parameter of `model` (for a LoRA-adapted
    layer, its frozen base kernel: loading a checkpoint under adapters sets the base). Parts the official
    layout lacks get keys in its style: `reg`, `dist`, `head_dist`, `pre_norm`, `fc_norm`, `.../query_norm`,
    `.../LayerScale_0`, and big_vision's `MAPHead_0/...` for the MAP head."""
    _check_model(model)
    out = {}
    _dense(out, "embedding", model.patch_embedding)
    if model.patch_norm is not None:  # AIMv2: a norm on the patch embeddings
        _norm(out, "embedding_norm", model.patch_norm)
    for key, token in (("cls", model.class_token), ("dist", model.distillation_token), ("reg", model.register_tokens)):
        if token is not None:
            out[key] = token.cls
    if getattr(model.position_embedding, "pos_embedding_y", None) is not None:  # factorized (NaFlex)
        out[POSEMB_KEY + "_y"] = model.position_embedding.pos_embedding_y
        out[POSEMB_KEY + "_x"] = model.position_embedding.pos_embedding_x
    elif model.position_embedding is not None:  # none: rotary embeddings alone
        out[POSEMB_KEY] = model.position_embedding.pos_embedding
    if model.pre_norm is not None:
        _norm(out, "pre_norm", model.pre_norm)
    for i, block in enumerate(model.encoder.blocks):
        _block_map(out, f"Transformer/encoderblock_{i}/", block)
    if model.encoder.encoder_norm is not None:
        _norm(out, "Transformer/encoder_norm", model.encoder.encoder_norm)
    if model.classifier == "map":
        _map_head_map(out, model.token_pooling)
    if model.fc_norm is not None:
        _norm(out, "fc_norm", model.fc_norm)
    for name, dense in (("pre_logits", model.pre_logits), ("head", model.head), ("head_dist", model.head_distillation)):
        if dense is not None:
            _dense(out, name, dense)
    if model.stem is not None:
        out.update(_stem_map(model.stem))
    return out


# ----------------------------------------------------------------------------- reading files


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
            raise ValueError(
                f"Checkpoint {path!r} holds pickled object arrays; keras_vit never "
                "unpickles checkpoints. Re-save it with plain numeric arrays."
            ) from e
        raise ValueError(f"Checkpoint {path!r} is not a readable .npz file: {e}") from e
    except (zipfile.BadZipFile, EOFError, OSError, KeyError) as e:
        raise ValueError(
            f"Checkpoint {path!r} is not a readable .npz file (truncated or not a zip archive): {e}"
        ) from e
    if not isinstance(params, dict) or not params:
        raise ValueError(f"Checkpoint {path!r} holds no arrays.")
    for key, value in params.items():
        if value.dtype == object:
            raise ValueError(f"Checkpoint {path!r} entry {key!r} is an object array.")
    return big_vision.jax_to_official(params)


# ----------------------------------------------------------------------------- posemb resize

# ----------------------------------------------------------------------------- load / save


def load_npz(
    model: keras.Model,
    path: str,
    *,
    resize_posemb: bool = True,
    reset_head="auto",
    old_grid: Optional[Sequence[int]] = None,
) -> keras.Model:
    """Loads an official-layout `.npz` checkpoint into a keras_vit model.

    Follows the original fine-tuning rules: `pre_logits` is dropped when the model has no
    representation layer; with `reset_head="auto"` the head is zero-initialised (with a
    warning) when its class count differs or when it was trained on dropped pre-logits,
    `True` always zeroes it, `False` refuses either case; position embeddings are resized
    when the patch grid differs (`resize_posemb`). An official `.npz` does not record its grid: it is taken as
    square, and a model with a non-square grid needs `old_grid` (the file's rows, cols), never a guess; files
    `save_npz` wrote state their grid (`stated_npz_grid`).
    Everything is validated before the first weight is assigned, so a failed load leaves
    the model unchanged.
    """
    stated = stated_npz_grid(path)
    return load_params(
        model,
        read_npz(path),
        os.fspath(path),
        adopt=True,
        resize_posemb=resize_posemb,
        reset_head=reset_head,
        old_grid=old_grid if old_grid is not None else stated,
        grid_stated=stated is not None,
    )


NPZ_KIND, NPZ_SCHEMA = "keras_vit.npz", 1


def stated_npz_grid(path: str) -> Optional[tuple]:
    """The position grid (rows, cols) a `.npz` written by `save_npz` states in its zip archive comment, where
    neither numpy nor the official code nor timm reads (its arrays stay exactly the official layout); None for a
    file without one (the official releases, big_vision's) or a comment of another tool. A keras_vit comment of
    another schema or without a valid grid is refused naming the file."""
    try:
        with zipfile.ZipFile(os.fspath(path)) as archive:
            comment = archive.comment
    except (OSError, zipfile.BadZipFile):
        return None  # read_npz names what is wrong with the file
    try:
        record = json.loads(comment.decode("utf-8")) if comment else None
    except (UnicodeDecodeError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("kind") != NPZ_KIND:
        return None
    grid = record.get("position_grid")
    if record.get("schema") != NPZ_SCHEMA or not (
        isinstance(grid, list) and len(grid) == 2 and all(isinstance(n, int) and n > 0 for n in grid)
    ):
        raise ValueError(
            f"{os.fspath(path)!r}: its keras_vit record (the zip comment) is of schema {record.get('schema')!r} "
            f"with position_grid {grid!r}; expected schema {NPZ_SCHEMA} and [rows, cols]."
        )
    return tuple(grid)


def _write_npz(tmp: str, arrays: Dict[str, np.ndarray], grid: Optional[tuple]) -> None:
    np.savez(tmp, **arrays)
    if grid is not None:
        record = {"kind": NPZ_KIND, "schema": NPZ_SCHEMA, "position_grid": [int(n) for n in grid]}
        with zipfile.ZipFile(tmp, "a") as archive:  # `tmp` keeps the `.npz` suffix: numpy wrote it there
            archive.comment = json.dumps(record).encode("utf-8")


def load_params(
    model: keras.Model,
    params: Dict[str, np.ndarray],
    source: str = "params",
    *,
    resize_posemb: bool = True,
    reset_head="auto",
    old_grid: Optional[Sequence[int]] = None,
    adopt: bool = False,
    posemb_prefix_included: bool = True,
    grid_stated: bool = True,
) -> keras.Model:
    """`load_npz` for {official key: array} already in memory (e.g. another model's `weight_map`).

    `posemb_prefix_included`: whether the position table holds the prefix tokens' rows, a fact of the source's
    layout (True in the original code's and timm's default; `posemb_prefix_rows`). `grid_stated=False` says the
    arrays come from a file that does not record its grid (an `.npz`, a bare state dict): a model with a
    non-square grid then needs `old_grid`; arrays in memory are taken to share the model's grid.

    `adopt=True` says the arrays are the caller's to give away (just read from a file, used by nothing
    else): on TensorFlow a variable may then keep an array's memory instead of a copy of it
    (`keras_vit.utils.assign`). Leave it False for arrays that live on after the call.
    """
    if reset_head not in ("auto", True, False):
        raise ValueError(f"reset_head must be 'auto', True or False, got {reset_head!r}.")
    validate.boolean("adopt", adopt)
    targets = weight_map(model)
    stem_in_model, stem_in_file = "conv_root/kernel" in targets, "conv_root/kernel" in params
    if stem_in_model != stem_in_file:
        kinds = ("a hybrid (ResNet stem)", "a plain ViT")
        raise ValueError(
            f"Checkpoint {source!r} is {kinds[not stem_in_file]} but model {model.name!r} is "
            f"{kinds[not stem_in_model]}: model/checkpoint family mismatch."
        )
    check_family(model, params, source)
    problems: list = []
    reset = _head_reset(params, targets, reset_head, problems)
    validate.boolean("posemb_prefix_included", posemb_prefix_included)
    validate.boolean("grid_stated", grid_stated)
    params = unpack_gated_mlp(model, params)
    params = unflatten_patch_kernel(params, targets)
    grid = model.position_embedding.grid_size if model.position_embedding is not None else model.grid_size
    fixed_table = getattr(model.position_embedding, "resampling", None) is None  # NaFlex tables state their grid
    if (
        not grid_stated
        and fixed_table
        and model.position_embedding is not None
        and old_grid is None
        and grid[0] != grid[1]
    ):  # into a square model: taken as square
        problems.append(
            f"{POSEMB_KEY}: the source does not state its patch grid and model {model.name!r} has a "
            f"non-square one {tuple(grid)}; pass old_grid=(rows, cols) of the grid it was trained at"
        )
    prefix_rows = posemb_prefix_rows(params, posemb_prefix_included)
    assign, notes = _plan(model, params, targets, reset, resize_posemb, old_grid, problems, source, prefix_rows)
    for key, value in assign.items():
        assign_array(
            targets[key], value.astype(keras.backend.standardize_dtype(targets[key].dtype), copy=False), adopt=adopt
        )
    name = os.path.basename(source)
    if reset:
        warnings.warn(
            f"load_npz({name}): {reset}; the model's {model.head.units}-class head is "
            "zero-initialised (as the original fine-tuning code does).",
            stacklevel=3,
        )
    for note in notes:
        logger.warning("load_npz(%s): %s", name, note)
    return model


def model_params(model: keras.Model) -> Dict[str, np.ndarray]:
    """{official key: float32 array} of every parameter of `model` (what `save_npz` writes); LoRA adapters
    are merged into their kernels first."""
    if model.lora_layers():
        model = model.merge_lora()
    return {key: np.asarray(keras.ops.convert_to_numpy(var), dtype="float32") for key, var in weight_map(model).items()}


def _first_kernel(targets) -> str:
    return "conv_root/kernel" if "conv_root/kernel" in targets else "embedding/kernel"


def adapt_input_channels(kernel: np.ndarray, channels: int) -> np.ndarray:
    """An RGB (kh, kw, 3, out) kernel for `channels` inputs, as timm's `adapt_input_conv` does: one channel
    takes the sum over RGB (a gray image replicated to RGB gives the same output); more channels repeat RGB
    cyclically, scaled by 3 / channels so the response to a constant image keeps its size."""
    if channels == 1:
        return kernel.sum(axis=2, keepdims=True)
    repeats = -(-channels // 3)
    return np.tile(kernel, (1, 1, repeats, 1))[:, :, :channels] * (3.0 / channels)


_MAP_ATTENTION = "MAPHead_0/MultiHeadDotProductAttention_0/"


def _plan(model, params, targets, reset, resize_posemb, old_grid, problems, path, prefix_rows):
    """{key: value to assign} and notes, or a ValueError naming every misfit (nothing assigned yet)."""
    assign: Dict[str, np.ndarray] = {}
    missing, notes = [], []
    for key, var in targets.items():
        want = tuple(var.shape)
        if (key in _HEAD_KEYS or key in _HEAD_DIST_KEYS) and reset:
            assign[key] = np.zeros(want, dtype="float32")
            continue
        if key not in params:
            missing.append(key)
            continue
        value = params[key]
        if key == POSEMB_KEY and (
            value.shape != want or (old_grid is not None and tuple(old_grid) != model.position_embedding.grid_size)
        ):
            value = fit_posemb(value, model, prefix_rows, resize_posemb, old_grid, key, problems)
            if value is None:
                continue
            if getattr(model.position_embedding, "resampling", None) is None:  # NaFlex tables: reshaped only
                notes.append(f"position embeddings resized {params[key].shape} -> {want}")
        if value.shape != want and value.size == int(np.prod(want)) and value.ndim == 4 and len(want) == 1:
            value = value.reshape(want)  # (1, 1, 1, C) GroupNorm parameters of old hybrids
        if (
            key.startswith(_MAP_ATTENTION)
            and value.shape != want
            and value.size == int(np.prod(want))
            and value.ndim == len(want)
        ):
            value = value.reshape(want)  # the MAP head's own head count (PE: 8): heads are a view of (D, D)
        if (
            key == _first_kernel(targets)
            and value.shape != want
            and value.shape[2] == 3
            and value.shape[:2] + value.shape[3:] == want[:2] + want[3:]
        ):
            value = adapt_input_channels(value, want[2])
            notes.append(f"{key}: RGB kernel adapted to {want[2]} input channels (timm's in_chans rule)")
        if value.shape != want:
            problems.append(f"{key}: checkpoint shape {value.shape}, model expects {want}")
            continue
        bad = int(value.size - np.count_nonzero(np.isfinite(value)))
        if bad:
            problems.append(f"{key}: {bad} non-finite value(s) (NaN/Inf) -- a diverged or damaged checkpoint")
            continue
        assign[key] = value
    ignorable = set(_PRE_LOGITS_KEYS) | set(_HEAD_KEYS) | set(_HEAD_DIST_KEYS) | {"cls"}
    unexpected = sorted(k for k in params if k not in targets and k not in ignorable)
    if missing:
        raise ValueError(
            f"Checkpoint {path!r} lacks {len(missing)} weight(s) the model needs: "
            f"{', '.join(missing[:10])}{' ...' if len(missing) > 10 else ''}."
        )
    if problems:
        raise ValueError(f"Checkpoint {path!r} does not fit model {model.name!r}: " + "; ".join(problems[:10]))
    if unexpected:
        raise ValueError(
            f"Checkpoint {path!r} has {len(unexpected)} weight(s) the model has no place for "
            f"(wrong model size or family?): {', '.join(unexpected[:10])}"
            f"{' ...' if len(unexpected) > 10 else ''}."
        )
    if "pre_logits/kernel" in params and "pre_logits/kernel" not in targets:
        notes.append("pre_logits dropped (the model has no representation layer)")
    return assign, notes


def _head_reset(params, targets, reset_head, problems) -> Optional[str]:
    """Why the model's head must start from zeros instead of the file's, or None to copy it."""
    if "head/kernel" not in targets:
        return None
    want = tuple(targets["head/kernel"].shape)
    if reset_head is True:
        return "reset_head=True"
    if "head/kernel" not in params:
        return "the checkpoint has no head"
    have = params["head/kernel"].shape
    if have[-1:] != want[-1:]:
        reason = f"the checkpoint's head has {have[-1]} classes, the model {want[-1]}"
    elif "pre_logits/kernel" in params and "pre_logits/kernel" not in targets:
        reason = (
            "the checkpoint's head was trained on its pre_logits (tanh) features, which the model "
            "(representation_size=None) drops"
        )
    else:
        return None
    if reset_head is False:
        problems.append(f"head: {reason} (reset_head=False)")
        return None
    return reason


def save_npz(model: keras.Model, path: str) -> str:
    """Writes `model`'s weights in the official `.npz` layout, atomically; returns the path."""
    path = os.fspath(path)
    if not path.endswith(".npz"):
        raise ValueError(f"save_npz writes .npz files; got {path!r}.")
    foreign = model.variant.non_official_parts(model.num_prefix_tokens > 0) if hasattr(model, "variant") else []
    if foreign:
        raise ValueError(
            f"Model {model.name!r} has parts the official layout has no place for: "
            f"{'; '.join(foreign)}. Write it with keras_vit.save_pretrained (timm) or .keras instead."
        )
    arrays = model_params(model)
    table = getattr(model, "position_embedding", None)
    grid = table.grid_size if table is not None and getattr(table, "resampling", None) is None else None
    return atomic.write_file(path, lambda tmp: _write_npz(tmp, arrays, grid))
