"""open_clip's text towers: the record from an `open_clip_config.json`'s `text_cfg`, and the state dict's text
tensors read into a `TextTransformer` (and written back).

open_clip's `TextTransformer` (`open_clip/transformer.py`) names its tensors `token_embedding.weight`,
`positional_embedding`, `transformer.resblocks.<i>.{ln_1, attn.in_proj_*, attn.out_proj, ln_2, mlp.c_fc,
mlp.c_proj, ls_1.gamma, ls_2.gamma}`, `ln_final` and `text_projection` (a (width, embed_dim) matrix, or a
Linear with `proj_bias`). `CLIP` keeps them at the top level of its state dict; `CustomTextCLIP` (SigLIP's
class) under `text.`. Facts of the config that open_clip defaults are its own defaults (`CLIPTextCfg`):
context 77, vocabulary 49408, width 512, 8 heads, 12 layers, MLP ratio 4, causal, pooled at the highest id,
PyTorch's LayerNorm epsilon 1e-5, exact GELU unless the model config says `quick_gelu`.
"""

from __future__ import annotations

import re
from typing import Dict

import keras
import numpy as np

from keras_vit.vit.text_tower import TextTower
from keras_vit.weights.keys import Params, _attention_in, _attention_out, _linear_in, _Reader

# open_clip's custom attention-block settings (both towers' configs), off by default: keras_vit builds the default
# block only
CUSTOM_BLOCK = dict(
    qk_norm=False, scaled_cosine_attn=False, scale_heads=False, scale_attn_inner=False, scale_attn=False, scale_fc=False
)
# open_clip text-config keys with the value open_clip's defaults give them: another value is a form keras_vit
# does not build, refused naming the key
_UNBUILT = dict(embed_cls=False, output_tokens=False, **CUSTOM_BLOCK)  # embed_cls: CoCa's appended class token
_KNOWN = {
    "context_length",
    "vocab_size",
    "hf_tokenizer_name",
    "tokenizer_mode",
    "tokenizer_kwargs",
    "width",
    "heads",
    "layers",
    "mlp_ratio",
    "ls_init_value",
    "pad_id",
    "eos_id",
    "no_causal_mask",
    "final_ln_after_pool",
    "pool_type",
    "proj_bias",
    "proj_type",
    "act_kwargs",
    "norm_kwargs",
    "block_type",
    "hf_model_name",
    "hf_model_pretrained",
    "hf_proj_type",
    "hf_pooler_type",
    *_UNBUILT,
}


def text_tower(model_cfg: dict, source: str = "open_clip_config.json") -> TextTower:
    """The `TextTower` an open_clip model config (`model_cfg`: `embed_dim`, `quick_gelu`, `text_cfg`)
    describes; a form keras_vit does not build (a Hugging Face text model, CoCa, custom attention) is refused
    naming the key."""
    t = dict(model_cfg.get("text_cfg") or {})
    if t.get("hf_model_name"):
        raise ValueError(
            f"{source}: the text tower is the Hugging Face model {t['hf_model_name']!r} (text_cfg.hf_model_name), "
            "not a CLIP-style text transformer; keras_vit does not build it."
        )
    unknown = sorted(set(t) - _KNOWN)
    if unknown:
        raise ValueError(f"{source}: text_cfg.{unknown[0]} is not an open_clip setting keras_vit knows.")
    for key, plain in _UNBUILT.items():
        if t.get(key, plain) != plain:
            raise ValueError(f"{source}: text_cfg.{key}={t[key]!r}: keras_vit's text tower does not build it.")
    if t.get("block_type") not in (None, "default"):
        raise ValueError(f"{source}: text_cfg.block_type={t['block_type']!r}: keras_vit builds the default block.")
    if t.get("final_ln_after_pool"):
        raise ValueError(f"{source}: text_cfg.final_ln_after_pool=True: keras_vit normalises before pooling.")
    act = dict(t.get("act_kwargs") or {})
    approximate = act.pop("approximate", "none")
    norm = dict(t.get("norm_kwargs") or {})
    eps = norm.pop("eps", 1e-5)
    if act or norm or approximate not in ("none", "tanh"):
        raise ValueError(
            f"{source}: text_cfg act_kwargs / norm_kwargs {t.get('act_kwargs')} / {t.get('norm_kwargs')}: keras_vit "
            "takes GELU's approximate='tanh' and LayerNorm's eps only."
        )
    quick = bool(model_cfg.get("quick_gelu", False))
    if quick and approximate == "tanh":
        raise ValueError(f"{source}: quick_gelu=True with act_kwargs approximate='tanh' contradict each other.")
    width = int(t.get("width", 512))
    proj_type = t.get("proj_type", "linear")
    if proj_type not in ("linear", "none"):
        raise ValueError(f"{source}: text_cfg.proj_type={proj_type!r}: keras_vit builds 'linear' and 'none'.")
    embed_dim = model_cfg.get("embed_dim")
    pool = t.get("pool_type", "argmax")
    if pool == "none":
        raise ValueError(f"{source}: text_cfg.pool_type='none' (token features, no text embedding) is not built.")
    return TextTower(
        vocab_size=int(t.get("vocab_size", 49408)),
        context_length=int(t.get("context_length", 77)),
        width=width,
        num_heads=int(t.get("heads", 8)),
        num_layers=int(t.get("layers", 12)),
        mlp_dim=int(width * float(t.get("mlp_ratio", 4.0))),
        output_dim=int(embed_dim) if proj_type == "linear" and embed_dim else None,
        causal=not t.get("no_causal_mask", False),
        pooling=pool,
        eos_id=int(t.get("eos_id", 2)) if pool == "eos" else None,
        projection_bias=bool(t.get("proj_bias", False)),
        activation="quick_gelu" if quick else ("gelu_tanh" if approximate == "tanh" else "gelu"),
        layer_norm_epsilon=float(eps),
        layer_scale_init=None if t.get("ls_init_value") is None else float(t["ls_init_value"]),
    )


