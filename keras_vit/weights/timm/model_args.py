"""timm's `model_args` (the keywords a timm model was built with beyond its architecture's own) in keras_vit's
vocabulary, both ways: read from a repository's `config.json` (`apply_model_args`), and chosen for a model being
written (`registered_architecture`: the registered architecture whose fixed parts are the model's, and the
`model_args` that set the rest).

timm builds the parts of its later ViT families (rotary embeddings, SwiGLU, RMSNorm, post-norm, parallel blocks, ...) from
the architecture's name: their norm and block classes are Python objects that `model_args` in JSON cannot name. So
a model with such parts is written as the registered architecture that has exactly them, with its size, depth,
input and head as `model_args`.
"""

from __future__ import annotations

import dataclasses
from typing import List, Tuple

import numpy as np

from keras_vit.vit import timm_table
from keras_vit.vit.variant import Variant

_ACTIVATIONS = {"gelu": "gelu", "gelu_tanh": "gelu_tanh", "quick_gelu": "quick_gelu"}  # timm's act_layer names
# model_args that act in training only (dropout, initialisation) or at call time only
_TRAINING_ONLY = {
    "drop_rate",
    "pos_drop_rate",
    "proj_drop_rate",
    "attn_drop_rate",
    "drop_path_rate",
    "weight_init",
    "dynamic_img_size",
    "dynamic_img_pad",
    "fix_init",
    "patch_drop_rate",
}
_POOLS = {"token": "token", "avg": "gap", "map": "map"}
# NaFlexVit's position-table arguments -> keras_vit's `position_resampling` fields
_RESAMPLING = {
    "pos_embed_grid_size": "grid",
    "pos_embed_interp_mode": "interpolation",
    "pos_embed_antialias": "antialias",
    "pos_embed_align_corners": "align_corners",
    "pos_embed_ar_preserving": "aspect_preserving",
}


def apply_model_args(name: str, kw: dict, args: dict) -> dict:
    """The table's keywords for timm's `name` with the `model_args` it was built with applied (timm merges
    them over the architecture's own); an argument keras_vit does not build is refused by name."""
    kw = dict(kw)
    ratio = kw["mlp_dim"] / kw["hidden_size"]
    base_class_token = kw["classifier"] == "token" if kw.get("class_token") is None else kw["class_token"]
    simple = dict(
        patch_size="patch_size",
        embed_dim="hidden_size",
        depth="num_layers",
        num_heads="num_heads",
        reg_tokens="num_register_tokens",
        qk_norm="qk_norm",
        qkv_bias="qkv_bias",
    )
    for key, value in args.items():
        if key in simple:
            kw[simple[key]] = value
        elif key == "mlp_ratio":
            ratio = float(value)
        elif key == "img_size":
            size = (value, value) if isinstance(value, int) else tuple(value)
            kw["input_shape"] = (int(size[0]), int(size[1]), kw["input_shape"][2])
        elif key == "in_chans":
            kw["input_shape"] = (*kw["input_shape"][:2], int(value))
        elif key == "num_classes":
            kw.pop("classes", None)
            kw.pop("include_top", None)
            if value:
                kw["classes"] = int(value)
            else:
                kw["include_top"] = False
        elif key == "global_pool" and value in _POOLS:
            if _POOLS[value] != kw["classifier"] and "fc_norm" not in args:
                kw["fc_norm"] = value == "avg"  # timm's default: fc_norm with average pooling
            kw["classifier"] = _POOLS[value]
        elif key == "act_layer" and value in _ACTIVATIONS:
            kw["activation"] = _ACTIVATIONS[value]
        elif key == "num_kv_heads":  # grouped-query attention (timm's Eva): one count or one per block
            kw["key_value_heads"] = value if value is None or isinstance(value, int) else tuple(value)
        elif key == "init_values":
            kw["layer_scale_init"] = float(value) if value else None
        elif key == "no_embed_class":
            kw["prefix_position_embedding"] = not value
        elif key == "pre_norm":
            kw["pre_norm"], kw["patch_bias"] = bool(value), not value  # timm drops the patch bias with pre-norm
        elif key == "final_norm":
            kw["final_norm"] = bool(value)
        elif key == "fc_norm":
            kw["fc_norm"] = bool(value) if value is not None else kw["classifier"] == "gap"
        elif _newer_arg(name, key, value, kw):  # NaFlexVit's position table, differential attention
            continue
        elif key == "class_token":
            continue  # below, once the pooling is known
        elif key not in _TRAINING_ONLY:
            raise ValueError(
                f"{name} was built with {key}={value!r}, a part of timm's VisionTransformer that "
                "keras_vit does not build yet; nothing was loaded."
            )
    if "embed_dim" in args or "mlp_ratio" in args:  # timm: int(embed_dim * mlp_ratio), truncated
        kw["mlp_dim"] = int(kw["hidden_size"] * ratio)
    has_class_token = bool(args.get("class_token", base_class_token))
    if not has_class_token and kw["classifier"] == "token":
        raise ValueError(f"{name}: class_token=False with token pooling is not a model timm builds.")
    kw["class_token"] = None if has_class_token == (kw["classifier"] == "token") else has_class_token
    return kw


