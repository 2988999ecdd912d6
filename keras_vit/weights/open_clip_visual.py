"""open_clip's ViT image towers as `VisionTransformer` keywords and timm state dicts (the timm reader takes them
from there): open_clip's own ViT (`open_clip.transformer.VisionTransformer`, OpenAI CLIP's layout) and a timm
trunk (`open_clip.timm_model.TimmModel`: SigLIP, EVA-CLIP, PE core).

A timm trunk's tensors are timm's own under `visual.trunk.`. open_clip builds it with
`timm.create_model(timm_model_name, num_classes=..., global_pool=timm_pool)` and nothing else (no image size, no
depth or width: the architecture's own), so its facts are timm's architecture table entry with those two
applied: `timm_proj` "none" builds no head (the pooled features are the embedding), absent / null keeps timm's
head as the projection into the shared space (`num_classes=embed_dim`). `vision_cfg.timm_model_args`, which
open_clip does not have, holds further timm keywords a shrunk test model was built with
(tools/make_open_clip_fixtures.py), applied as timm's `model_args` are. An extra projection after the trunk
(`timm_proj` "linear" / "mlp": ConvNeXt and ViTamin towers) and attention pools of open_clip's own are refused.

The tower is timm's `vit_*_clip_*` form (a LayerNorm before the blocks, a class token read after the final norm,
no patch bias, LayerNorm epsilon 1e-5, quick GELU for OpenAI's weights) with a bias-free projection `proj` into
the shared embedding, which keras_vit holds as the head (its bias zero, as timm's conversion of these weights
sets it). The key names map one to one onto timm's (timm's `_convert_openai_clip` states the same
correspondence): `conv1` -> `patch_embed.proj`, `class_embedding` -> `cls_token`, `positional_embedding` ->
`pos_embed`, `ln_pre` -> `norm_pre`, `transformer.resblocks.<i>.{ln_1, ln_2, attn.in_proj_*, attn.out_proj,
mlp.c_fc, mlp.c_proj, ls_1, ls_2}` -> `blocks.<i>.{norm1, norm2, attn.qkv, attn.proj, mlp.fc1, mlp.fc2, ls1, ls2}`,
`ln_post` -> `norm`, `proj` -> `head`.
"""

from __future__ import annotations

import re
from typing import Dict, Tuple

import numpy as np

from keras_vit.vit import timm_table
from keras_vit.weights.open_clip_text import CUSTOM_BLOCK
from keras_vit.weights.timm.model_args import apply_model_args

# open_clip vision-config keys whose other values are forms keras_vit does not build here (refused by name)
_PLAIN = dict(
    attentional_pool=False,
    no_ln_pre=False,
    pos_embed_type="learnable",
    final_ln_after_pool=False,
    pool_type="tok",
    output_tokens=False,
    **CUSTOM_BLOCK,
)
_SIZES = {"layers", "width", "head_width", "mlp_ratio", "patch_size", "image_size", "ls_init_value"}
_IGNORED = {"patch_dropout", "attn_pooler_queries", "attn_pooler_heads", "block_type", "act_kwargs", "norm_kwargs"}
_TRUNK = {"timm_model_name", "timm_model_pretrained", "timm_pool", "timm_proj", "timm_proj_bias", "timm_drop"}
_TRUNK |= {"timm_drop_path"}


