"""Official keys -> timm state dicts: its `VisionTransformer` (with `VisionTransformerDistilled`, the ResNetV2
hybrids and MobileCLIP's convolutional stem, AIMv2's RMSNorm / SwiGLU / patch norm, ViT-22B's parallel blocks),
its `Eva` (EVA-02, DINOv3, PE, RoPE-ViT) and its `NaFlexVit`, the inverse of `keras_vit.weights.timm.reader`'s
reader.

The architecture being written fixes how timm lays a block out (`TimmLayout`, read off the model timm builds by
`tools/make_timm_architectures.py`): q, k, v fused in one `qkv` or as three projections; a SwiGLU packed in one
`fc1` (GluMlp, gate rows first) or as `fc1_g` / `fc1_x`; a parallel block's two output projections fused in one
`out_proj`; Eva's names (`gamma_1` / `gamma_2` for LayerScale, `q_bias` / `v_bias` beside a bias-free `qkv`,
learned rotary frequencies in one `rope.freqs`).
"""

from __future__ import annotations

import re

import numpy as np

from keras_vit.weights.keys import POSEMB_KEY, Params
from keras_vit.weights.timm.block import TimmLayout, _attention_out, _norm_out, _put, _torch_linear
from keras_vit.weights.timm.block_forms import write_block
from keras_vit.weights.timm.reader import _BACKBONE, _MAP, _NORMS, _TOKENS, _UNIT_PARTS

_NORMS_OUT = _NORMS + (("patch_embed.norm", "embedding_norm"),)  # AIMv2's patch norm too
_ROTARY = "MultiHeadDotProductAttention_1/rotary_frequencies"


def _map_head_out(params: Params, sd: Params) -> None:
    ws, bs, out_w, out_b = _attention_out(params, _MAP + "MultiHeadDotProductAttention_0/")
    sd["attn_pool.latent"] = params[_MAP + "probe"]
    _put(sd, "attn_pool.q", ws[0], bs[0])
    _put(sd, "attn_pool.kv", np.concatenate(ws[1:], 0), np.concatenate(bs[1:]))
    _put(sd, "attn_pool.proj", out_w, out_b)
    _norm_out(params, sd, _MAP + "LayerNorm_0", "attn_pool.norm")
    for ours, theirs in (("Dense_0", "fc1"), ("Dense_1", "fc2")):
        _put(sd, f"attn_pool.mlp.{theirs}", *_torch_linear(params, f"{_MAP}MlpBlock_0/{ours}"))


def _stem_out(params: Params, sd: Params) -> None:
    units = sorted(
        {tuple(int(x) for x in m.groups()) for m in map(re.compile(r"^block(\d+)/unit(\d+)/").match, params) if m}
    )
    root = _BACKBONE + ("stem." if units else "")
    sd[root + "conv.weight"] = np.ascontiguousarray(params["conv_root/kernel"].transpose(3, 2, 0, 1))
    _put(sd, root + "norm", params["gn_root/scale"].reshape(-1), params["gn_root/bias"].reshape(-1))
    for stage, unit in units:
        o, t = f"block{stage}/unit{unit}/", f"{_BACKBONE}stages.{stage - 1}.blocks.{unit - 1}."
        for conv, norm, our_conv, our_norm in _UNIT_PARTS:
            if o + our_conv + "/kernel" in params:
                sd[t + conv + ".weight"] = np.ascontiguousarray(params[o + our_conv + "/kernel"].transpose(3, 2, 0, 1))
                _put(
                    sd,
                    t + norm,
                    params[o + our_norm + "/scale"].reshape(-1),
                    params[o + our_norm + "/bias"].reshape(-1),
                )


