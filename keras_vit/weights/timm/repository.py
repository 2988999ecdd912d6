"""timm repository directories: what timm's `save_for_hf` writes and the Hugging Face hub serves for `timm/...`
models (`config.json` + `model.safetensors`).

`config.json` holds `architecture` (timm's model name), `model_args` (the keywords it was built with beyond the
architecture's own; often absent) and `pretrained_cfg` (input
size, mean, std, crop_pct, crop_mode, interpolation): that last part becomes the model's `DataConfig`. The
weights are a timm state dict, read by the same strict reader as a bare timm `.safetensors` file. The
architecture comes from the name's facts (`keras_vit.vit.timm_table`; timm's hub configs often hold nothing
else) with `model_args` applied; arguments keras_vit does not build yet are refused by name;
`pytorch_model.bin` is never unpickled.
"""

from __future__ import annotations

import json
import os
from typing import Dict, Optional, Tuple

import numpy as np

from keras_vit.vit.data_config import CROP_MODES, INTERPOLATIONS, PASS_ORDERS, DataConfig
from keras_vit.vit import timm_table
from keras_vit.vit.labels import LABEL_SETS, label_set, label_set_for
from keras_vit.weights import safetensors_files
from keras_vit.weights.timm import model_args
from keras_vit.weights.timm import state_dict as timm_state

CONFIG, WEIGHTS, PICKLE = "config.json", "model.safetensors", "pytorch_model.bin"
INDEX = "model.safetensors.index.json"  # a sharded checkpoint: its shards beside it


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
    for field in ("model_args", "pretrained_cfg"):
        if config.get(field) is not None and not isinstance(config[field], dict):
            raise ValueError(
                f"{directory!r}: {CONFIG}'s {field} is a {type(config[field]).__name__}, not an object of keywords."
            )
    return config


def architecture(directory: str, config: Optional[dict] = None) -> dict:
    """`VisionTransformer` keywords of a timm repository directory: its `architecture`'s facts (the table,
    `keras_vit.vit.timm_table`) with its `model_args` applied. An architecture keras_vit does not know, or one
    with parts it does not build, is refused naming them."""
    config = _config(directory) if config is None else config
    name = config["architecture"]
    try:
        kw = timm_table.model_kwargs(name)
    except ValueError as e:
        raise ValueError(f"{directory!r}: {e} Nothing was loaded.") from None
    args = dict(config.get("model_args") or {})
    if "num_classes" not in args and config.get("num_classes") is not None:
        args["num_classes"] = config["num_classes"]  # timm builds with the config's num_classes by default
    return model_args.apply_model_args(name, kw, args)


def _check_head(directory: str, implied: dict, params: Dict[str, np.ndarray]) -> None:
    """timm loads a repository strictly: a head of another size than the config's `num_classes` is refused."""
    classes = implied.get("classes", 0) if implied.get("include_top", True) else 0
    have = int(params["head/kernel"].shape[-1]) if "head/kernel" in params else 0
    if classes != have:
        raise ValueError(
            f"{directory!r}: {CONFIG} says num_classes={classes}, but its weights hold "
            f"{'a ' + str(have) + '-class head' if have else 'no head'}; timm refuses this repository "
            "too. Nothing was loaded."
        )


def read(directory: str) -> Tuple[Dict[str, np.ndarray], dict]:
    """({official key: array}, keywords the directory implies) of a timm repository directory."""
    weights = os.path.join(directory, WEIGHTS)
    config = _config(directory)
    sharded = not os.path.exists(weights) and os.path.exists(os.path.join(directory, INDEX))
    weights = os.path.join(directory, INDEX) if sharded else weights
    if not os.path.exists(weights):
        hint = (
            f" It has {PICKLE}, a pickle keras_vit never loads: convert it with timm "
            "(timm.models.load_checkpoint, then save_for_hf(..., safe_serialization=True))."
            if os.path.exists(os.path.join(directory, PICKLE))
            else ""
        )
        raise FileNotFoundError(f"{directory!r} has no {WEIGHTS}.{hint}")
    implied = architecture(directory, config)
    params = timm_state.read_timm(weights, implied["num_heads"], sharded)[0]
    _check_head(directory, implied, params)
    return params, implied


