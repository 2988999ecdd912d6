"""Safetensors in and out: timm state dicts and Hugging Face `transformers` ViT directories.

Read with the `safetensors` package's numpy API (no torch at run time; `safetensors_read`) and brought to the
official keys (`keras_vit.layouts`), so the architecture reader and the all-or-nothing loader
of `.npz` files serve these too. Written so that `timm.create_model(...,
pretrained_cfg_overlay=dict(file=path))` and `ViTForImageClassification.from_pretrained(dir)`
load them without missing or unexpected keys.
"""

from __future__ import annotations

import json
import os
from typing import Dict, Optional, Tuple

import numpy as np

from keras_vit.utils import atomic
from keras_vit.vit import table
from keras_vit.vit.data_config import TRANSFORMERS_VIT, DataConfig
from keras_vit.vit.model import ensure_vit
from keras_vit.weights import layouts, official, timm_args, timm_layout, timm_out
from keras_vit.weights.safetensors_read import read_converted, read_sharded_converted

HF_WEIGHTS = "model.safetensors"
HF_CONFIG = "config.json"


def is_transformers_dir(path: str) -> bool:
    return os.path.isdir(path) and os.path.exists(os.path.join(path, HF_CONFIG))


def _heads_for(width: int, source: str, num_heads: Optional[int]) -> int:
    if num_heads:
        return int(num_heads)
    rows = {c.num_heads for c in table.MODELS.values() if c.hidden_size == width}
    if len(rows) != 1:
        raise ValueError(
            f"{source}: a state dict does not say its number of heads and width {width} is not a "
            "table width; pass num_heads=."
        )
    return rows.pop()


# What a bare timm state dict does not state, taken from timm's `VisionTransformer` defaults: exact GELU
# (`act_layer=None`), LayerNorm epsilon 1e-6, a position row for every prefix token (`no_embed_class=False`).
TIMM_DEFAULTS = dict(activation="gelu", layer_norm_epsilon=1e-6)


def read_timm(
    path: str, num_heads: Optional[int] = None, sharded: bool = False
) -> Tuple[Dict[str, np.ndarray], dict, dict]:
    """({official key: array}, keywords the file states, keywords taken from timm's defaults) of a timm ViT
    `.safetensors` state dict (`sharded`: `path` is a `model.safetensors.index.json` and its shards).

    A bare state dict states its shapes and parts only. What it leaves out comes from timm's defaults
    (`TIMM_DEFAULTS`) and timm's pooling rule: an `fc_norm` goes with average pooling (`global_pool="avg"`,
    `fc_norm=None`), so such a file pools by averaging even when it keeps a class token."""
    implied = dict(position_interpolation="bicubic")
    assumed = dict(TIMM_DEFAULTS)

    def convert(sd: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
        if layouts.detect(sd) != "timm":
            raise ValueError(f"{path!r} is not a timm ViT state dict (no patch_embed.* or embeds.proj.* keys).")
        first = next((k for k in ("patch_embed.proj.weight", "embeds.proj.weight") if k in sd), None)
        width = sd[first].shape[0] if first else 0
        implied["num_heads"] = _heads_for(width, path, num_heads)
        if any(k.startswith("patch_embed.backbone.") for k in sd) and "patch_embed.backbone.0.conv.weight" not in sd:
            implied["stem_numerics"] = "timm"  # timm's ResNet hybrids standardise and normalise with their own epsilons
        if "fc_norm.weight" in sd and not any(k.startswith("attn_pool.") for k in sd):
            assumed["classifier"] = "gap"
            if "cls_token" in sd:
                assumed["class_token"] = True
        if any(t in sd for t in ("cls_token", "reg_token", "dist_token")):
            assumed["prefix_position_embedding"] = True
        return timm_layout.timm_to_official(sd, implied["num_heads"], path)

    return (read_sharded_converted if sharded else read_converted)(path, convert), implied, assumed


# transformers' ViTConfig: hidden_act -> keras_vit's activation (ACT2FN's erf GELU, its two tanh forms, quick GELU)
_HF_ACTIVATIONS = {
    "gelu": "gelu",
    "gelu_pytorch_tanh": "gelu_tanh",
    "gelu_new": "gelu_tanh",
    "quick_gelu": "quick_gelu",
}
# ViTConfig's defaults for what a config.json leaves out (transformers' own, not keras_vit's)
_HF_DEFAULTS = dict(
    hidden_act="gelu",
    layer_norm_eps=1e-12,
    qkv_bias=True,
    image_size=224,
    patch_size=16,
    num_channels=3,
    pooler_act="tanh",
)


def _hf_config(directory: str) -> dict:
    try:
        with open(os.path.join(directory, HF_CONFIG)) as f:
            config = json.load(f)
    except (OSError, ValueError) as e:
        raise ValueError(f"{directory!r}: {HF_CONFIG} is not readable JSON: {e}") from e
    if not isinstance(config, dict):
        raise ValueError(f"{directory!r}: {HF_CONFIG} holds a {type(config).__name__}, not a config object.")
    if config.get("model_type") != "vit":
        raise ValueError(f"{directory!r} holds a {config.get('model_type')!r} model, not a transformers 'vit'.")
    missing = [k for k in ("num_attention_heads", "hidden_size", "num_hidden_layers") if k not in config]
    if missing:
        raise ValueError(
            f"{directory!r}: {HF_CONFIG} lacks {', '.join(missing)}; a transformers ViT config "
            "states them (it cannot be read from the weights alone)."
        )
    return {**_HF_DEFAULTS, **config}


def _pair(value, field: str, directory: str) -> tuple:
    pair = tuple(value) if isinstance(value, (list, tuple)) else (value, value)
    if len(pair) != 2 or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in pair):
        raise ValueError(f"{directory!r}: {field}={value!r} is neither a positive int nor a pair of them.")
    return pair


