"""big_vision and vit_jax parameter trees -> the official keys.

A big_vision train state nests the model's parameters under `params/`, a vit_jax optimizer state under
`opt/target/`; big_vision names some parts otherwise and may stack the blocks of a scanned encoder on one axis.
"""

from __future__ import annotations


import numpy as np

from keras_vit.weights.keys import POSEMB_KEY, Params


_BIG_VISION_RENAMES = (
    ("MultiHeadDotProductAttention_0", "MultiHeadDotProductAttention_1"),
    ("LayerNorm_1", "LayerNorm_2"),
    ("MlpBlock_0", "MlpBlock_3"),
)


_PREFIXES = ("opt/target/", "params/")  # a vit_jax optimizer state; a big_vision train state


def _unstack_scan(params: Params) -> Params:
    """big_vision's `scan=True` layout: one `Transformer/encoderblock/...` tree with a leading depth axis."""
    stacked = {k: v for k, v in params.items() if k.startswith("Transformer/encoderblock/")}
    if not stacked:
        return params
    depths = {v.shape[0] for v in stacked.values()}
    if len(depths) != 1:
        raise ValueError(f"scan-stacked encoder blocks disagree on the depth axis: {sorted(depths)}.")
    out = {k: v for k, v in params.items() if k not in stacked}
    for key, value in stacked.items():
        rest = key[len("Transformer/encoderblock/") :]
        for i in range(value.shape[0]):
            out[f"Transformer/encoderblock_{i}/{rest}"] = value[i]
    return out


def jax_to_official(params: Params) -> Params:
    """The official layout from the others keras_vit reads (docs/reference.md, "Other layouts"): `opt/target/` and `params/`
    prefixes, big_vision's block names, scan-stacked blocks, and its top-level `pos_embedding`, which
    covers the patches only (the class token is added after it, i.e. with a zero position embedding)."""
    out = {}
    for key, value in params.items():
        for prefix in _PREFIXES:
            if key.startswith(prefix):
                key = key[len(prefix) :]
        out[key] = value
    out = _unstack_scan(out)
    renamed = {}
    for key, value in out.items():
        if key.startswith("Transformer/encoderblock_"):
            for old, new in _BIG_VISION_RENAMES:
                key = key.replace(f"/{old}/", f"/{new}/")
        renamed[key] = value
    if "pos_embedding" in renamed and POSEMB_KEY not in renamed:
        posemb = renamed.pop("pos_embedding")
        if "cls" in renamed:  # big_vision adds it to the patches only, always
            posemb = np.concatenate([np.zeros_like(posemb[:, :1]), posemb], axis=1)
        renamed[POSEMB_KEY] = posemb
    return renamed
