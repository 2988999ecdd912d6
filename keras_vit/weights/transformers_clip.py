"""`transformers`' two-tower repositories, CLIP's (`CLIPModel`: `config.json` with `model_type` "clip") and SigLIP's
(`SiglipModel`, "siglip": SigLIP, and SigLIP 2's fixed-size checkpoints, which transformers publishes as SiglipModel
with a Gemma vocabulary), with `model.safetensors`, the tokenizer's `tokenizer.json` and `tokenizer_config.json`
and the image processor's `preprocessor_config.json`, read into an `ImageTextModel` as `transformers` runs them.

The two towers are OpenAI CLIP's, which open_clip's layout also holds, so the repository is restated in that layout
(its config as an open_clip `model_cfg`, its tensors under open_clip's names) and read by the open_clip reader:
`vision_model.embeddings.{class_embedding, patch_embedding, position_embedding}` -> `visual.{class_embedding,
conv1, positional_embedding}`, `vision_model.pre_layrnorm` -> `visual.ln_pre`, `*.encoder.layers.<i>.{layer_norm1,
self_attn.{q,k,v}_proj, self_attn.out_proj, layer_norm2, mlp.fc1, mlp.fc2}` -> `*.transformer.resblocks.<i>.{ln_1,
attn.in_proj (q, k, v stacked), attn.out_proj, ln_2, mlp.c_fc, mlp.c_proj}`, `vision_model.post_layernorm` ->
`visual.ln_post`, `text_model.embeddings.{token_embedding, position_embedding}` -> `{token_embedding,
positional_embedding}`, `text_model.final_layer_norm` -> `ln_final`, and the projections `visual_projection`,
`text_projection` (Linear weights, (embed, width)) -> `visual.proj`, `text_projection` ((width, embed)).

SigLIP's image tower is timm's `vit_*_siglip_*` form (no class token, LayerNorm epsilon 1e-6, a multi-head
attention pool) with the tanh GELU transformers runs (timm builds those architectures with the exact one), which open_clip holds as a timm trunk: `vision_model.embeddings.patch_embedding` ->
`visual.trunk.patch_embed.proj`, `position_embedding` -> `pos_embed`, the blocks as timm names them,
`post_layernorm` -> `norm`, `head.{probe, attention (q | k, v), layernorm, mlp}` -> `attn_pool.{latent, q | kv,
proj, norm, mlp}`; its text tower is bidirectional, pooled at the last token, with a projection `text_model.head`
(a Linear with a bias) -> `text.text_projection`. A SigLIP repository with `spiece.model` and no `tokenizer.json` (the
first SigLIP's) is tokenized as its `SiglipTokenizer` does (`keras_vit.SentencePieceTokenizer`).

What the config does not state takes `transformers`' own defaults (`CLIPConfig`, `CLIPTextConfig`,
`CLIPVisionConfig` of transformers 5). The text is pooled as `transformers` pools it: at the first end-of-text
token (`text_config.eos_token_id`), or, for a config that says `eos_token_id: 2` (written before transformers#24773),
at the highest id. The tokenizer is the repository's `tokenizer.json` (else its `spiece.model`) with nothing added (transformers applies only
the file's normaliser), padded with its pad token to the context length. Images are prepared as its
`CLIPImageProcessor` states (mean, std, resampling, shortest-edge resize and centre crop, or a resize to a fixed
size); without the file, that processor's defaults.
"""

from __future__ import annotations

import json
import math
import os
import re
from typing import Dict, Tuple

import numpy as np

CONFIG, WEIGHTS, PROCESSOR = "config.json", "model.safetensors", "preprocessor_config.json"
PICKLE = "pytorch_model.bin"