def image_tower(model_cfg: dict, source: str = "open_clip_config.json") -> Tuple[str, dict]:
    """(the timm architecture whose form it is, `VisionTransformer` keywords) of an open_clip model config's image
    tower (open_clip's own ViT or a timm ViT trunk); another tower (a ResNet, ConvNeXt, ...) is refused naming
    it."""
    v = dict(model_cfg.get("vision_cfg") or {})
    if v.get("timm_model_name"):
        return _trunk(v, model_cfg, source)
    unknown = sorted(set(v) - set(_PLAIN) - _SIZES - _IGNORED - _TRUNK)
    if unknown:
        raise ValueError(f"{source}: vision_cfg.{unknown[0]} is not an open_clip setting keras_vit knows.")
    layers = v.get("layers", 12)
    if not isinstance(layers, int):
        raise ValueError(f"{source}: vision_cfg.layers={layers!r} is a ResNet image tower (ModifiedResNet), not a ViT.")
    for key, plain in _PLAIN.items():
        if v.get(key, plain) != plain:
            raise ValueError(f"{source}: vision_cfg.{key}={v[key]!r}: keras_vit does not build that image tower.")
    if v.get("block_type") not in (None, "default"):
        raise ValueError(f"{source}: vision_cfg.block_type={v['block_type']!r}: keras_vit builds the default block.")
    norm = dict(v.get("norm_kwargs") or {})
    if v.get("act_kwargs") or set(norm) - {"eps"}:
        raise ValueError(f"{source}: vision_cfg act_kwargs / norm_kwargs other than LayerNorm's eps are not built.")
    quick = bool(model_cfg.get("quick_gelu", False))
    name = "vit_base_patch16_clip_quickgelu_224" if quick else "vit_base_patch16_clip_224"
    width, head_width = int(v.get("width", 768)), int(v.get("head_width", 64))
    if width % head_width:
        raise ValueError(f"{source}: vision_cfg.width {width} is not a multiple of head_width {head_width}.")
    size = v.get("image_size", 224)
    args = dict(
        patch_size=int(v.get("patch_size", 16)),
        embed_dim=width,
        depth=layers,
        num_heads=width // head_width,
        mlp_ratio=float(v.get("mlp_ratio", 4.0)),
        img_size=size if isinstance(size, int) else tuple(size),
        num_classes=int(model_cfg["embed_dim"]),
        init_values=v.get("ls_init_value"),
    )
    kw = apply_model_args(name, timm_table.model_kwargs(name), args)
    kw["layer_norm_epsilon"] = float(norm.get("eps", 1e-5))  # open_clip's LayerNorm: PyTorch's default
    return name, kw


def _trunk(v: dict, model_cfg: dict, source: str) -> Tuple[str, dict]:
    """A timm trunk's architecture and keywords, as open_clip's `TimmModel` builds it."""
    name = v["timm_model_name"]
    unknown = sorted(set(v) - _TRUNK - {"image_size", "patch_dropout", "timm_model_args"})
    if unknown:
        raise ValueError(f"{source}: vision_cfg.{unknown[0]} is not a setting of open_clip's timm image towers.")
    proj, pool = v.get("timm_proj", "linear"), v.get("timm_pool", "avg")
    if proj not in (None, "none"):
        raise ValueError(
            f"{source}: vision_cfg.timm_proj={proj!r}: an extra projection after timm's {name!r} trunk, which "
            "keras_vit does not build (open_clip uses it for ConvNeXt and ViTamin towers)."
        )
    try:
        kw = timm_table.model_kwargs(name)
    except ValueError as e:
        raise ValueError(f"{source}: the image tower is timm's {name!r}: {e}") from None
    args = dict(v.get("timm_model_args") or {})
    args["num_classes"] = 0 if proj == "none" else int(model_cfg["embed_dim"])
    if pool:
        args["global_pool"] = pool
    return name, apply_model_args(name, kw, args)


_BLOCK = {
    "ln_1": "norm1",
    "ln_2": "norm2",
    "attn.in_proj_weight": "attn.qkv.weight",
    "attn.in_proj_bias": "attn.qkv.bias",
    "attn.out_proj": "attn.proj",
    "mlp.c_fc": "mlp.fc1",
    "mlp.c_proj": "mlp.fc2",
    "ls_1": "ls1",
    "ls_2": "ls2",
}
_TOP = {"conv1": "patch_embed.proj", "ln_pre": "norm_pre", "ln_post": "norm"}