def read_transformers(directory: str) -> Tuple[Dict[str, np.ndarray], dict]:
    """({official key: array}, keywords from `config.json`) of a `transformers` ViT directory.

    Every field of `ViTConfig` that changes the logits is read (what the file leaves out takes ViTConfig's
    default, `_HF_DEFAULTS`: LayerNorm epsilon 1e-12, exact GELU) or refused by name: an activation keras_vit's
    MLP lacks, non-square patches, a pooler activation other than tanh. The position table holds the class
    token's row (transformers' ViTEmbeddings) and the grid is `image_size` / `patch_size`."""
    config = _hf_config(directory)
    weights = os.path.join(directory, HF_WEIGHTS)
    if not os.path.exists(weights):
        raise FileNotFoundError(f"{directory!r} has no {HF_WEIGHTS} (only safetensors are read, never pickles).")
    act = config["hidden_act"]
    if act not in _HF_ACTIVATIONS:
        raise ValueError(
            f"{directory!r}: hidden_act={act!r}; keras_vit's MLP has {sorted(_HF_ACTIVATIONS)} only. "
            "Nothing was loaded."
        )
    patch = _pair(config["patch_size"], "patch_size", directory)
    if patch[0] != patch[1]:
        raise ValueError(f"{directory!r}: patch_size={config['patch_size']!r}; keras_vit's patches are square.")
    heads = int(config["num_attention_heads"])
    params = read_converted(weights, lambda sd: layouts.transformers_to_official(sd, heads, weights))
    if "pre_logits/kernel" in params and config["pooler_act"] != "tanh":
        raise ValueError(
            f"{directory!r}: pooler_act={config['pooler_act']!r}; keras_vit's representation layer "
            "is tanh. Nothing was loaded."
        )
    size = _pair(config["image_size"], "image_size", directory)
    return params, dict(
        num_heads=heads,
        activation=_HF_ACTIVATIONS[act],
        layer_norm_epsilon=float(config["layer_norm_eps"]),
        qkv_bias=bool(config["qkv_bias"]),
        prefix_position_embedding=True,
        input_shape=(*size, int(config["num_channels"])),
    )


HF_PREPROCESSOR = "preprocessor_config.json"
_PIL_RESAMPLE = {0: "nearest", 2: "bilinear", 3: "bicubic"}  # PIL's resampling filter numbers


def transformers_data_config(directory: str) -> DataConfig:
    """The evaluation preprocessing of a `transformers` ViT directory: its `preprocessor_config.json` (a
    ViTImageProcessor: both sides resized, PIL's filters, antialiased; mean and std), else the processor's
    defaults (bilinear, mean = std = 0.5)."""
    path = os.path.join(directory, HF_PREPROCESSOR)
    if not os.path.exists(path):
        return TRANSFORMERS_VIT
    try:
        with open(path) as f:
            config = json.load(f)
    except (OSError, ValueError) as e:
        raise ValueError(f"{directory!r}: {HF_PREPROCESSOR} is not readable JSON: {e}") from e
    if not isinstance(config, dict):
        raise ValueError(f"{path!r} holds a {type(config).__name__}, not a processor config object.")
    rescale = config.get("rescale_factor", 1 / 255) if config.get("do_rescale", True) else None
    if rescale is None or abs(float(rescale) - 1 / 255) > 1e-9:
        raise ValueError(
            f"{path!r}: do_rescale={config.get('do_rescale', True)}, rescale_factor={rescale!r}; "
            "keras_vit's preprocessing takes pixels in [0, 255] to [0, 1] (1/255) before the mean and "
            "std, as ViTImageProcessor does by default. Nothing was loaded."
        )
    resample = config.get("resample", 2)
    if resample not in _PIL_RESAMPLE:
        raise ValueError(
            f"{path!r}: resample={resample!r} is not one of PIL's {sorted(_PIL_RESAMPLE)} "
            "(nearest, bilinear, bicubic) that keras_vit applies."
        )
    normalize = config.get("do_normalize", True)
    return DataConfig(
        mean=config.get("image_mean", 0.5) if normalize else 0.0,
        std=config.get("image_std", 0.5) if normalize else 1.0,
        interpolation=_PIL_RESAMPLE[resample],
        antialias=True,
    )


