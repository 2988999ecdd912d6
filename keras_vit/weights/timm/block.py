"""timm's plain `Block` (and `Eva`'s block, which names the same parts otherwise), read into the official keys and
written back: the attention (fused `qkv`, Eva's `q_bias` / `v_bias` or separate projections, qk-norm, EVA-CLIP's
output norm, differential attention), the MLP (`fc1` / `fc2`, a SwiGLU's `fc1_g` / `fc1_x` or packed `fc1`,
EVA-02's norm), the two norms and LayerScale. The other block classes each have a module of their own that reads
and writes through these (`keras_vit.weights.timm.block_forms`).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from keras_vit.weights.keys import Params, _attention_in, _linear_in, _Reader


def _norm_in(g: _Reader, p: Params, theirs: str, ours: str) -> None:
    """A LayerNorm's weight and bias, or an RMSNorm's weight alone."""
    p[ours + "/scale"] = g(theirs + ".weight")
    if theirs + ".bias" in g.sd:
        p[ours + "/bias"] = g(theirs + ".bias")


def _linear(g: _Reader, p: Params, theirs: str, ours: str, optional_bias: bool = False) -> None:
    """A Linear; its bias is required unless `optional_bias` (a part keras_vit builds with or without one)."""
    p[ours + "/kernel"] = _linear_in(g(theirs + ".weight"))
    if not optional_bias or theirs + ".bias" in g.sd:
        p[ours + "/bias"] = g(theirs + ".bias")


def _qkv_in(g: _Reader, t: str) -> tuple:
    """(q, k, v weights, q, k, v biases) of block prefix `t`: timm's fused `qkv` (with its bias or EVA's
    `q_bias` / `v_bias`) or EVA's separate projections; EVA has no key bias (timm keeps a zero buffer)."""
    fused = t + "attn.qkv.weight" in g.sd
    if fused:
        q, k, v = np.split(g(t + "attn.qkv.weight"), 3, axis=0)
        if t + "attn.qkv.bias" in g.sd:
            return (q, k, v), tuple(np.split(g(t + "attn.qkv.bias"), 3))
        names = (t + "attn.q_bias", None, t + "attn.v_bias")
    else:
        q, k, v = (g(f"{t}attn.{n}_proj.weight") for n in "qkv")
        names = tuple(f"{t}attn.{n}_proj.bias" for n in "qkv")
    present = [n is not None and n in g.sd for n in names]
    if present[0] != present[2]:
        raise ValueError(
            f"{g.source}: {t}attn has a query bias {present[0]} but a value bias {present[2]}; "
            "keras_vit's attention has both or neither. Nothing was loaded."
        )
    if not present[0]:
        if present[1]:
            raise ValueError(f"{g.source}: {t}attn has a key bias without query and value biases. Nothing was loaded.")
        return (q, k, v), (None, None, None)
    return (q, k, v), (g(names[0]), g(names[1]) if present[1] else None, g(names[2]))  # EVA: no key bias


def _mlp_in(g: _Reader, p: Params, t: str, o: str) -> None:
    """The MLP: timm's `fc1` / `fc2`, the SwiGLU's `fc1_g` / `fc1_x` (or `fc1` packed, gate rows first), and
    EVA-02's `mlp.norm`."""
    m = o + "MlpBlock_3/"
    free = t + "attn.proj.bias" not in g.sd  # AIMv2 (proj_bias=False): no projection has a bias; else all do
    if t + "mlp.fc1_g.weight" in g.sd:
        _linear(g, p, t + "mlp.fc1_g", m + "gate", optional_bias=free)
        _linear(g, p, t + "mlp.fc1_x", m + "Dense_0", optional_bias=free)
    elif g(t + "mlp.fc1.weight").shape[0] == 2 * g(t + "mlp.fc2.weight").shape[1]:
        _linear(g, p, t + "mlp.fc1", m + "Dense_packed", optional_bias=free)  # a gated MLP, packed
    else:
        _linear(g, p, t + "mlp.fc1", m + "Dense_0", optional_bias=free)
    _linear(g, p, t + "mlp.fc2", m + "Dense_1", optional_bias=free)
    if t + "mlp.norm.weight" in g.sd:
        _norm_in(g, p, t + "mlp.norm", m + "norm")


def _differential_in(g: _Reader, p: Params, t: str, a: str, num_heads: int) -> None:
    """timm's DiffAttention (its tensors under `t`: `blocks.<i>.attn.`, or the block itself in a
    DiffParallelScalingBlock): queries and keys twice as many heads of half the width (consecutive pairs per
    head; the same rows, another view), four lambda vectors and the heads' RMSNorm `sub_norm`."""
    for name in ("query", "key"):
        kernel = p[f"{a}{name}/kernel"]
        p[f"{a}{name}/kernel"] = kernel.reshape(kernel.shape[0], 2 * num_heads, -1)
        if f"{a}{name}/bias" in p:
            p[f"{a}{name}/bias"] = p[f"{a}{name}/bias"].reshape(2 * num_heads, -1)
    for name in ("lambda_q1", "lambda_k1", "lambda_q2", "lambda_k2"):
        p[a + name] = g(t + name)
    _norm_in(g, p, t + "sub_norm", a + "sub_norm")


def read_block(g: _Reader, i: int, num_heads: int) -> Params:
    """timm's `Block` (or Eva's) `i` in official keys."""
    p: Params = {}
    t, o = f"blocks.{i}.", f"Transformer/encoderblock_{i}/"
    a = o + "MultiHeadDotProductAttention_1/"
    (q, k, v), biases = _qkv_in(g, t)
    out_bias = g(t + "attn.proj.bias") if t + "attn.proj.bias" in g.sd else None  # AIMv2: none
    p.update(_attention_in(q, k, v, g(t + "attn.proj.weight"), (*biases, out_bias), num_heads, a))
    if t + "attn.lambda_q1" in g.sd:  # differential attention (timm's DiffAttention)
        _differential_in(g, p, t + "attn.", a, num_heads)
    if t + "attn.norm.weight" in g.sd:  # EVA-CLIP: a norm on the attention's output
        _norm_in(g, p, t + "attn.norm", a + "norm")
    norms = [f"{t}attn.{n}_norm.weight" for n in "qk"]  # (RMSNorm's have no bias)
    if all(k in g.sd for k in norms):  # qk-norm; a part of it alone is left for the reader to refuse by name
        for ours, theirs in (("query_norm", "q_norm"), ("key_norm", "k_norm")):
            _norm_in(g, p, f"{t}attn.{theirs}", a + ours)
    _norm_in(g, p, t + "norm1", o + "LayerNorm_0")
    _norm_in(g, p, t + "norm2", o + "LayerNorm_2")
    _mlp_in(g, p, t, o)
    for ours, theirs, eva in (("LayerScale_0", "ls1.gamma", "gamma_1"), ("LayerScale_2", "ls2.gamma", "gamma_2")):
        for key in (t + theirs, t + eva):  # DeiT-III, DINOv2; EVA's names
            if key in g.sd:
                p[f"{o}{ours}/scale"] = g(key)
    return p


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


def write_block(params: Params, sd: Params, i: int, layout: TimmLayout) -> None:
    """Block `i` (official keys) as timm's `Block` (or Eva's, as `layout` says)."""
    t, o = f"blocks.{i}.", f"Transformer/encoderblock_{i}/"
    a = o + "MultiHeadDotProductAttention_1/"
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