# transformers 5's defaults for what a CLIP config may leave out
_TEXT_DEFAULTS = dict(
    vocab_size=49408,
    hidden_size=512,
    intermediate_size=2048,
    num_hidden_layers=12,
    num_attention_heads=8,
    max_position_embeddings=77,
    hidden_act="quick_gelu",
    layer_norm_eps=1e-5,
    eos_token_id=49407,
)
_VISION_DEFAULTS = dict(
    hidden_size=768,
    intermediate_size=3072,
    num_hidden_layers=12,
    num_attention_heads=12,
    image_size=224,
    patch_size=32,
    num_channels=3,
    hidden_act="quick_gelu",
    layer_norm_eps=1e-5,
)
# transformers 5's SiglipTextConfig / SiglipVisionConfig defaults, where they differ from CLIP's
_SIGLIP_TEXT_DEFAULTS = dict(
    _TEXT_DEFAULTS,
    vocab_size=32000,
    hidden_size=768,
    intermediate_size=3072,
    num_attention_heads=12,
    max_position_embeddings=64,
    hidden_act="gelu_pytorch_tanh",
    layer_norm_eps=1e-6,
    projection_size=None,
)
del _SIGLIP_TEXT_DEFAULTS["eos_token_id"]  # SigLIP pools at the last position, whatever the token
_SIGLIP_VISION_DEFAULTS = dict(
    _VISION_DEFAULTS, patch_size=16, hidden_act="gelu_pytorch_tanh", layer_norm_eps=1e-6, vision_use_head=True
)
_SIGLIP2_VISION_DEFAULTS = dict(_SIGLIP_VISION_DEFAULTS, num_patches=256)
del _SIGLIP2_VISION_DEFAULTS["image_size"]  # NaFlex: a budget of patches, no image size
KINDS = {"clip": "CLIPModel", "siglip": "SiglipModel", "siglip2": "Siglip2Model"}
_ACTIVATIONS = {"quick_gelu": "quick", "gelu": "exact", "gelu_new": "tanh", "gelu_pytorch_tanh": "tanh"}
_RESAMPLE = {0: "nearest", 2: "bilinear", 3: "bicubic"}  # PIL's codes, which the processor config holds


def read_config(directory: str) -> dict:
    path = os.path.join(directory, CONFIG)
    try:
        with open(path) as f:
            config = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise ValueError(f"{path!r} is not a readable transformers config: {e}") from None
    if not isinstance(config, dict):
        raise ValueError(f"{path!r} is not a transformers config (a JSON object).")
    return config


def is_transformers_clip_dir(path) -> bool:
    """A folder holding a `transformers` config of `model_type` "clip" or "siglip"."""
    if not (os.path.isdir(path) and os.path.exists(os.path.join(path, CONFIG))):
        return False
    try:
        return read_config(path).get("model_type") in KINDS
    except ValueError:
        return False


def _sub(config: dict, key: str, defaults: dict, source: str) -> dict:
    given = config.get(key) or {}
    if not isinstance(given, dict):
        raise ValueError(f"{source}: {key} is not an object.")
    return {**defaults, **{k: v for k, v in given.items() if k in defaults}}


def _activation(text: dict, vision: dict, source: str) -> Tuple[bool, dict]:
    """(open_clip's `quick_gelu`, the text tower's `act_kwargs`) for the towers' activations."""
    kinds = {}
    for tower, cfg in (("text_config", text), ("vision_config", vision)):
        act = cfg["hidden_act"]
        if act not in _ACTIVATIONS:
            raise ValueError(f"{source}: {tower}.hidden_act={act!r}: keras_vit builds {sorted(_ACTIVATIONS)}.")
        kinds[tower] = _ACTIVATIONS[act]
    if kinds["vision_config"] == "tanh":
        raise ValueError(
            f"{source}: vision_config.hidden_act={vision['hidden_act']!r}: CLIP's image tower is built "
            "with quick or exact GELU."
        )
    if (kinds["text_config"] == "quick") != (kinds["vision_config"] == "quick"):
        raise ValueError(
            f"{source}: text_config.hidden_act={text['hidden_act']!r} and vision_config.hidden_act="
            f"{vision['hidden_act']!r}: one tower with quick GELU and one without is not built."
        )
    return kinds["vision_config"] == "quick", ({"approximate": "tanh"} if kinds["text_config"] == "tanh" else {})