def timm_state(sd: Dict[str, np.ndarray], prefix: str = "visual.") -> Dict[str, np.ndarray]:
    """The image tower's tensors (under `prefix`) in timm's layout: a trunk's as they are, open_clip's own ViT's
    renamed; a tensor without a timm name is refused naming it."""
    if any(k.startswith(prefix + "trunk.") for k in sd):
        outside = sorted(k for k in sd if k.startswith(prefix) and not k.startswith(prefix + "trunk."))
        if outside:
            raise ValueError(f"{outside[0]!r}: a part after open_clip's timm trunk keras_vit does not map.")
        return {k[len(prefix + "trunk.") :]: v for k, v in sd.items() if k.startswith(prefix + "trunk.")}
    out: Dict[str, np.ndarray] = {}
    block = re.compile(r"transformer\.resblocks\.(\d+)\.(.+)$")
    for key, value in sd.items():
        if not key.startswith(prefix):
            continue
        k = key[len(prefix) :]
        m = block.match(k)
        if m:
            rest = m.group(2)
            part = next((p for p in _BLOCK if rest == p or rest.startswith(p + ".")), None)
            if part is None:
                raise ValueError(
                    f"{key!r}: a part of open_clip's image block keras_vit does not map. Nothing was loaded."
                )
            out[f"blocks.{m.group(1)}.{_BLOCK[part]}{rest[len(part) :]}"] = value
        elif k == "class_embedding":
            out["cls_token"] = np.asarray(value).reshape(1, 1, -1)
        elif k == "positional_embedding":
            out["pos_embed"] = np.asarray(value)[None]
        elif k == "proj":
            out["head.weight"] = np.ascontiguousarray(np.asarray(value).T)
            out["head.bias"] = np.zeros(np.asarray(value).shape[1], np.asarray(value).dtype)
        elif k.split(".")[0] in _TOP:
            top = k.split(".")[0]
            out[_TOP[top] + k[len(top) :]] = value
        else:
            raise ValueError(f"{key!r}: a part of open_clip's image tower keras_vit does not map. Nothing was loaded.")
    return out


_BLOCK_BACK = {timm: ours for ours, timm in _BLOCK.items()}
_TOP_BACK = {timm: ours for ours, timm in _TOP.items()}


def open_clip_state(timm_sd: Dict[str, np.ndarray], trunk: bool, prefix: str = "visual.") -> Dict[str, np.ndarray]:
    """An image tower's timm state dict in open_clip's names: under `prefix + "trunk."` as it is for a timm trunk,
    renamed back (`timm_state` reversed) for open_clip's own ViT, whose projection has no bias (a non-zero head
    bias is refused: open_clip's `proj` cannot hold it)."""
    if trunk:
        return {prefix + "trunk." + k: v for k, v in timm_sd.items()}
    out: Dict[str, np.ndarray] = {}
    block = re.compile(r"blocks\.(\d+)\.(.+)$")
    for key, value in timm_sd.items():
        m = block.match(key)
        if m:
            rest = m.group(2)
            part = next((p for p in _BLOCK_BACK if rest == p or rest.startswith(p + ".")), None)
            if part is None:
                raise ValueError(f"{key!r}: a part open_clip's image block does not have; not written.")
            out[f"{prefix}transformer.resblocks.{m.group(1)}.{_BLOCK_BACK[part]}{rest[len(part) :]}"] = value
        elif key == "cls_token":
            out[prefix + "class_embedding"] = value.reshape(-1)
        elif key == "pos_embed":
            out[prefix + "positional_embedding"] = value[0]
        elif key == "head.weight":
            out[prefix + "proj"] = np.ascontiguousarray(value.T)
        elif key == "head.bias":
            if np.any(value != 0):
                raise ValueError("the image projection has a non-zero bias, which open_clip's `proj` cannot hold.")
        elif key.split(".")[0] in ("patch_embed", "norm_pre", "norm"):
            top = next(t for t in _TOP_BACK if key == t or key.startswith(t + "."))
            out[prefix + _TOP_BACK[top] + key[len(top) :]] = value
        else:
            raise ValueError(f"{key!r}: a part open_clip's own image tower does not have; not written.")
    return out