BLOCK_SCHEMA = 1  # of the `keras_vit` object in config.json
_BLOCK_FIELDS = ("schema", "antialias", "pass_order")


def _keras_vit_block(directory: str, config: dict) -> dict:
    """config.json's `keras_vit` object ({} where there is none), checked: an object of schema `BLOCK_SCHEMA`
    with only the fields keras_vit writes; anything else is refused naming the file and the field."""
    if "keras_vit" not in config:
        return {}
    block, where = config["keras_vit"], f"{os.path.join(directory, CONFIG)!r}"
    if not isinstance(block, dict):
        raise ValueError(f"{where}: its keras_vit field is a {type(block).__name__}, not keras_vit's object.")
    if block.get("schema") != BLOCK_SCHEMA:
        raise ValueError(
            f"{where}: its keras_vit object has schema {block.get('schema')!r}, not {BLOCK_SCHEMA} (written by an "
            "earlier keras_vit build, or edited): save the model again with this keras_vit."
        )
    unknown = sorted(set(block) - set(_BLOCK_FIELDS))
    if unknown:
        raise ValueError(f"{where}: its keras_vit object has the field {unknown[0]!r}, which keras_vit never writes.")
    return block


def data_config(directory: str) -> DataConfig:
    """The directory's `pretrained_cfg` as a `DataConfig` (timm's ViT defaults for what it leaves out). timm's
    `pretrained_cfg` has no antialias or pass-order field (its PIL resizes always antialias, under the installed
    Pillow; `PretrainedCfg` refuses unknown fields), so a model saved with other values records them in a
    `keras_vit` object beside it. The class names are timm's `label_names` (top level, as timm writes them), else
    the shipped label set with as many classes as the head."""
    config = _config(directory)
    cfg = config.get("pretrained_cfg") or {}
    ours = _keras_vit_block(directory, config)
    antialias = ours.get("antialias", True)
    if not isinstance(antialias, bool):
        raise ValueError(f"{directory!r}: keras_vit.antialias={antialias!r} in {CONFIG} must be true or false.")
    pass_order = ours.get("pass_order", "pillow13")
    if pass_order not in PASS_ORDERS:
        raise ValueError(
            f"{directory!r}: keras_vit.pass_order={pass_order!r} in {CONFIG}; expected one of {PASS_ORDERS}."
        )
    interpolation = cfg.get("interpolation", "bicubic")
    crop_mode = cfg.get("crop_mode", "center")
    if interpolation not in INTERPOLATIONS or crop_mode not in CROP_MODES:
        raise ValueError(
            f"{directory!r}: pretrained_cfg interpolation={interpolation!r}, crop_mode={crop_mode!r}; "
            f"keras_vit applies {INTERPOLATIONS} and {CROP_MODES}."
        )
    labels = _labels(directory, config.get("label_names", cfg.get("label_names")), cfg.get("num_classes") or 0)
    return DataConfig(
        mean=cfg.get("mean", 0.5),
        std=cfg.get("std", 0.5),
        crop_pct=cfg.get("crop_pct", 0.9),
        crop_mode=crop_mode,
        interpolation=interpolation,
        antialias=antialias,
        labels=labels if cfg.get("label_offset", 0) == 0 else None,
        pass_order=pass_order,
    )


def _labels(directory: str, names, classes: int):
    """`label_names` (a list, or timm's {index: name} without gaps) as a shipped set's name where they are its
    WordNet ids, else as class names; None given: the shipped set of `classes` classes, if any."""
    if names is None:
        return label_set_for(classes)
    if isinstance(names, dict):
        try:
            ordered = sorted((int(k), v) for k, v in names.items())
        except (TypeError, ValueError):
            ordered = []
        if [k for k, _ in ordered] != list(range(len(names))):
            raise ValueError(f"{directory!r}: label_names in {CONFIG} must map 0..n-1 to names.")
        names = [v for _, v in ordered]
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise ValueError(f"{directory!r}: label_names in {CONFIG} must be a list of strings.")
    for name, (_, count) in LABEL_SETS.items():
        if len(names) == count and names == [c.id for c in label_set(name)]:
            return name
    return tuple(names)