def open_clip_config(config: dict, directory: str) -> Tuple[dict, dict]:
    """(an open_clip config equal to the repository's: `model_cfg` and `preprocess_cfg`, the text tower's pooling
    as `TextTower` fields)."""
    source = os.path.join(directory, CONFIG)
    kind = config.get("model_type")
    if kind not in KINDS:
        raise ValueError(f"{source}: model_type={kind!r}, not one of {sorted(KINDS)}.")
    architectures = config.get("architectures") or [KINDS[kind]]
    if architectures != [KINDS[kind]]:
        raise ValueError(f"{source}: architectures={architectures}: keras_vit reads {KINDS[kind]}'s two towers.")
    if kind in ("siglip", "siglip2"):
        return _siglip_config(config, directory, source, naflex=kind == "siglip2")
    text = _sub(config, "text_config", _TEXT_DEFAULTS, source)
    vision = _sub(config, "vision_config", _VISION_DEFAULTS, source)
    if int(vision["num_channels"]) != 3:
        raise ValueError(f"{source}: vision_config.num_channels={vision['num_channels']}: CLIP towers take RGB.")
    quick, act_kwargs = _activation(text, vision, source)
    width, heads = int(vision["hidden_size"]), int(vision["num_attention_heads"])
    if width % heads:
        raise ValueError(f"{source}: vision_config.hidden_size {width} is not a multiple of its {heads} heads.")
    text_cfg = dict(
        context_length=int(text["max_position_embeddings"]),
        vocab_size=int(text["vocab_size"]),
        width=int(text["hidden_size"]),
        heads=int(text["num_attention_heads"]),
        layers=int(text["num_hidden_layers"]),
        mlp_ratio=int(text["intermediate_size"]) / int(text["hidden_size"]),
        norm_kwargs={"eps": float(text["layer_norm_eps"])},
    )
    if act_kwargs:
        text_cfg["act_kwargs"] = act_kwargs
    model_cfg = dict(
        embed_dim=int(config.get("projection_dim", 512)),
        quick_gelu=quick,
        vision_cfg=dict(
            image_size=int(vision["image_size"]),
            patch_size=int(vision["patch_size"]),
            width=width,
            layers=int(vision["num_hidden_layers"]),
            head_width=width // heads,
            mlp_ratio=int(vision["intermediate_size"]) / width,
            norm_kwargs={"eps": float(vision["layer_norm_eps"])},
        ),
        text_cfg=text_cfg,
    )
    eos = text["eos_token_id"]
    if isinstance(eos, list):
        raise ValueError(f"{source}: text_config.eos_token_id={eos}: one end-of-text token is pooled, not several.")
    pooling = dict(pooling="argmax") if int(eos) == 2 else dict(pooling="eos", eos_id=int(eos))
    return {"model_cfg": model_cfg, "preprocess_cfg": preprocess_cfg(directory)}, pooling


def _check_steps(p: dict, path: str) -> None:
    """An image processor's settings keras_vit follows: every step on, pixels scaled by 1/255, a known resampling."""
    for key in ("do_resize", "do_rescale", "do_normalize", "do_convert_rgb"):
        if p.get(key, True) is not True:
            raise ValueError(f"{path}: {key}={p[key]!r}: keras_vit prepares images with each step on.")
    if abs(float(p.get("rescale_factor", 1 / 255)) - 1 / 255) > 1e-9:
        raise ValueError(f"{path}: rescale_factor={p['rescale_factor']}: pixels are scaled by 1/255.")
    if p["resample"] not in _RESAMPLE:
        raise ValueError(f"{path}: resample={p['resample']!r}: keras_vit resizes with {sorted(_RESAMPLE.values())}.")


