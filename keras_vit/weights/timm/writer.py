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

import dataclasses
import re

import numpy as np

from keras_vit.weights.keys import POSEMB_KEY, Params
from keras_vit.weights.timm.reader import _BACKBONE, _MAP, _NORMS, _TOKENS, _UNIT_PARTS, THINGS_NAMES

_NORMS_OUT = _NORMS + (("patch_embed.norm", "embedding_norm"),)  # AIMv2's patch norm too
_ROTARY = "MultiHeadDotProductAttention_1/rotary_frequencies"


@dataclasses.dataclass(frozen=True)
class TimmLayout:
    """How the timm architecture being written lays out a block's tensors (its table entry's `timm_layout`)."""

    eva: bool = False  # timm's Eva module: gamma_1 / gamma_2, q_bias / v_bias
    qkv_fused: bool = True
    mlp_packed: bool = False
    out_fused: bool = False

    @classmethod
    def of(cls, entry: dict) -> "TimmLayout":
        facts = entry.get("timm_layout") or {}
        return cls(eva=entry.get("module") == "eva", **facts)


def _torch_linear(params: Params, ours: str) -> tuple:
    kernel = params[ours + "/kernel"]
    return np.ascontiguousarray(kernel.reshape(-1, kernel.shape[-1]).T), params.get(ours + "/bias")


def _put(sd: Params, theirs: str, weight, bias=None) -> None:
    sd[theirs + ".weight"] = weight
    if bias is not None:
        sd[theirs + ".bias"] = bias


def _norm_out(params: Params, sd: Params, ours: str, theirs: str) -> None:
    """A LayerNorm's scale and bias, or an RMSNorm's scale alone."""
    if ours + "/scale" in params:
        _put(sd, theirs, params[ours + "/scale"].reshape(-1), params.get(ours + "/bias"))


def _attention_out(params: Params, a: str) -> tuple:
    """(weights (D_out, D_in), biases) of query, key, value and out; a bias is None when absent."""
    d = params[a + "query/kernel"].shape[0]
    ws = [np.ascontiguousarray(params[f"{a}{n}/kernel"].reshape(d, -1).T) for n in ("query", "key", "value")]
    bs = [params[f"{a}{n}/bias"].reshape(-1) if f"{a}{n}/bias" in params else None for n in ("query", "key", "value")]
    out = params[a + "out/kernel"]
    return ws, bs, np.ascontiguousarray(out.reshape(-1, out.shape[-1]).T), params.get(a + "out/bias")


def _qkv_out(sd: Params, t: str, ws: list, bs: list, layout: TimmLayout) -> None:
    """q, k, v under `t` (`blocks.<i>.attn.`): fused in `qkv` (its bias, or Eva's `q_bias` / `v_bias` when the key
    has none) or as `q_proj` / `k_proj` / `v_proj`."""
    if not layout.qkv_fused:
        for name, w, b in zip("qkv", ws, bs):
            _put(sd, f"{t}{name}_proj", w, b)
        return
    sd[t + "qkv.weight"] = np.concatenate(ws, 0)
    if bs[0] is None:
        return
    if bs[1] is not None:
        sd[t + "qkv.bias"] = np.concatenate(bs)
    elif layout.eva:
        sd[t + "q_bias"], sd[t + "v_bias"] = bs[0], bs[2]
    else:
        raise ValueError(
            "timm's VisionTransformer attention has a key bias wherever q and v have one; this model "
            "has none (key_bias=False: timm's Eva). Nothing was written."
        )


def _differential_out(params: Params, sd: Params, t: str, a: str) -> None:
    for name in ("lambda_q1", "lambda_k1", "lambda_q2", "lambda_k2"):
        sd[t + name] = params[a + name]
    sd[t + "sub_norm.weight"] = params[a + "sub_norm/scale"]


def _mlp_out(params: Params, sd: Params, t: str, m: str, layout: TimmLayout) -> None:
    """The MLP under `t` (`blocks.<i>.mlp.`): `fc1` / `fc2`, a SwiGLU's `fc1_g` / `fc1_x` or packed `fc1`, `norm`."""
    if m + "gate/kernel" in params and layout.mlp_packed:
        kernel = np.concatenate([params[m + "gate/kernel"], params[m + "Dense_0/kernel"]], axis=-1)
        biases = [params.get(m + n + "/bias") for n in ("gate", "Dense_0")]
        _put(sd, t + "fc1", np.ascontiguousarray(kernel.T), None if biases[0] is None else np.concatenate(biases))
    elif m + "gate/kernel" in params:
        _put(sd, t + "fc1_g", *_torch_linear(params, m + "gate"))
        _put(sd, t + "fc1_x", *_torch_linear(params, m + "Dense_0"))
    else:
        _put(sd, t + "fc1", *_torch_linear(params, m + "Dense_0"))
    _norm_out(params, sd, m + "norm", t + "norm")
    _put(sd, t + "fc2", *_torch_linear(params, m + "Dense_1"))