def _first_conv(model) -> str:
    """The state-dict name of the convolution that reads the pixels (timm adapts it to another `in_chans`)."""
    if model.variant.position_resampling is not None:
        return "embeds.proj"
    if model.variant.convolutional_stem:
        return "patch_embed.backbone.0.conv"
    if model.stem is not None:
        return "patch_embed.backbone.stem.conv" if model.vit_config.resnet_layers else "patch_embed.backbone.conv"
    return "patch_embed.proj"


def _pretrained_cfg(model) -> dict:
    """The model's data config and input in timm's `pretrained_cfg` vocabulary."""
    config = model.data_config
    mean, std = config.for_channels(model.channels)
    return dict(
        input_size=[model.channels, *model.base_image_size],
        interpolation=config.interpolation,
        crop_pct=config.crop_pct,
        crop_mode=config.crop_mode,
        mean=list(mean),
        std=list(std),
        num_classes=model_args.head_classes(model),
        first_conv=_first_conv(model),
        classifier="head",
        fixed_input_size=not model.dynamic_size,
        custom_load=False,
    )


# timm's registered BiT-ResNet hybrids, by stages: the architecture name builds the backbone (model_args cannot)
_HYBRIDS = {
    (): "vit_tiny_r_s16_p8_224",
    (2, 2, 2, 2): "vit_small_r26_s32_224",
    (3, 4, 9): "vit_base_r50_s16_224",
    (3, 4, 6, 3): "vit_large_r50_s32_224",
}


def _hybrid_architecture(model) -> str:
    c = model.vit_config
    name = _HYBRIDS.get(tuple(c.resnet_layers)) if c.resnet_width == 1 else None
    if name is None or model.variant.stem_numerics != "timm":
        raise ValueError(
            f"Model {model.name!r}: a hybrid with stages {tuple(c.resnet_layers)} and width "
            f"{c.resnet_width} ({model.variant.stem_numerics} numerics) is none of timm's registered "
            f"hybrids ({', '.join(f'{v} {k}' for k, v in _HYBRIDS.items())}, timm numerics)."
        )
    return name


_NAFLEX_BASE = "naflexvit_base_patch16_gap"  # model_args set every part that differs (NaFlexVitCfg's fields)


def _naflex_args(model, args: dict) -> Tuple[dict, str]:
    """`_model_args` for a model with a resampled position table, as timm's NaFlexVit takes them."""
    v, r = model.variant, model.variant.position_resampling
    if v.layer_norm_epsilon != 1e-6 or v.distillation_token or model.stem is not None:
        raise ValueError(
            f"Model {model.name!r}: timm's NaFlexVit has LayerNorm epsilon 1e-6 (this model "
            f"{v.layer_norm_epsilon}), no distillation token and no ResNet stem. Nothing was written."
        )
    for key in ("no_embed_class", "fc_norm"):
        args.pop(key)
    args.update(
        pos_embed="factorized" if r.factorized else "learned",
        pos_embed_grid_size=list(r.grid),
        pos_embed_interp_mode=r.interpolation,
        pos_embed_antialias=r.antialias,
        pos_embed_align_corners=r.align_corners,
        pos_embed_ar_preserving=r.aspect_preserving,
        fc_norm=v.fc_norm,
        class_token=model.class_token is not None,
    )
    return args, _NAFLEX_BASE