def naflex_preprocess_cfg(directory: str, patch_size: int) -> dict:
    """open_clip's `preprocess_cfg` for a `Siglip2ImageProcessor` (its defaults: bilinear, mean and std 0.5, 256
    patches) and its patch budget `max_num_patches`: what `keras_vit.naflex_batch` takes to make its batches."""
    path = os.path.join(directory, PROCESSOR)
    p = dict(image_mean=(0.5, 0.5, 0.5), image_std=(0.5, 0.5, 0.5), resample=2, patch_size=16, max_num_patches=256)
    if os.path.exists(path):
        with open(path) as f:
            p.update(json.load(f))
    _check_steps(p, path)
    if int(p["patch_size"]) != patch_size:
        raise ValueError(f"{path}: patch_size={p['patch_size']}, and the image tower's patches are {patch_size}.")
    return dict(
        mean=tuple(p["image_mean"]),
        std=tuple(p["image_std"]),
        interpolation=_RESAMPLE[p["resample"]],
        resize_mode="squash",
        max_num_patches=int(p["max_num_patches"]),
    )


def preprocess_cfg(directory: str, siglip: bool = False) -> dict:
    """open_clip's `preprocess_cfg` for the repository's image processor settings (`CLIPImageProcessor`'s, or
    `SiglipImageProcessor`'s: a bilinear resize to a fixed size, mean and std 0.5, its defaults)."""
    from keras_vit.weights.open_clip_preprocess import OPENAI_MEAN, OPENAI_STD

    path = os.path.join(directory, PROCESSOR)
    defaults = dict(
        image_mean=(0.5, 0.5, 0.5) if siglip else OPENAI_MEAN,
        image_std=(0.5, 0.5, 0.5) if siglip else OPENAI_STD,
        resample=2 if siglip else 3,
        size={"height": 224, "width": 224} if siglip else {"shortest_edge": 224},
        do_center_crop=not siglip,
    )
    p = dict(defaults)
    if os.path.exists(path):
        with open(path) as f:
            p.update(json.load(f))
    _check_steps(p, path)
    resample = p["resample"]
    size, crop = p["size"], p.get("crop_size", {"height": 224, "width": 224})
    if "shortest_edge" in size:
        if not p["do_center_crop"] or crop.get("height") != crop.get("width"):
            raise ValueError(f"{path}: a shortest-edge resize without a square centre crop is not built.")
        if int(size["shortest_edge"]) != int(crop["height"]):
            raise ValueError(
                f"{path}: resize to {size['shortest_edge']} then crop {crop['height']}: keras_vit crops the whole "
                "shorter side (crop_pct 1)."
            )
        mode = "shortest"
    elif set(size) == {"height", "width"} and not p["do_center_crop"]:
        mode = "squash"
    else:
        raise ValueError(
            f"{path}: size={size}, do_center_crop={p.get('do_center_crop')}: not a resize keras_vit builds."
        )
    return dict(
        mean=tuple(p["image_mean"]),
        std=tuple(p["image_std"]),
        interpolation=_RESAMPLE[resample],
        resize_mode=mode,
    )