def _plain_params(model, layout: str) -> tuple:
    """({official key: float32 array}, depth) of a plain ViT that PyTorch's libraries can hold, or a ValueError
    naming what they cannot (a hybrid stem, a representation layer)."""
    model = ensure_vit(model, f"{layout} writers take keras_vit models")
    if model.stem is not None and layout != "timm":
        raise ValueError(f"Model {model.name!r} is a hybrid; {layout} has no hybrid ViT.")
    if model.pre_logits is not None:
        raise ValueError(
            f"Model {model.name!r} has a representation (pre-logits) layer, which {layout}'s "
            "classifier lacks; rebuild it without one (representation_size=None) to export."
        )
    foreign = model.variant.non_official_parts(model.num_prefix_tokens > 0) + (
        [f"classifier={model.classifier!r}"] if model.classifier == "map" else []
    )
    if layout == "transformers" and foreign:
        raise ValueError(
            f"Model {model.name!r} has parts a transformers ViT lacks: {'; '.join(foreign)}. Write it "
            "with keras_vit.save_pretrained (a timm repository) instead."
        )
    params = {k: np.ascontiguousarray(v, dtype="float32") for k, v in official.model_params(model).items()}
    return params, model.vit_config.num_layers


def timm_state_dict(model, entry: Optional[dict] = None) -> Dict[str, np.ndarray]:
    """`model` as the state dict of timm's architecture (without a head where the model has none: timm's
    `num_classes=0`); `entry`: the table entry of the registered architecture it is written as, where the caller
    has found it already (`timm_args.registered_architecture`)."""
    params, n = _plain_params(model, "timm")
    return _timm_layout(model, params, n, entry)


def _timm_layout(model, params: Dict[str, np.ndarray], n: int, entry: Optional[dict] = None) -> Dict[str, np.ndarray]:
    """Official keys -> timm's state dict: its `VisionTransformer`, its NaFlexVit for a resampled table, or the
    registered architecture (`timm_args.registered_architecture`) that has the model's parts timm builds by name."""
    if model.variant.timm_writer_lacks():
        entry = entry or timm_args.registered_architecture(model)[2]
        return timm_out.official_to_timm(params, n, timm_out.TimmLayout.of(entry))
    sd = timm_out.official_to_timm(params, n)
    resampling = model.variant.position_resampling
    return sd if resampling is None else timm_out.naflex_out(sd, params, resampling.grid)


def save_safetensors(model, path: str, layout: str = "timm") -> str:
    """Writes `model` for PyTorch users, atomically: `layout="timm"` a `.safetensors` state dict of timm's
    `VisionTransformer` (its `Eva`, NaFlexVit or other registered architecture for the parts timm builds by name, laid out as that
    architecture is: `timm_args.registered_architecture`); `layout="transformers"` a directory (`config.json` +
    `model.safetensors`) for `ViTForImageClassification.from_pretrained`. Returns the path written."""
    from safetensors.numpy import save_file

    if layout not in ("timm", "transformers"):
        raise ValueError(f"layout={layout!r}; expected 'timm' or 'transformers'.")
    params, n = _plain_params(model, layout)
    if layout == "timm":
        if not str(path).endswith(".safetensors"):
            raise ValueError(
                f"layout='timm' writes one .safetensors file; got {path!r} (a timm repository "
                "directory: keras_vit.save_pretrained)."
            )
        sd = _timm_layout(model, params, n)
        return atomic.write_file(path, lambda tmp: save_file(sd, tmp, metadata={"format": "pt"}))
    if model.classifier != "token" or not model.include_top:
        raise ValueError(
            f"transformers' ViTForImageClassification classifies the class token with a head; model "
            f"{model.name!r} is classifier={model.classifier!r}, include_top={model.include_top}."
        )
    sd = layouts.official_to_transformers(params, n)
    c = model.vit_config
    config = dict(
        model_type="vit",
        architectures=["ViTForImageClassification"],
        hidden_size=c.hidden_size,
        num_hidden_layers=c.num_layers,
        num_attention_heads=c.num_heads,
        intermediate_size=c.mlp_dim,
        hidden_act="gelu_pytorch_tanh" if model.gelu_approximate else "gelu",
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        initializer_range=0.02,
        layer_norm_eps=1e-6,
        image_size=model.image_size[0],
        patch_size=c.patch_size,
        num_channels=model.channels,
        qkv_bias=True,
        id2label={str(i): f"LABEL_{i}" for i in range(model.classes)},
        label2id={f"LABEL_{i}": i for i in range(model.classes)},
    )
    if model.dynamic_size or model.image_size[0] != model.image_size[1]:
        raise ValueError(f"transformers' ViT config has one image_size; model {model.name!r} is {model.image_size}.")

    def fill(tmp_dir: str) -> None:
        save_file(sd, os.path.join(tmp_dir, HF_WEIGHTS), metadata={"format": "pt"})
        with open(os.path.join(tmp_dir, HF_CONFIG), "w") as f:
            json.dump(config, f, indent=2)

    return atomic.write_directory(path, fill, overwrite=True, replaceable=is_transformers_dir)