def _model_args(model) -> Tuple[dict, str]:
    """(timm's `model_args`, the architecture whose fixed parts match the model's): the LayerNorm epsilon and
    the distillation head are not `model_args` in timm, so the architecture's name carries them."""
    c, v = model.vit_config, model.variant
    if v.patch_bias == v.pre_norm:
        raise ValueError(
            f"Model {model.name!r} has pre_norm={v.pre_norm} with patch_bias={v.patch_bias}; timm "
            "ties the two (a pre-norm model has no patch bias), so it has no timm equivalent."
        )
    pool = model_args.POOL_NAMES[model.classifier]
    args = dict(
        img_size=list(model.base_image_size),
        patch_size=c.patch_size,
        embed_dim=c.hidden_size,
        depth=c.num_layers,
        num_heads=c.num_heads,
        mlp_ratio=c.mlp_dim / c.hidden_size,
        num_classes=model_args.head_classes(model),
        in_chans=model.channels,
        global_pool=pool,
        class_token=model.class_token is not None,
        act_layer=v.activation,
        fc_norm=v.fc_norm,
        init_values=v.layer_scale_init,
        no_embed_class=not v.prefix_position_embedding,
        reg_tokens=v.num_register_tokens,
        pre_norm=v.pre_norm,
        qk_norm=v.qk_norm,
        qkv_bias=v.qkv_bias,
        final_norm=v.final_norm,
    )
    if v.differential_attention:
        args["attn_layer"] = "diff"
    if v.position_resampling is not None:
        return _naflex_args(model, args)
    if model.stem is not None:
        return args, _hybrid_architecture(model)
    if v.distillation_token:
        if v.layer_norm_epsilon != 1e-6:
            raise ValueError(
                f"Model {model.name!r}: timm's distilled ViT has LayerNorm epsilon 1e-6, this model "
                f"{v.layer_norm_epsilon}."
            )
        return args, "deit_base_distilled_patch16_224"
    names = {1e-6: "vit_base_patch16_224", 1e-5: "vit_base_patch16_clip_224"}
    if v.layer_norm_epsilon not in names:
        raise ValueError(
            f"Model {model.name!r}: LayerNorm epsilon {v.layer_norm_epsilon} is not one of timm's ViT "
            f"architectures' ({sorted(names)})."
        )
    return args, names[v.layer_norm_epsilon]


def save_pretrained(model, directory: str, layout: str = "timm", *, overwrite: bool = False) -> str:
    """Writes `model` as a timm repository directory (`config.json` + `model.safetensors`), what
    `timm.create_model("hf-hub:...")` or `pretrained_cfg_overlay=dict(file=...)` loads strictly, with the
    model's data config as `pretrained_cfg`. Every family timm registers an architecture for (a model with the
    parts as the registered architecture that has them; without a head as `num_classes=0`), with no
    representation layer. Atomic; an existing directory is replaced only with `overwrite=True` and only when it
    holds nothing but an earlier output of this writer."""
    from safetensors.numpy import save_file

    from keras_vit.utils import atomic

    if layout != "timm":
        raise ValueError(
            f"layout={layout!r}; save_pretrained writes 'timm' repositories (transformers: "
            "keras_vit.save_safetensors(model, dir, layout='transformers'))."
        )
    entry = None
    if model.variant.timm_writer_lacks():  # parts timm builds by name: the registered architecture that has them
        architecture_name, args, entry = model_args.registered_architecture(model)
    else:
        args, architecture_name = _model_args(model)
    sd = safetensors_files.timm_state_dict(model, entry)
    config = dict(
        architecture=architecture_name,
        num_classes=model_args.head_classes(model),
        num_features=model.vit_config.hidden_size,
        global_pool=model_args.POOL_NAMES[model.classifier],
        model_args=args,
        pretrained_cfg=_pretrained_cfg(model),
        keras_vit=dict(
            schema=BLOCK_SCHEMA, antialias=model.data_config.antialias, pass_order=model.data_config.pass_order
        ),
    )
    if isinstance(model.data_config.labels, tuple) and model.include_top:  # where timm keeps a head's class names
        config["label_names"] = list(model.data_config.labels)

    def fill(tmp: str) -> None:
        save_file(sd, os.path.join(tmp, WEIGHTS), metadata={"format": "pt"})
        with open(os.path.join(tmp, CONFIG), "w") as f:
            json.dump(config, f, indent=2)

    return atomic.write_directory(directory, fill, overwrite=overwrite, replaceable=is_timm_dir)