def text_prefix(keys) -> str:
    """Where a whole open_clip model's text tensors sit: "" (`CLIP`) or "text." (`CustomTextCLIP`)."""
    keys = set(keys)
    if "text.token_embedding.weight" in keys:
        return "text."
    if "token_embedding.weight" in keys:
        return ""
    raise ValueError(
        "no text tower in these tensors (neither 'token_embedding.weight' nor 'text.token_embedding.weight')."
    )


def read_text(g: _Reader, tower: TextTower, prefix: str) -> Params:
    """The text tower's tensors under `prefix`, by our variable paths (`TextTransformer.weights`' `path`s)."""
    p: Params = {
        "embedding/token_embedding": g(prefix + "token_embedding.weight"),
        "embedding/position_embedding": g(prefix + "positional_embedding"),
    }
    blocks = sorted(
        {
            int(m.group(1))
            for m in map(re.compile(re.escape(prefix) + r"transformer\.resblocks\.(\d+)\.").match, g.sd)
            if m
        }
    )
    if blocks != list(range(tower.num_layers)):
        raise ValueError(
            f"{g.source}: the text tower's tensors hold {len(blocks)} block(s), its config {tower.num_layers}: "
            "the config names another model than these weights. Nothing was loaded."
        )
    for i in blocks:
        t, o = f"{prefix}transformer.resblocks.{i}.", f"encoder/encoderblock_{i}/"
        for theirs, ours in (("ln_1", "LayerNorm_0"), ("ln_2", "LayerNorm_2")):
            p[f"{o}{ours}/gamma"], p[f"{o}{ours}/beta"] = g(t + theirs + ".weight"), g(t + theirs + ".bias")
        q, k, v = np.split(g(t + "attn.in_proj_weight"), 3, axis=0)
        bq, bk, bv = np.split(g(t + "attn.in_proj_bias"), 3)
        biases = (bq, bk, bv, g(t + "attn.out_proj.bias"))
        attention = _attention_in(q, k, v, g(t + "attn.out_proj.weight"), biases, tower.num_heads, "")
        p.update({f"{o}MultiHeadDotProductAttention_1/{k_}": a for k_, a in attention.items()})
        for theirs, ours in (("c_fc", "Dense_0"), ("c_proj", "Dense_1")):
            p[f"{o}MlpBlock_3/{ours}/kernel"] = _linear_in(g(f"{t}mlp.{theirs}.weight"))
            p[f"{o}MlpBlock_3/{ours}/bias"] = g(f"{t}mlp.{theirs}.bias")
        if tower.layer_scale_init is not None:
            p[f"{o}LayerScale_0/scale"], p[f"{o}LayerScale_2/scale"] = g(t + "ls_1.gamma"), g(t + "ls_2.gamma")
    p["encoder/encoder_norm/gamma"], p["encoder/encoder_norm/beta"] = (
        g(prefix + "ln_final.weight"),
        g(prefix + "ln_final.bias"),
    )
    if tower.output_dim:
        if tower.projection_bias:
            p["projection/kernel"] = _linear_in(g(prefix + "text_projection.weight"))
            p["projection/bias"] = g(prefix + "text_projection.bias")
        else:
            p["projection/kernel"] = g(prefix + "text_projection")
    if prefix + "attn_mask" in g.sd:  # a causal-mask buffer some exports keep: fixed by the form, not a weight
        g(prefix + "attn_mask")
    return p


