"""Hugging Face `transformers` ViT directories (`config.json` + `model.safetensors`): read, and the state dict written.

`transformers` keeps `query` / `key` / `value` as separate Linears and uses exact GELU unless `hidden_act` says
otherwise; its `preprocessor_config.json` states the evaluation preprocessing. Read with the `safetensors`
package's numpy API (no torch at run time), so `ViTForImageClassification.from_pretrained(dir)` and keras_vit read
the same files.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from typing import Dict, Tuple

import numpy as np

from keras_vit.vit.data_config import TRANSFORMERS_VIT, DataConfig
from keras_vit.weights.keys import (
    POSEMB_KEY,
    Params,
    _attention_in,
    _blocks,
    _common_out,
    _conv_in,
    _linear_in,
    _Reader,
    per_block,
)
from keras_vit.weights.safetensors_read import read_converted


_HF_BLOCK = re.compile(r"^encoder\.layer\.(\d+)\.")


def _hf_block_in(g: "_Reader", i: int, num_heads: int) -> Params:
    """`transformers` block `i`'s tensors in official keys."""
    t, o = f"encoder.layer.{i}.", f"Transformer/encoderblock_{i}/"
    a = t + "attention.attention."
    qkv = [g(a + n + ".bias") if a + n + ".bias" in g.sd else None for n in ("query", "key", "value")]
    biases = (*qkv, g(t + "attention.output.dense.bias"))  # qkv_bias=False: none; a part alone is refused below
    p = _attention_in(
        g(a + "query.weight"),
        g(a + "key.weight"),
        g(a + "value.weight"),
        g(t + "attention.output.dense.weight"),
        biases,
        num_heads,
        o + "MultiHeadDotProductAttention_1/",
    )
    for ours, theirs in (("LayerNorm_0", "layernorm_before"), ("LayerNorm_2", "layernorm_after")):
        p[f"{o}{ours}/scale"], p[f"{o}{ours}/bias"] = g(f"{t}{theirs}.weight"), g(f"{t}{theirs}.bias")
    p[f"{o}MlpBlock_3/Dense_0/kernel"] = _linear_in(g(t + "intermediate.dense.weight"))
    p[f"{o}MlpBlock_3/Dense_0/bias"] = g(t + "intermediate.dense.bias")
    p[f"{o}MlpBlock_3/Dense_1/kernel"] = _linear_in(g(t + "output.dense.weight"))
    p[f"{o}MlpBlock_3/Dense_1/bias"] = g(t + "output.dense.bias")
    return p


def transformers_to_official(sd: Params, num_heads: int, source: str = "state dict") -> Params:
    """A `transformers` `ViTModel` / `ViTForImageClassification` state dict in official keys (the
    pooler, a Dense+tanh on the class token, is the official representation layer)."""
    sd = {k[len("vit.") :] if k.startswith("vit.") else k: v for k, v in sd.items()}
    g = _Reader(sd, source)
    e = "embeddings."
    p: Params = {
        "embedding/kernel": _conv_in(g(e + "patch_embeddings.projection.weight")),
        "embedding/bias": g(e + "patch_embeddings.projection.bias"),
        "cls": g(e + "cls_token"),
        POSEMB_KEY: g(e + "position_embeddings"),
        "Transformer/encoder_norm/scale": g("layernorm.weight"),
        "Transformer/encoder_norm/bias": g("layernorm.bias"),
    }
    p.update(per_block(_blocks(sd, _HF_BLOCK), lambda i: _hf_block_in(g, i, num_heads)))
    if "pooler.dense.weight" in sd:
        p["pre_logits/kernel"], p["pre_logits/bias"] = _linear_in(g("pooler.dense.weight")), g("pooler.dense.bias")
    if "classifier.weight" in sd:
        p["head/kernel"], p["head/bias"] = _linear_in(g("classifier.weight")), g("classifier.bias")
    g.check_all_used()
    return p


def official_to_transformers(params: Params, num_layers: int) -> Params:
    """Official keys -> a `transformers` `ViTForImageClassification` state dict."""

    def attention(i, ws, bs, out_w, out_b):
        a = f"vit.encoder.layer.{i}.attention."
        sd = {f"{a}attention.{n}.weight": w for n, w in zip(("query", "key", "value"), ws)}
        sd.update({f"{a}attention.{n}.bias": b for n, b in zip(("query", "key", "value"), bs)})
        sd.update({a + "output.dense.weight": out_w, a + "output.dense.bias": out_b})
        return sd

    sd = _common_out(
        params,
        num_layers,
        dict(
            attention=attention,
            block=lambda i: f"vit.encoder.layer.{i}.",
            ln0="layernorm_before",
            ln2="layernorm_after",
            fc1="intermediate.dense",
            fc2="output.dense",
        ),
    )
    e = "vit.embeddings."
    sd[e + "patch_embeddings.projection.weight"] = np.ascontiguousarray(
        params["embedding/kernel"].transpose(3, 2, 0, 1)
    )
    sd[e + "patch_embeddings.projection.bias"] = params["embedding/bias"]
    sd[e + "cls_token"] = params["cls"]
    sd[e + "position_embeddings"] = params[POSEMB_KEY]
    sd["vit.layernorm.weight"] = params["Transformer/encoder_norm/scale"]
    sd["vit.layernorm.bias"] = params["Transformer/encoder_norm/bias"]
    sd["classifier.weight"], sd["classifier.bias"] = np.ascontiguousarray(params["head/kernel"].T), params["head/bias"]
    return sd


HF_WEIGHTS = "model.safetensors"


HF_CONFIG = "config.json"


def is_transformers_dir(path: str) -> bool:
    return os.path.isdir(path) and os.path.exists(os.path.join(path, HF_CONFIG))


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
        two_towers = (
            f": both towers of an image-text model, which keras_vit.load_image_text({directory!r}) reads"
            if config.get("model_type") == "clip"
            else ""
        )
        raise ValueError(
            f"{directory!r} holds a {config.get('model_type')!r} model, not a transformers 'vit'{two_towers}."
        )
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
    params = read_converted(weights, lambda sd: transformers_to_official(sd, heads, weights))
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
    defaults (bilinear, mean = std = 0.5). The class names are `config.json`'s `id2label`, unless they are
    `transformers`' placeholders ("LABEL_0", ...)."""
    labels = _id2label(directory)
    path = os.path.join(directory, HF_PREPROCESSOR)
    if not os.path.exists(path):
        return dataclasses.replace(TRANSFORMERS_VIT, labels=labels)
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
        labels=labels,
    )


def _id2label(directory: str):
    """`id2label` of `config.json` in index order, None where it is missing, has gaps or holds only the
    placeholders `transformers` writes for a config made without names."""
    found = _hf_config(directory).get("id2label")
    if not isinstance(found, dict) or not found:
        return None
    try:
        ordered = sorted((int(k), v) for k, v in found.items())
    except (TypeError, ValueError):
        return None
    names = [v for _, v in ordered]
    if [k for k, _ in ordered] != list(range(len(names))) or not all(isinstance(n, str) and n.strip() for n in names):
        return None
    return None if names == [f"LABEL_{i}" for i in range(len(names))] else tuple(names)