def _siglip_config(config: dict, directory: str, source: str, naflex: bool = False) -> Tuple[dict, dict]:
    text = _sub(config, "text_config", _SIGLIP_TEXT_DEFAULTS, source)
    vision = _sub(config, "vision_config", _SIGLIP2_VISION_DEFAULTS if naflex else _SIGLIP_VISION_DEFAULTS, source)
    for tower, cfg in (("text_config", text), ("vision_config", vision)):
        if cfg["hidden_act"] != "gelu_pytorch_tanh" or float(cfg["layer_norm_eps"]) != 1e-6:
            raise ValueError(
                f"{source}: {tower}.hidden_act={cfg['hidden_act']!r}, layer_norm_eps={cfg['layer_norm_eps']}: "
                "keras_vit builds SigLIP's towers with the tanh GELU and LayerNorm epsilon 1e-6."
            )
    if not vision["vision_use_head"] or int(vision["num_channels"]) != 3:
        raise ValueError(f"{source}: vision_config without its attention-pool head, or not RGB: not built.")
    width = int(vision["hidden_size"])
    projected = int(text["projection_size"] or text["hidden_size"])
    if projected != width:
        raise ValueError(
            f"{source}: the text projection gives {projected} features and the image tower {width}: the two "
            "embeddings must share a width."
        )
    text_cfg = dict(
        context_length=int(text["max_position_embeddings"]),
        vocab_size=int(text["vocab_size"]),
        width=int(text["hidden_size"]),
        heads=int(text["num_attention_heads"]),
        layers=int(text["num_hidden_layers"]),
        mlp_ratio=int(text["intermediate_size"]) / int(text["hidden_size"]),
        no_causal_mask=True,
        proj_bias=True,
        pool_type="last",
        act_kwargs={"approximate": "tanh"},
        norm_kwargs={"eps": 1e-6},
    )
    patch = int(vision["patch_size"])
    args = dict(
        embed_dim=width,
        depth=int(vision["num_hidden_layers"]),
        num_heads=int(vision["num_attention_heads"]),
        patch_size=patch,
        mlp_ratio=int(vision["intermediate_size"]) / width,
        act_layer="gelu_tanh",  # transformers' gelu_pytorch_tanh; timm's siglip architectures take exact GELU
    )
    if naflex:  # a square position grid, resized to each image's patch grid (timm's naflexvit SigLIP form)
        grid = math.isqrt(int(vision["num_patches"]))
        if grid * grid != int(vision["num_patches"]):
            raise ValueError(f"{source}: vision_config.num_patches={vision['num_patches']} is not a square grid.")
        size, name = grid * patch, "naflexvit_base_patch16_siglip"
        args.update(pos_embed_grid_size=(grid, grid))
        processing = naflex_preprocess_cfg(directory, patch)
    else:
        size, name = int(vision["image_size"]), "vit_base_patch16_siglip_224"
        processing = preprocess_cfg(directory, siglip=True)
    model_cfg = dict(
        embed_dim=width,
        custom_text=True,
        vision_cfg=dict(
            image_size=size,
            timm_model_name=name,  # the form; the sizes below replace the base's
            timm_model_pretrained=False,
            timm_pool="map",
            timm_proj="none",
            timm_model_args=dict(args, img_size=size),
        ),
        text_cfg=text_cfg,
    )
    return {"model_cfg": model_cfg, "preprocess_cfg": processing}, {}


_LAYER = re.compile(r"^(text_model|vision_model)\.encoder\.layers\.(\d+)\.(.+)$")
_ATTENTION = re.compile(r"^self_attn\.([qkv])_proj\.(weight|bias)$")
# a block's parts under open_clip's names (its own towers) and timm's (SigLIP's image trunk)
_BLOCK = {
    "layer_norm1": "ln_1",
    "layer_norm2": "ln_2",
    "self_attn.out_proj": "attn.out_proj",
    "mlp.fc1": "mlp.c_fc",
    "mlp.fc2": "mlp.c_proj",
}
_TIMM_BLOCK = {
    "layer_norm1": "norm1",
    "layer_norm2": "norm2",
    "self_attn.out_proj": "attn.proj",
    "mlp.fc1": "mlp.fc1",
    "mlp.fc2": "mlp.fc2",
}


def _to(name: str, change=None):
    """A tensor read into open_clip's `name` (changed by `change` first)."""
    return lambda value: {name: value if change is None else change(np.asarray(value))}


def _scalar(name: str):
    def read(value):
        value = np.asarray(value)
        if value.size != 1:
            raise ValueError(f"{name} has {value.size} values, not one.")
        return {name: value.reshape(())}  # () in CLIPModel, (1,) in SiglipModel

    return read


def _q_kv(prefix: str, leaf: str):
    """nn.MultiheadAttention's packed q | k | v into timm's attention pool's q and kv."""

    def read(value):
        width = np.asarray(value).shape[0] // 3
        return {f"{prefix}q.{leaf}": value[:width], f"{prefix}kv.{leaf}": value[width:]}

    return read


def _positions(key: str):
    def check(value):  # a buffer of 0..n-1 older versions saved; nothing to load
        if not np.array_equal(np.asarray(value).reshape(-1), np.arange(np.asarray(value).size)):
            raise ValueError(f"{key} is not 0..n-1, the positions transformers reads.")
        return {}

    return check