def _things_block_out(params: Params, sd: Params, i: int, layout: TimmLayout) -> None:
    """timm's ParallelThingsBlock: each `branch_<j>/` written as a plain block, then renamed to `attns.<j>.*` /
    `ffns.<j>.*` (the reader's `THINGS_NAMES`)."""
    t, o = f"blocks.{i}.", f"Transformer/encoderblock_{i}/"
    j = 0
    while f"{o}branch_{j}/LayerNorm_0/scale" in params:
        branch = f"{o}branch_{j}/"
        plain: Params = {}
        _block_out({o + k[len(branch) :]: v for k, v in params.items() if k.startswith(branch)}, plain, i, layout)
        for key, value in plain.items():
            theirs = next(
                (t + b.format(j=j) + key[len(t + a) :] for b, a in THINGS_NAMES if key.startswith(t + a)), None
            )
            if theirs is None:
                raise ValueError(
                    f"parallel branch {j} of block {i} has {key!r}, which timm's ParallelThingsBlock lacks."
                )
            sd[theirs] = value
        j += 1


def _block_out(params: Params, sd: Params, i: int, layout: TimmLayout) -> None:
    t, o = f"blocks.{i}.", f"Transformer/encoderblock_{i}/"
    if f"{o}branch_0/LayerNorm_0/scale" in params:  # parallel branches
        return _things_block_out(params, sd, i, layout)
    a = o + "MultiHeadDotProductAttention_1/"
    if o + "LayerNorm_2/scale" not in params and o + "MlpBlock_3/Dense_1/kernel" in params:
        return _parallel_block_out(params, sd, i, layout)
    ws, bs, out_w, out_b = _attention_out(params, a)
    _qkv_out(sd, t + "attn.", ws, bs, layout)
    _put(sd, t + "attn.proj", out_w, out_b)
    for ours, theirs in (("query_norm", "q_norm"), ("key_norm", "k_norm"), ("norm", "norm")):
        _norm_out(params, sd, a + ours, f"{t}attn.{theirs}")
    for ours, theirs in (("LayerNorm_0", "norm1"), ("LayerNorm_2", "norm2")):
        _norm_out(params, sd, o + ours, t + theirs)
    _mlp_out(params, sd, t + "mlp.", o + "MlpBlock_3/", layout)
    names = ("gamma_1", "gamma_2") if layout.eva else ("ls1.gamma", "ls2.gamma")
    for ours, theirs in zip(("LayerScale_0", "LayerScale_2"), names):
        if f"{o}{ours}/scale" in params:
            sd[t + theirs] = params[f"{o}{ours}/scale"]
    if a + "lambda_q1" in params:  # differential attention (timm's DiffAttention)
        _differential_out(params, sd, t + "attn.", a)


def _parallel_block_out(params: Params, sd: Params, i: int, layout: TimmLayout) -> None:
    """timm's ParallelScalingBlock (`DiffParallelScalingBlock` with differential attention): one `in_norm`; one
    `in_proj` of the MLP's first layer, then q, k, v (the MLP's bias apart, `mlp_bias`, when q, k, v have none);
    the output projections apart or fused in one `out_proj`, whose one bias is the sum of ours; `ls`."""
    t, o = f"blocks.{i}.", f"Transformer/encoderblock_{i}/"
    a, m = o + "MultiHeadDotProductAttention_1/", o + "MlpBlock_3/"
    ws, bs, out_w, out_b = _attention_out(params, a)
    fc1, fc1_bias = _torch_linear(params, m + "Dense_0")
    sd[t + "in_proj.weight"] = np.concatenate([fc1, *ws], 0)
    if bs[0] is not None:
        sd[t + "in_proj.bias"] = np.concatenate([fc1_bias, *bs])
    elif fc1_bias is not None:
        sd[t + "mlp_bias"] = fc1_bias
    fc2, fc2_bias = _torch_linear(params, m + "Dense_1")
    if layout.out_fused:  # [W_a W_m] [a; m] + (b_a + b_m)
        biases = [b for b in (out_b, fc2_bias) if b is not None]
        _put(sd, t + "out_proj", np.concatenate([out_w, fc2], 1), sum(biases) if biases else None)
    else:
        _put(sd, t + "attn_out_proj", out_w, out_b)
        _put(sd, t + "mlp_out_proj", fc2, fc2_bias)
    for ours, theirs in (("query_norm", "q_norm"), ("key_norm", "k_norm")):
        _norm_out(params, sd, a + ours, t + theirs)
    _norm_out(params, sd, o + "LayerNorm_0", t + "in_norm")
    if o + "LayerScale_0/scale" in params:
        sd[t + "ls.gamma"] = params[o + "LayerScale_0/scale"]
    if a + "lambda_q1" in params:
        _differential_out(params, sd, t, a)


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
        _block_out(params, sd, i, layout)
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
