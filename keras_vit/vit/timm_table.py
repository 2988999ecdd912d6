"""timm's ViT architectures by name: the facts of each, so that `create_model("vit_base_patch16_clip_224")`
builds it and a timm repository whose `config.json` states only the architecture's name can be read.

The facts (`keras_vit/data/timm_architectures.json`) were read by `tools/make_timm_architectures.py` off the
models timm itself builds for every name its `vision_transformer`, `vision_transformer_hybrid`, `deit`, `eva` and
`naflexvit` modules register, in keras_vit's vocabulary, with timm's parameter count and, for the architectures keras_vit
does not build yet, the parts it lacks (hybrid stems, SwiGLU MLPs, parallel blocks, ...).
"""

from __future__ import annotations

import functools
import json
import os
from typing import List, Optional

from keras_vit.vit.variant import Variant

# the keys of an entry that are `VisionTransformer` keywords as they stand: the sizes, the classifier and the
# record's fields (an entry holds those its architecture's module has)
_KEYWORDS = ("patch_size", "hidden_size", "mlp_dim", "num_heads", "num_layers", "classifier", *Variant.fields())
FAMILIES = (
    "vit",
    "deit",
    "deit3",
    "dinov2",
    "dinov3",
    "eva02",
    "pe",
    "rope",
    "aimv2",
    "clip",
    "siglip",
    "gap",
    "hybrid",
    "mobileclip",
    "naflex",
    "other",
)
# listed by pretrained tag rather than by architecture: SigLIP 2's fixed-size towers are timm's SigLIP
# architectures with `v2_webli` weights
TAG_FAMILIES = {"siglip2": "v2_webli"}
# the `eva` module's families by name: DINOv3 (and LingBot, its derivative), EVA-02, Perception Encoder, and the
# RoPE-ViTs (naver's and timm's own SBB models)
_EVA_FAMILIES = (("dinov3", "dinov3"), ("lingbot", "dinov3"), ("eva02", "eva02"), ("_pe_", "pe"), ("rope", "rope"))


@functools.lru_cache(maxsize=1)
def _table() -> dict:
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "timm_architectures.json")
    with open(path) as f:
        return json.load(f)


def timm_version() -> str:
    """The timm version the facts were read from."""
    return _table()["timm"]


def base_name(name: str) -> str:
    """A timm model name without its pretrained tag ("vit_base_patch16_224.augreg2_in21k_ft_in1k" -> the
    architecture) and without timm's hub prefix."""
    name = name[len("timm/") :] if name.startswith("timm/") else name
    return name.split(".", 1)[0]


def is_timm_name(name) -> bool:
    return isinstance(name, str) and base_name(name) in _table()["architectures"]


def family(name: str) -> str:
    """The family of a timm architecture, by its facts and name: "deit" (distilled or not), "deit3", "dinov2",
    "dinov3", "eva02", "pe" (Perception Encoder), "rope" (RoPE-ViT), "aimv2", "clip", "siglip", "gap" (average pooling),
    "hybrid", "mobileclip" (its convolutional stem), "naflex" (timm's naflexvit: SigLIP 2 NaFlex, RADIO), "vit" (the
    paper's layout) or "other"."""
    name = base_name(name)
    entry = _table()["architectures"][name]
    if entry["module"] == "eva":
        return next((family for word, family in _EVA_FAMILIES if word in name), "other")
    if entry.get("convolutional_stem"):  # MobileCLIP's image tower
        return "mobileclip"
    if entry["module"] == "naflexvit":  # SigLIP 2 NaFlex, RADIO: position tables resampled per input
        return "naflex"
    for word in ("deit3", "dinov2", "aimv2", "siglip", "clip"):
        if word in name:
            return word
    if entry["module"] == "deit":
        return "deit"
    if entry["module"] == "vision_transformer_hybrid":
        return "hybrid"
    if entry.get("classifier") == "gap":
        return "gap"
    return "vit" if entry.get("classifier") == "token" and not entry["unsupported"] else "other"


def facts(name: str) -> dict:
    """The table entry of a timm architecture (any pretrained tag), or a ValueError naming the closest names."""
    entry = _table()["architectures"].get(base_name(name))
    if entry is None:
        known = sorted(_table()["architectures"])
        near = [k for k in known if k.split("_")[:2] == base_name(name).split("_")[:2]][:5]
        raise ValueError(
            f"{name!r} is not an architecture of timm {timm_version()}'s ViT modules"
            f"{f'; similar: {near}' if near else ''}."
        )
    return entry


def model_kwargs(name: str) -> dict:
    """`VisionTransformer` keywords that build timm's `name` (its default image size and head), or a ValueError
    naming the parts keras_vit does not build yet."""
    entry = facts(name)
    if entry["unsupported"]:
        raise ValueError(
            f"timm's {base_name(name)} has parts keras_vit does not build yet: {'; '.join(entry['unsupported'])}."
        )
    kw = {k: entry[k] for k in _KEYWORDS if k in entry}  # the eva module's parts: its entries only
    if "resnet_layers" in entry:  # timm's BiT-ResNet hybrids
        kw.update(
            resnet_layers=tuple(entry["resnet_layers"]),
            resnet_width=entry["resnet_width"],
            stem_numerics=entry["stem_numerics"],
        )
    if isinstance(kw["patch_size"], list):
        raise ValueError(f"timm's {base_name(name)} has non-square patches {kw['patch_size']}.")
    kw["input_shape"] = (*entry["image_size"], 3)
    kw["position_interpolation"] = "bicubic"  # timm resamples position embeddings bicubically
    if entry["classes"]:
        kw["classes"] = entry["classes"]
    else:
        kw["include_top"] = False  # timm's feature extractors (DINOv2, SigLIP towers): no head
    return kw


def list_timm_models(family_name: Optional[str] = None, *, buildable: bool = True) -> List[str]:
    """timm architecture names (those keras_vit builds unless `buildable=False`), optionally of one family."""
    if family_name is not None and family_name not in FAMILIES and family_name not in TAG_FAMILIES:
        raise ValueError(f"family={family_name!r}; expected one of {FAMILIES + tuple(TAG_FAMILIES)}.")
    names = sorted(_table()["architectures"])
    if family_name in TAG_FAMILIES:  # architectures with weights of that tag (SigLIP 2: v2_webli)
        tag = TAG_FAMILIES[family_name]
        return [
            n
            for n in names
            if (not buildable or not _table()["architectures"][n]["unsupported"])
            and any(t.startswith(tag) for t in _table()["architectures"][n].get("tags", ()))
        ]
    return [
        n
        for n in names
        if (not buildable or not _table()["architectures"][n]["unsupported"])
        and (family_name is None or family(n) == family_name)
    ]


def data_config(name: str) -> Optional[dict]:
    """The evaluation preprocessing of timm's default pretrained tag for `name` (its `pretrained_cfg`: mean,
    std, crop, interpolation; timm's PIL resizes antialias), as a `keras_vit.DataConfig` dict; None for a table
    written before these were recorded."""
    cfg = facts(name).get("data_config")
    if cfg is None:
        return None
    from keras_vit.vit.labels import label_set_for

    return dict(
        mean=tuple(cfg["mean"]),
        std=tuple(cfg["std"]),
        crop_pct=cfg["crop_pct"],
        crop_mode=cfg["crop_mode"],
        interpolation=cfg["interpolation"],
        antialias=True,
        labels=label_set_for(facts(name)["classes"] or 0),
    )


def parameter_count(name: str) -> int:
    """timm's own parameter count of `name` (its default head)."""
    return int(facts(name)["params"])