def _pairs(prefix: str, names: Tuple[str, ...], target: str) -> dict:
    return {f"{prefix}.{leaf}": _to(f"{target}.{leaf}") for leaf in names}


_COMMON = {
    key: _positions(key) for key in ("text_model.embeddings.position_ids", "vision_model.embeddings.position_ids")
}
_WB = ("weight", "bias")
# per model type: {transformers name: reader into open_clip's names}, and per tower the blocks' (prefix, part names,
# fused q | k | v name)
_LAYOUTS = {
    "clip": (
        {
            **_COMMON,
            "logit_scale": _scalar("logit_scale"),
            "text_model.embeddings.token_embedding.weight": _to("token_embedding.weight"),
            "text_model.embeddings.position_embedding.weight": _to("positional_embedding"),
            **_pairs("text_model.final_layer_norm", _WB, "ln_final"),
            "text_projection.weight": _to("text_projection", np.transpose),
            "vision_model.embeddings.class_embedding": _to("visual.class_embedding"),
            "vision_model.embeddings.patch_embedding.weight": _to("visual.conv1.weight"),
            "vision_model.embeddings.position_embedding.weight": _to("visual.positional_embedding"),
            **_pairs("vision_model.pre_layrnorm", _WB, "visual.ln_pre"),
            **_pairs("vision_model.post_layernorm", _WB, "visual.ln_post"),
            "visual_projection.weight": _to("visual.proj", np.transpose),
        },
        {
            "text_model": ("transformer.resblocks.{}.", _BLOCK, "attn.in_proj_{}"),
            "vision_model": ("visual.transformer.resblocks.{}.", _BLOCK, "attn.in_proj_{}"),
        },
    ),
    "siglip": (
        {
            **_COMMON,
            "logit_scale": _scalar("logit_scale"),
            "logit_bias": _scalar("logit_bias"),
            "text_model.embeddings.token_embedding.weight": _to("text.token_embedding.weight"),
            "text_model.embeddings.position_embedding.weight": _to("text.positional_embedding"),
            **_pairs("text_model.final_layer_norm", _WB, "text.ln_final"),
            **_pairs("text_model.head", _WB, "text.text_projection"),
            **_pairs("vision_model.embeddings.patch_embedding", _WB, "visual.trunk.patch_embed.proj"),
            "vision_model.embeddings.position_embedding.weight": _to("visual.trunk.pos_embed", lambda v: v[None]),
            **_pairs("vision_model.post_layernorm", _WB, "visual.trunk.norm"),
            "vision_model.head.probe": _to("visual.trunk.attn_pool.latent"),
            **{f"vision_model.head.attention.in_proj_{leaf}": _q_kv("visual.trunk.attn_pool.", leaf) for leaf in _WB},
            **_pairs("vision_model.head.attention.out_proj", _WB, "visual.trunk.attn_pool.proj"),
            **_pairs("vision_model.head.layernorm", _WB, "visual.trunk.attn_pool.norm"),
            **_pairs("vision_model.head.mlp.fc1", _WB, "visual.trunk.attn_pool.mlp.fc1"),
            **_pairs("vision_model.head.mlp.fc2", _WB, "visual.trunk.attn_pool.mlp.fc2"),
        },
        {
            "text_model": ("text.transformer.resblocks.{}.", _BLOCK, "attn.in_proj_{}"),
            "vision_model": ("visual.trunk.blocks.{}.", _TIMM_BLOCK, "attn.qkv.{}"),
        },
    ),
}


_SIGLIP2_EMBEDDING = {  # NaFlex's patch projection (a Linear over flattened patches) and its square position grid
    **_pairs("vision_model.embeddings.patch_embedding", _WB, "visual.trunk.embeds.proj"),
    "vision_model.embeddings.position_embedding.weight": _to(
        "visual.trunk.embeds.pos_embed", lambda v: v.reshape(1, math.isqrt(v.shape[0]), math.isqrt(v.shape[0]), -1)
    ),
}
_LAYOUTS["siglip2"] = (
    {
        **{
            k: v
            for k, v in _LAYOUTS["siglip"][0].items()
            if not k.startswith(
                ("vision_model.embeddings.patch_embedding", "vision_model.embeddings.position_embedding")
            )
        },
        **_SIGLIP2_EMBEDDING,
    },
    _LAYOUTS["siglip"][1],
)


