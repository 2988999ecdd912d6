"""timm repository directories: what timm's `save_for_hf` writes and the Hugging Face hub serves for `timm/...`
models (`config.json` + `model.safetensors`).

`config.json` holds `architecture` (timm's model name), `model_args` (the keywords it was built with; absent
in files from older timm, where the arrays' shapes and the model table decide) and `pretrained_cfg` (input
size, mean, std, crop_pct, crop_mode, interpolation): that last part becomes the model's `DataConfig`. The
weights are a timm state dict, read by the same strict reader as a bare timm `.safetensors` file. Arguments of
timm's `VisionTransformer` that keras_vit does not build yet (LayerScale, registers, qk-norm, ...) are refused
by name; `pytorch_model.bin` is never unpickled.
"""

from __future__ import annotations

import json
import os
from typing import Dict, Tuple

import numpy as np

from keras_vit.vit.data_config import CROP_MODES, INTERPOLATIONS, DataConfig
from keras_vit.vit.labels import label_set_for
from keras_vit.weights import safetensors_files

CONFIG, WEIGHTS, PICKLE = "config.json", "model.safetensors", "pytorch_model.bin"
# model_args keras_vit reads (the arrays' shapes decide the sizes); those that act in training only; and the
# structural ones keras_vit builds only at timm's default value (class_token=False goes with global_pool="avg")
_READ = {"img_size", "patch_size", "embed_dim", "depth", "num_heads", "mlp_ratio", "num_classes", "in_chans",
         "global_pool", "class_token", "act_layer", "init_values", "no_embed_class"}
_ACTIVATIONS = {"gelu": False, "gelu_tanh": True}  # timm's name -> keras_vit's gelu_approximate
_TRAINING_ONLY = {"drop_rate", "pos_drop_rate", "proj_drop_rate", "attn_drop_rate", "drop_path_rate", "weight_init",
                  "dynamic_img_size"}
_DEFAULTS = {"qkv_bias": True, "reg_tokens": 0, "pre_norm": False, "qk_norm": False, "fc_norm": None}


def is_timm_dir(path: str) -> bool:
    """A directory whose config.json names a timm `architecture`."""
    try:
        with open(os.path.join(path, CONFIG)) as f:
            return os.path.isdir(path) and "architecture" in json.load(f)
    except (OSError, ValueError, TypeError):
        return False


def _config(directory: str) -> dict:
    try:
        with open(os.path.join(directory, CONFIG)) as f:
            config = json.load(f)
    except (OSError, ValueError) as e:
        raise ValueError(f"{directory!r}: {CONFIG} is not readable JSON: {e}") from e
    if not isinstance(config, dict) or not isinstance(config.get("architecture"), str):
        raise ValueError(f"{directory!r}: {CONFIG} names no timm architecture.")
    return config


def _check_args(directory: str, config: dict) -> dict:
    """model_args, after refusing those that make a network keras_vit does not build (named)."""
    args = config.get("model_args") or {}
    for key, value in args.items():
        if key in _READ or key in _TRAINING_ONLY:
            continue
        if key not in _DEFAULTS or (value != _DEFAULTS[key] and not (key == "fc_norm" and value is False)):
            raise ValueError(f"{directory!r} ({config['architecture']}) was built with {key}={value!r}, a part of "
                             "timm's VisionTransformer that keras_vit does not build yet; nothing was loaded.")
    if "act_layer" in args and args["act_layer"] not in _ACTIVATIONS:
        raise ValueError(f"{directory!r} ({config['architecture']}) uses act_layer={args['act_layer']!r}; keras_vit's "
                         f"MLP has {' or '.join(_ACTIVATIONS)}; nothing was loaded.")
    pool = args.get("global_pool", config.get("global_pool", "token"))
    if pool not in ("token", "avg"):
        raise ValueError(f"{directory!r}: global_pool={pool!r}; keras_vit pools with the class token or an average.")
    return args