def _convolutional_stem_out(params: Params, sd: Params) -> None:
    """MobileCLIP's stem as timm's ConvStem: each conv with its BatchNorm `bn` (the training counter at 0), then
    the patch embedding as the last conv, with its bias."""
    n = len({k.split("/")[1] for k in params if k.startswith("convolutional_stem/conv_")})
    for i in range(n):
        t, o = f"{_BACKBONE}{i}.", "convolutional_stem/"
        sd[t + "conv.weight"] = np.ascontiguousarray(params[f"{o}conv_{i}/kernel"].transpose(3, 2, 0, 1))
        for ours, theirs in (("scale", "weight"), ("bias", "bias"), ("mean", "running_mean"), ("var", "running_var")):
            sd[f"{t}bn.{theirs}"] = params[f"{o}norm_{i}/{ours}"]
        sd[t + "bn.num_batches_tracked"] = np.zeros((), "int64")
    sd[f"{_BACKBONE}{n}.conv.weight"] = np.ascontiguousarray(params["embedding/kernel"].transpose(3, 2, 0, 1))
    sd[f"{_BACKBONE}{n}.conv.bias"] = params["embedding/bias"]


def official_to_timm(params: Params, num_layers: int, layout: TimmLayout = TimmLayout()) -> Params:
    """Official keys -> a timm state dict laid out as `layout` says: `VisionTransformer`
    (`VisionTransformerDistilled` with `dist`; a hybrid's stem as timm's ResNetV2 backbone) or `Eva`."""
    sd: Params = {}
    if "convolutional_stem/conv_0/kernel" in params:
        _convolutional_stem_out(params, sd)
    else:
        if "conv_root/kernel" in params:
            _stem_out(params, sd)
        sd["patch_embed.proj.weight"] = np.ascontiguousarray(params["embedding/kernel"].transpose(3, 2, 0, 1))
        if "embedding/bias" in params:
            sd["patch_embed.proj.bias"] = params["embedding/bias"]
    if POSEMB_KEY in params:
        sd["pos_embed"] = params[POSEMB_KEY]
    for theirs, ours in _TOKENS:
        if ours in params:
            sd[theirs] = params[ours]
    for theirs, ours in _NORMS_OUT:
        _norm_out(params, sd, ours, theirs)
    for i in range(num_layers):
        write_block(params, sd, i, layout)
    rotary = [
        params[f"Transformer/encoderblock_{i}/{_ROTARY}"]
        for i in range(num_layers)
        if f"Transformer/encoderblock_{i}/{_ROTARY}" in params
    ]
    if rotary:  # RoPE-Mixed's learned frequencies: (2, depth, heads, head_dim / 2)
        sd["rope.freqs"] = np.ascontiguousarray(np.stack(rotary, axis=1))
    if _MAP + "probe" in params:
        _map_head_out(params, sd)
    for theirs, ours in (("head", "head"), ("head_dist", "head_dist")):
        if ours + "/kernel" in params:
            _put(sd, theirs, *_torch_linear(params, ours))
    return sd


def naflex_out(sd: Params, params: Params, grid) -> Params:
    """A `VisionTransformer` state dict (`official_to_timm`'s) as timm's NaFlexVit holds it: the patch projection
    as a Linear over patches flattened row by row, channels fastest (D, ph * pw * C); the position table as
    (1, rows, cols, D) at its stored `grid` (or one table per axis); the tokens under `embeds.`."""
    out = {k: v for k, v in sd.items() if not k.startswith(("patch_embed.", "pos_embed", "cls_token", "reg_token"))}
    kernel = params["embedding/kernel"]
    out["embeds.proj.weight"] = np.ascontiguousarray(kernel.reshape(-1, kernel.shape[-1]).T)
    if "embedding/bias" in params:
        out["embeds.proj.bias"] = params["embedding/bias"]
    if POSEMB_KEY in params:
        out["embeds.pos_embed"] = params[POSEMB_KEY].reshape(1, grid[0], grid[1], -1)
    for axis in ("y", "x"):
        if f"{POSEMB_KEY}_{axis}" in params:
            out[f"embeds.pos_embed_{axis}"] = params[f"{POSEMB_KEY}_{axis}"]
    for theirs in ("cls_token", "reg_token"):
        if theirs in sd:
            out["embeds." + theirs] = sd[theirs]
    return out