def open_clip_state(sd: Dict[str, np.ndarray], source: str, kind: str = "clip") -> Dict[str, np.ndarray]:
    """The tensors of a repository of model type `kind` ("clip", "siglip") under open_clip's names; a tensor of no
    known place is refused naming it."""
    fixed, towers = _LAYOUTS[kind]
    out: Dict[str, np.ndarray] = {}
    qkv: Dict[Tuple[str, str], Dict[str, np.ndarray]] = {}
    for key, value in sd.items():
        if key in fixed:
            try:
                out.update(fixed[key](value))
            except ValueError as e:
                raise ValueError(f"{source}: {e}") from None
            continue
        m = _LAYER.match(key)
        if not m:
            raise ValueError(f"{source}: tensor {key!r} has no place in keras_vit's {KINDS[kind]} towers.")
        tower, index, rest = m.groups()
        prefix, names, fused = towers[tower]
        prefix = prefix.format(index)
        attention = _ATTENTION.match(rest)
        if attention:
            qkv.setdefault((prefix + fused.format(attention.group(2)), prefix), {})[attention.group(1)] = value
            continue
        part, _, leaf = rest.rpartition(".")
        if part not in names:
            raise ValueError(f"{source}: tensor {key!r} has no place in keras_vit's {KINDS[kind]} towers.")
        out[prefix + names[part] + "." + leaf] = value
    for (name, prefix), parts in qkv.items():
        if set(parts) != {"q", "k", "v"}:
            raise ValueError(f"{source}: {prefix} attention lacks {sorted({'q', 'k', 'v'} - set(parts))}.")
        out[name] = np.concatenate([parts["q"], parts["k"], parts["v"]], axis=0)
    return out


def load_transformers_clip(directory: str) -> "keras.Model":  # noqa: F821
    """An `ImageTextModel` with both towers of a `transformers` CLIPModel or SiglipModel folder; every tensor mapped
    or the load refused naming it."""
    from keras_vit.vit.tokenizer_files import FILES, tokenizer_in
    from keras_vit.weights import open_clip
    from keras_vit.weights.safetensors_read import mapped_tensors

    hf_config = read_config(directory)
    config, pooling = open_clip_config(hf_config, directory)
    source = os.path.join(directory, CONFIG)
    path = os.path.join(directory, WEIGHTS)
    if not os.path.exists(path):
        hint = (
            f" It has {PICKLE}, a pickle keras_vit never loads."
            if os.path.exists(os.path.join(directory, PICKLE))
            else ""
        )
        raise FileNotFoundError(f"{directory!r} has no {WEIGHTS}.{hint}")
    with mapped_tensors(path) as (tensors, _):
        sd = {k: np.array(v, dtype="float32") for k, v in tensors.items()}
    state = open_clip_state(sd, source, hf_config["model_type"])
    context = config["model_cfg"]["text_cfg"]["context_length"]
    tokenizer = tokenizer_in(directory, context, clean="none")  # transformers applies the file's normaliser only
    why = f"{directory!r} holds neither {' nor '.join(FILES)}"
    # not CLIP's BPE when the repository has no tokenizer.json: its vocabulary may be another; and its config is a
    # restatement, which save_open_clip does not claim to write back
    model = open_clip.from_state(
        config, state, directory, source, path, tokenizer=tokenizer, no_tokenizer=why, open_clip_files=False, **pooling
    )
    processing = config["preprocess_cfg"]
    # NaFlex: how the repository's processor makes batches, as naflex_batch's keywords (saved with the model)
    if "max_num_patches" in processing:
        model.naflex = dict(
            patch_size=int(config["model_cfg"]["vision_cfg"]["timm_model_args"]["patch_size"]),
            max_patches=processing["max_num_patches"],
            mean=processing["mean"],
            std=processing["std"],
            interpolation=processing["interpolation"],
        )
    return model