def _newer_arg(name: str, key: str, value, kw: dict) -> bool:
    """Applies one of the by-name parts' `model_args` to `kw` (True), or leaves it to the caller (False): NaFlexVit's
    position table (`pos_embed` and its resampling) and timm's differential attention (`attn_layer="diff"`)."""
    resampling = kw.get("position_resampling")
    if key in _RESAMPLING and resampling is not None:
        kw["position_resampling"] = {
            **resampling,
            _RESAMPLING[key]: list(value) if key == "pos_embed_grid_size" else value,
        }
    elif key == "pos_embed" and resampling is not None and value in ("learned", "factorized"):
        kw["position_resampling"] = {**resampling, "factorized": value == "factorized"}
    elif key == "attn_layer" and value in ("attn", "diff"):
        kw["differential_attention"] = value == "diff"
    else:
        return False
    return True


# the modules whose architectures a model with parts timm builds by name is written as (timm's Eva; its VisionTransformer's
# AIMv2, parallel, post-norm and RMSNorm architectures; MobileCLIP's convolutional stem)
_WRITABLE_MODULES = ("eva", "vision_transformer", "vision_transformer_hybrid")
POOL_NAMES = {"token": "token", "gap": "avg", "map": "map"}  # keras_vit's classifier -> timm's global_pool


def head_classes(model) -> int:
    """timm's `num_classes` of `model`: 0 for a model without a head (timm's feature extractors: DINOv3, EVA-02,
    AIMv2 ship so)."""
    return model.classes if model.include_top else 0


def _mlp_ratio(mlp_dim: int, width: int) -> float:
    """A ratio timm turns back into `mlp_dim` (it truncates int(width * ratio))."""
    ratio = mlp_dim / width
    while int(width * ratio) < mlp_dim:
        ratio = float(np.nextafter(ratio, np.inf))
    return ratio


def _args_for(model, entry: dict) -> dict:
    """The `model_args` that turn the architecture `entry` into `model`'s size, depth, input and head."""
    c, v = model.vit_config, model.variant
    args = dict(
        img_size=list(model.base_image_size),
        depth=c.num_layers,
        in_chans=model.channels,
        num_classes=head_classes(model),
    )
    for arg, ours, theirs in (
        ("patch_size", c.patch_size, entry["patch_size"]),
        ("embed_dim", c.hidden_size, entry["hidden_size"]),
        ("num_heads", c.num_heads, entry["num_heads"]),
    ):
        if ours != theirs:
            args[arg] = ours
    if c.mlp_dim != entry["mlp_dim"] or "embed_dim" in args:
        args["mlp_ratio"] = _mlp_ratio(c.mlp_dim, c.hidden_size)
    if v.layer_scale_init != entry["layer_scale_init"]:
        args["init_values"] = v.layer_scale_init
    heads = entry.get("key_value_heads")
    if v.key_value_heads != (tuple(heads) if isinstance(heads, list) else heads):  # grouped-query attention
        args["num_kv_heads"] = list(v.key_value_heads) if isinstance(v.key_value_heads, tuple) else v.key_value_heads
    return args


def architecture_differences(model, kw: dict) -> List[str]:
    """The keywords in which the architecture's (`kw`, its model_args applied) differ from `model`'s."""
    theirs = Variant.for_model(kw["classifier"], None, **{f: kw[f] for f in Variant.fields() if f in kw})
    theirs = dataclasses.replace(theirs, position_interpolation=model.variant.position_interpolation)
    out = [
        f"{f}={getattr(model.variant, f)!r} (timm: {getattr(theirs, f)!r})"
        for f in Variant.fields()
        if getattr(theirs, f) != getattr(model.variant, f)
    ]
    c = model.vit_config
    ours = dict(
        classifier=model.classifier,
        hidden_size=c.hidden_size,
        mlp_dim=c.mlp_dim,
        num_heads=c.num_heads,
        num_layers=c.num_layers,
        patch_size=c.patch_size,
        resnet_layers=c.resnet_layers,
    )
    return out + [f"{k}={v!r} (timm: {kw.get(k)!r})" for k, v in ours.items() if kw.get(k) != v]


def registered_architecture(model) -> Tuple[str, dict, dict]:
    """(timm architecture name, `model_args`, its table entry) that timm builds as exactly `model`: the registered
    architecture whose fixed parts (norms, MLP, blocks, rotary embeddings, pooling, tokens) are the model's, fewest
    other differences first (fewest `model_args`, then the nearest width: a fine-tuned checkpoint is written under
    its own name), with `model_args` for its size, depth, input and head. A ValueError names the closest
    architecture and what differs when none fits."""
    found, near = [], []
    for name in timm_table.list_timm_models():
        entry = timm_table.facts(name)
        if entry["module"] not in _WRITABLE_MODULES:
            continue
        args = _args_for(model, entry)
        try:
            kw = apply_model_args(name, timm_table.model_kwargs(name), args)
        except ValueError:
            continue
        differences = architecture_differences(model, kw)
        rank = (
            len(args),
            abs(model.vit_config.hidden_size - entry["hidden_size"]),
            list(model.base_image_size) != entry["image_size"],
            name,
        )
        (near if differences else found).append((len(differences), rank, name, args, entry, differences))
    if found:
        _, _, name, args, entry, _ = min(found, key=lambda t: t[1])
        return name, args, entry
    lacks = "; ".join(model.variant.timm_writer_lacks())
    closest = min(near, key=lambda t: t[:2]) if near else None
    hint = f" The closest, {closest[2]}, differs in {'; '.join(closest[5])}." if closest else ""
    raise ValueError(
        f"Model {model.name!r} has parts timm builds from an architecture's name ({lacks}), and no "
        f"architecture timm {timm_table.timm_version()} registers has all of this model's.{hint} "
        "Save it with model.save (a .keras file) instead. Nothing was written."
    )