def read(directory: str) -> Tuple[Dict[str, np.ndarray], dict]:
    """({official key: array}, keywords the directory implies) of a timm repository directory."""
    weights = os.path.join(directory, WEIGHTS)
    config = _config(directory)
    if not os.path.exists(weights):
        hint = (f" It has {PICKLE}, a pickle keras_vit never loads: convert it with timm "
                "(timm.models.load_checkpoint, then save_for_hf(..., safe_serialization=True))."
                if os.path.exists(os.path.join(directory, PICKLE)) else "")
        raise FileNotFoundError(f"{directory!r} has no {WEIGHTS}.{hint}")
    args = _check_args(directory, config)
    params, implied = safetensors_files.read_timm(weights, args.get("num_heads"))
    size = args.get("img_size") or (config.get("pretrained_cfg") or {}).get("input_size", [3, 224, 224])[1:]
    size = (size, size) if isinstance(size, int) else tuple(size)
    implied.update(input_shape=(int(size[0]), int(size[1]), int(args.get("in_chans", 3))))
    if args.get("global_pool", config.get("global_pool")) == "avg" and args.get("class_token", True) is False:
        implied["classifier"] = "gap"
    if "act_layer" in args:
        implied["gelu_approximate"] = _ACTIVATIONS[args["act_layer"]]
    if args.get("init_values"):  # LayerScale (its trained values are in the weights)
        implied["layer_scale_init"] = float(args["init_values"])
    return params, implied


def data_config(directory: str) -> DataConfig:
    """The directory's `pretrained_cfg` as a `DataConfig` (timm's ViT defaults for what it leaves out)."""
    cfg = _config(directory).get("pretrained_cfg") or {}
    interpolation = cfg.get("interpolation", "bicubic")
    crop_mode = cfg.get("crop_mode", "center")
    if interpolation not in INTERPOLATIONS or crop_mode not in CROP_MODES:
        raise ValueError(f"{directory!r}: pretrained_cfg interpolation={interpolation!r}, crop_mode={crop_mode!r}; "
                         f"keras_vit applies {INTERPOLATIONS} and {CROP_MODES}.")
    labels = label_set_for(cfg.get("num_classes") or 0)
    return DataConfig(mean=cfg.get("mean", 0.5), std=cfg.get("std", 0.5), crop_pct=cfg.get("crop_pct", 0.9),
                      crop_mode=crop_mode, interpolation=interpolation, antialias=True,
                      labels=labels if cfg.get("label_offset", 0) == 0 else None)


def _pretrained_cfg(model) -> dict:
    """The model's data config and input in timm's `pretrained_cfg` vocabulary."""
    config = model.data_config
    mean, std = config.for_channels(model.channels)
    return dict(input_size=[model.channels, *model.base_image_size], interpolation=config.interpolation,
                crop_pct=config.crop_pct, crop_mode=config.crop_mode, mean=list(mean), std=list(std),
                num_classes=model.classes, first_conv="patch_embed.proj", classifier="head",
                fixed_input_size=not model.dynamic_size, custom_load=False)


def save_pretrained(model, directory: str, layout: str = "timm", *, overwrite: bool = False) -> str:
    """Writes `model` as a timm repository directory (`config.json` + `model.safetensors`), what
    `timm.create_model("hf-hub:...")` or `pretrained_cfg_overlay=dict(file=...)` loads strictly, with the
    model's data config as `pretrained_cfg`. Plain ViTs (class token or GAP) with a head and no representation
    layer. Atomic; an existing directory is replaced only with `overwrite=True` and only when it holds nothing
    but an earlier output of this writer."""
    from safetensors.numpy import save_file

    from keras_vit.utils import atomic

    if layout != "timm":
        raise ValueError(f"layout={layout!r}; save_pretrained writes 'timm' repositories (transformers: "
                         "keras_vit.save_safetensors(model, dir, layout='transformers')).")
    sd = safetensors_files.timm_state_dict(model)
    c = model.vit_config
    gap = model.classifier == "gap"
    args = dict(img_size=list(model.base_image_size), patch_size=c.patch_size, embed_dim=c.hidden_size,
                depth=c.num_layers, num_heads=c.num_heads, mlp_ratio=c.mlp_dim / c.hidden_size,
                num_classes=model.classes, in_chans=model.channels, global_pool="avg" if gap else "token",
                class_token=not gap, act_layer="gelu_tanh" if model.gelu_approximate else "gelu")
    if gap:
        args["fc_norm"] = False  # the official GAP normalises before pooling, as timm does without fc_norm
    if model.encoder.layer_scale_init is not None:
        args["init_values"] = model.encoder.layer_scale_init
    if model.class_token is not None and not model.prefix_position_embedding:
        args["no_embed_class"] = True
    config = dict(architecture="vit_base_patch16_224", num_classes=model.classes, num_features=c.hidden_size,
                  global_pool=args["global_pool"], model_args=args, pretrained_cfg=_pretrained_cfg(model))

    def fill(tmp: str) -> None:
        save_file(sd, os.path.join(tmp, WEIGHTS), metadata={"format": "pt"})
        with open(os.path.join(tmp, CONFIG), "w") as f:
            json.dump(config, f, indent=2)

    return atomic.write_directory(directory, fill, overwrite=overwrite, replaceable=is_timm_dir)
