"""timm's `ParallelScalingBlock` (ViT-22B's parallel layers, keras_vit's `parallel_layers`) and
`DiffParallelScalingBlock` (with differential attention): one `in_norm`; one `in_proj` whose rows are the MLP's
first layer, then q, k and v (the MLP's bias apart, `mlp_bias`, when q, k, v have none); the attention's and the
MLP's output projections apart or fused in one `out_proj`; one LayerScale `ls` on their sum. Ours: LayerNorm_0 and
LayerScale_0, with no LayerNorm_2 or LayerScale_2.
"""

from __future__ import annotations

import numpy as np

from keras_vit.weights.keys import Params, _attention_in, _linear_in, _Reader
from keras_vit.weights.timm.block import (
    TimmLayout,
    _attention_out,
    _differential_in,
    _differential_out,
    _linear,
    _norm_in,
    _norm_out,
    _put,
    _torch_linear,
)


def in_timm(sd: Params, t: str) -> bool:
    """Whether timm's block under `t` (`blocks.<i>.`) is a ParallelScalingBlock."""
    return t + "in_proj.weight" in sd


def in_official(params: Params, o: str) -> bool:
    """Whether our block under `o` (`Transformer/encoderblock_<i>/`) is written as a ParallelScalingBlock."""
    return o + "LayerNorm_2/scale" not in params and o + "MlpBlock_3/Dense_1/kernel" in params


def read(g: _Reader, i: int, num_heads: int) -> Params:
    """timm's ParallelScalingBlock (ViT-22B's parallel layers) in official keys: one `in_norm`; one `in_proj` whose
    rows are the MLP's first layer, then q, k and v; the MLP's bias apart (`mlp_bias`) when q, k, v have none;
    `q_norm` / `k_norm` on the block; the attention's and the MLP's output projections; one LayerScale `ls` on
    their sum (ours: LayerScale_0, with no LayerNorm_2 or LayerScale_2)."""
    p: Params = {}
    t, o = f"blocks.{i}.", f"Transformer/encoderblock_{i}/"
    a, m = o + "MultiHeadDotProductAttention_1/", o + "MlpBlock_3/"
    d = g.sd[t + "in_norm.weight"].shape[0]
    weight = g(t + "in_proj.weight")
    hidden = weight.shape[0] - 3 * d
    cuts = [hidden, hidden + d, hidden + 2 * d]
    fc1, q, k, v = np.split(weight, cuts, axis=0)
    if t + "in_proj.bias" in g.sd:
        fc1_bias, *qkv_biases = np.split(g(t + "in_proj.bias"), cuts)
    else:
        fc1_bias, qkv_biases = g(t + "mlp_bias"), [None, None, None]
    fused = t + "out_proj.weight" in g.sd  # one output projection over [attention, MLP]: split by columns
    out = g(t + "out_proj.weight") if fused else g(t + "attn_out_proj.weight")
    out_bias = (
        g(t + "out_proj.bias")
        if fused and t + "out_proj.bias" in g.sd
        else (g(t + "attn_out_proj.bias") if t + "attn_out_proj.bias" in g.sd else None)
    )
    p.update(_attention_in(q, k, v, out[:, :d], (*qkv_biases, out_bias), num_heads, a))
    if t + "lambda_q1" in g.sd:  # DiffParallelScalingBlock: differential attention in parallel layers
        _differential_in(g, p, t, a, num_heads)
    if all(f"{t}{n}_norm.weight" in g.sd for n in "qk"):
        for ours, theirs in (("query_norm", "q_norm"), ("key_norm", "k_norm")):
            _norm_in(g, p, t + theirs, a + ours)
    _norm_in(g, p, t + "in_norm", o + "LayerNorm_0")
    p[m + "Dense_0/kernel"], p[m + "Dense_0/bias"] = _linear_in(fc1), fc1_bias
    if fused:  # W [a; m] + b: the bias goes with the attention's part, the MLP's gets zeros
        p[m + "Dense_1/kernel"] = _linear_in(np.ascontiguousarray(out[:, d:]))
        if out_bias is not None:
            p[m + "Dense_1/bias"] = np.zeros_like(out_bias)
    else:
        _linear(g, p, t + "mlp_out_proj", m + "Dense_1", optional_bias=out_bias is None)
    if t + "ls.gamma" in g.sd:
        p[o + "LayerScale_0/scale"] = g(t + "ls.gamma")
    return p


def write(params: Params, sd: Params, i: int, layout: TimmLayout) -> None:
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