def _by_path(model) -> dict:
    """{variable path within the model: variable} (a nested model's paths start with its own name)."""
    return {v.path.split("/", 1)[1] if v.path.startswith(model.name + "/") else v.path: v for v in model.weights}


def assign(model, params: Dict[str, np.ndarray], source: str) -> None:
    """Every weight of `model` from `params` (by path, shapes checked first); a weight without a tensor, or a
    tensor without a weight, is refused before anything is assigned."""
    weights = _by_path(model)
    missing = sorted(set(weights) - set(params))
    extra = sorted(set(params) - set(weights))
    if missing or extra:
        raise ValueError(
            f"{source}: the text tower's tensors and the model disagree (no tensor for {missing[:3]}, no weight for "
            f"{extra[:3]}). Nothing was loaded."
        )
    for path, variable in weights.items():
        if tuple(variable.shape) != tuple(params[path].shape):
            raise ValueError(
                f"{source}: {path} is {tuple(params[path].shape)} in the file, {tuple(variable.shape)} in the model "
                "its config describes. Nothing was loaded."
            )
    for path, variable in weights.items():
        variable.assign(params[path])


def write_text(model, prefix: str) -> Dict[str, np.ndarray]:
    """A `TextTransformer`'s weights as open_clip's `TextTransformer` names them, under `prefix` ("" for `CLIP`,
    "text." for `CustomTextCLIP`): `read_text` reversed."""
    tower = model.tower
    w = {path: keras.ops.convert_to_numpy(v) for path, v in _by_path(model).items()}
    sd = {
        prefix + "token_embedding.weight": w["embedding/token_embedding"],
        prefix + "positional_embedding": w["embedding/position_embedding"],
        prefix + "ln_final.weight": w["encoder/encoder_norm/gamma"],
        prefix + "ln_final.bias": w["encoder/encoder_norm/beta"],
    }
    for i in range(tower.num_layers):
        t, o = f"{prefix}transformer.resblocks.{i}.", f"encoder/encoderblock_{i}/"
        a = o + "MultiHeadDotProductAttention_1/"
        for theirs, ours in (("ln_1", "LayerNorm_0"), ("ln_2", "LayerNorm_2")):
            sd[t + theirs + ".weight"], sd[t + theirs + ".bias"] = w[f"{o}{ours}/gamma"], w[f"{o}{ours}/beta"]
        ws, bs, out_w, out_b = _attention_out(w, a)  # the writers' official -> torch attention
        sd[t + "attn.in_proj_weight"], sd[t + "attn.in_proj_bias"] = np.concatenate(ws), np.concatenate(bs)
        sd[t + "attn.out_proj.weight"], sd[t + "attn.out_proj.bias"] = out_w, out_b
        for theirs, ours in (("c_fc", "Dense_0"), ("c_proj", "Dense_1")):
            sd[f"{t}mlp.{theirs}.weight"] = w[f"{o}MlpBlock_3/{ours}/kernel"].T
            sd[f"{t}mlp.{theirs}.bias"] = w[f"{o}MlpBlock_3/{ours}/bias"]
        if tower.layer_scale_init is not None:
            sd[t + "ls_1.gamma"], sd[t + "ls_2.gamma"] = w[o + "LayerScale_0/scale"], w[o + "LayerScale_2/scale"]
    if tower.output_dim:
        if tower.projection_bias:
            sd[prefix + "text_projection.weight"] = w["projection/kernel"].T
            sd[prefix + "text_projection.bias"] = w["projection/bias"]
        else:
            sd[prefix + "text_projection"] = w["projection/kernel"]
    return {k: np.ascontiguousarray(v, dtype="float32") for k, v in sd.items()}
