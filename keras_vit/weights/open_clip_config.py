"""An `open_clip_config.json` for an image-text model keras_vit built itself (LiT from the recipes, two towers put
together by hand), so that `keras_vit.save_open_clip` can write it for open_clip.

open_clip builds an image tower two ways, and a ViT of keras_vit's fits only one:

- its own `VisionTransformer` (OpenAI CLIP's layout) has no patch-embedding bias, which every ViT of the paper's
  form has: not written;
- a timm trunk (`TimmModel`): `timm.create_model(timm_model_name, num_classes=..., global_pool=timm_pool)` and
  nothing more, so the tower must be a registered timm architecture exactly, at its own size, depth and input
  (`keras_vit.weights.timm.model_args.registered_architecture`, which finds the architecture timm builds as the
  tower); one needing other `model_args` is refused naming them.

The image embedding is the tower's pooled features (`timm_proj: "none"`, LiT's), or its head when the tower has one
without an activation (`timm_proj: null`, the head as the projection). The text tower is written in `text_cfg`'s
terms; the tokenizer must be CLIP's BPE (open_clip's default for a config naming no Hugging Face tokenizer), its
cleaning in `tokenizer_kwargs`. `preprocess_cfg` states the image tower's data config (mean, std, interpolation,
"shortest" with a centre crop or "squash"); open_clip has no crop fraction, so a tower cropping less than the whole
image needs the caller's `preprocess_cfg`.

Every part is checked by reading the written config back with the readers `keras_vit.load_open_clip` uses: a
config that would build anything other than the model is refused, naming what differs.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

from keras_vit.weights import open_clip_preprocess

PREPROCESS_FIELDS = ("mean", "std", "crop_pct", "crop_mode", "interpolation")


def model_config(model, preprocess_cfg: Optional[dict] = None) -> dict:
    """The open_clip config (`{"model_cfg": ..., "preprocess_cfg": ...}`) that builds `model` (an
    `ImageTextModel`); `preprocess_cfg`: the caller's, where the image tower's data config has no open_clip form.
    A ValueError names what open_clip cannot build."""
    image, tower = model.image_model, model.text_model.tower
    embed_dim = tower.output_dim or tower.width
    model_cfg = dict(embed_dim=int(embed_dim), vision_cfg=_vision_cfg(image, embed_dim))
    model_cfg["text_cfg"], quick = _text_cfg(tower, model._tokenizer)
    if quick:
        model_cfg["quick_gelu"] = True
    if model.logit_bias is not None:
        model_cfg["init_logit_bias"] = float(model._logit_bias_init)
    config = dict(
        model_cfg=model_cfg, preprocess_cfg=dict(preprocess_cfg or open_clip_preprocess.preprocess_cfg(image))
    )
    _check(model, config, preprocessing=preprocess_cfg is None)
    return config


def _vision_cfg(image, embed_dim: int) -> dict:
    from keras_vit.weights.timm.model_args import POOL_NAMES, registered_architecture

    name, args, entry = registered_architecture(image)
    extra = {k: v for k, v in args.items() if k != "num_classes"}
    for key, default in (("img_size", list(entry["image_size"])), ("depth", entry["num_layers"]), ("in_chans", 3)):
        if extra.get(key) == default:
            extra.pop(key)
    if extra:
        raise ValueError(
            f"the image tower is timm's {name!r} with model_args {extra}: open_clip builds a timm trunk from its "
            "name alone, at the architecture's own size, depth and input, so it cannot build this tower. Save the "
            "model with model.save (a .keras file) instead. Nothing was written."
        )
    if image.include_top and image.classifier_activation is not None:
        raise ValueError(
            f"the image tower's head ends in {image.classifier_activation!r}: open_clip's projection is linear."
        )
    width = args["num_classes"] or image.vit_config.hidden_size
    if width != embed_dim:
        raise ValueError(
            f"the image embedding has {width} features and the text embedding {embed_dim}: the towers do not "
            "share one space."
        )
    size = list(image.base_image_size)
    return dict(
        image_size=size[0] if size[0] == size[1] else size,
        timm_model_name=name,
        timm_model_pretrained=False,
        timm_pool=POOL_NAMES[image.classifier],
        timm_proj=None if args["num_classes"] else "none",
    )


def _text_cfg(tower, tokenizer) -> tuple:
    """(text_cfg, quick_gelu) for a `TextTower` and the model's tokenizer."""
    if not (isinstance(tokenizer, dict) and tokenizer.get("kind") == "clip"):
        raise ValueError(
            "open_clip's config names CLIP's BPE or a Hugging Face tokenizer repository; this model's tokenizer "
            f"({type(tokenizer).__name__}) is neither keras_vit can state."
        )
    t = dict(
        context_length=tower.context_length,
        vocab_size=tower.vocab_size,
        width=tower.width,
        heads=tower.num_heads,
        layers=tower.num_layers,
        mlp_ratio=tower.mlp_dim / tower.width,
    )
    if not tower.causal:
        t["no_causal_mask"] = True
    if tower.pooling != "argmax":
        t["pool_type"] = tower.pooling
    if tower.eos_id is not None:
        t["eos_id"] = tower.eos_id
    if tower.projection_bias:
        t["proj_bias"] = True
    if tower.output_dim is None:
        t["proj_type"] = "none"
    if tower.activation == "gelu_tanh":
        t["act_kwargs"] = {"approximate": "tanh"}
    if tower.layer_norm_epsilon != 1e-5:
        t["norm_kwargs"] = {"eps": tower.layer_norm_epsilon}
    if tower.layer_scale_init is not None:
        t["ls_init_value"] = tower.layer_scale_init
    clean = tokenizer.get("clean", "lower")
    if clean != "lower":
        t["tokenizer_kwargs"] = {"clean": clean}
    return t, tower.activation == "quick_gelu"


def _check(model, config: dict, preprocessing: bool) -> None:
    """The config read back as `load_open_clip` reads it builds `model`'s towers and (`preprocessing`: unless the
    caller stated it) its image preprocessing."""
    from keras_vit.weights import open_clip_text, open_clip_visual
    from keras_vit.weights.timm.model_args import architecture_differences

    source = "the open_clip config written for this model"
    cfg = config["model_cfg"]
    tower = open_clip_text.text_tower(cfg, source)
    ours = model.text_model.tower
    if tower != ours:
        wrong = [f.name for f in dataclasses.fields(ours) if getattr(tower, f.name) != getattr(ours, f.name)]
        raise ValueError(f"open_clip's text_cfg cannot state this text tower's {', '.join(wrong)}.")
    _, kw = open_clip_visual.image_tower(cfg, source)
    differences = architecture_differences(model.image_model, kw)
    if differences:
        raise ValueError(f"open_clip would build another image tower: {'; '.join(differences)}.")
    theirs = open_clip_preprocess.data_config(config["preprocess_cfg"], source)
    if not preprocessing:
        return
    mine = model.image_model.data_config
    wrong = [f for f in PREPROCESS_FIELDS if getattr(theirs, f) != getattr(mine, f)]
    if wrong:
        raise ValueError(
            "open_clip's preprocess_cfg cannot state the image tower's "
            + ", ".join(f"{f}={getattr(mine, f)!r}" for f in wrong)
            + " (it resizes the whole image, or its shorter side with a centre crop of it all): pass "
            "preprocess_cfg={...} to say how open_clip should prepare images for this model."
        )
