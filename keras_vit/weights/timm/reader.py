"""timm's `VisionTransformer` / `VisionTransformerDistilled` / `Eva` / `NaFlexVit` state dicts -> the official keys.

Facts (docs/reference.md, "Other layouts"): PyTorch Linear weights are (out, in), convolutions (O, I, kh, kw);
timm fuses q, k, v into one `qkv` Linear (and k, v into `kv` in the MAP head, `attn_pool`); the class,
distillation and register tokens are `cls_token`, `dist_token`, `reg_token`; LayerScale is `ls1` / `ls2.gamma`;
qk-norm `attn.q_norm` / `k_norm`; the LayerNorm after the embeddings `norm_pre`, after pooling `fc_norm`. Parts
keras_vit has but the official layout lacks get keys in its style (`keras_vit.weights.official.weight_map`).

timm's `Eva` (EVA-02, DINOv3, Perception Encoder, RoPE-ViT) names the same parts otherwise, read here too:
query and value biases beside a bias-free `qkv` (`attn.q_bias` / `v_bias`; its key bias is a zero buffer) or
separate `attn.q_proj` / `k_proj` / `v_proj`; LayerScale `gamma_1` / `gamma_2`; EVA-CLIP's norm on the attention
output `attn.norm`; the SwiGLU MLP as `mlp.fc1_g` / `fc1_x` or packed in one `mlp.fc1` (gate rows first, twice
`fc2`'s input width), kept as `MlpBlock_3/Dense_packed` until the model it goes into says its activation;
EVA-02's norm inside the MLP `mlp.norm`; no `pos_embed` where rotary embeddings stand alone. timm's learned
rotary frequencies (`rope.freqs`, RoPE-Mixed: (2, depth, heads, head_dim / 2)) go to each block's attention.
timm's ParallelScalingBlock (ViT-22B's parallel layers) packs the MLP's first layer with q, k, v in `in_proj`.
timm's DiffAttention (differential attention) adds `attn.lambda_q1` ... `lambda_k2` and `attn.sub_norm`.
timm's NaFlexVit (SigLIP 2 NaFlex, RADIO) keeps its patch projection, tokens and position table under `embeds.`.
MobileCLIP's convolutional stem is timm's ConvStem under `patch_embed.backbone.`, its last convolution the patch
embedding. The writer, official keys -> timm, is `keras_vit.weights.timm.writer`.
"""

from __future__ import annotations

import re

import numpy as np

from keras_vit.weights.keys import POSEMB_KEY, Params, _attention_in, _blocks, _conv_in, _linear_in, _Reader, per_block

_BLOCK = re.compile(r"^blocks\.(\d+)\.")
_TOP = {
    "cls_token",
    "reg_token",
    "dist_token",
    "pos_embed",
    "patch_embed",
    "norm_pre",
    "blocks",
    "norm",
    "fc_norm",
    "attn_pool",
    "head",
    "head_dist",
    "rope",
    "embeds",
}
_TOKENS = (("cls_token", "cls"), ("dist_token", "dist"), ("reg_token", "reg"))
_NORMS = (("norm_pre", "pre_norm"), ("norm", "Transformer/encoder_norm"), ("fc_norm", "fc_norm"))
_MAP = "MAPHead_0/"


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


def _parallel_block_in(g: _Reader, i: int, num_heads: int) -> Params:
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


# timm's ParallelThingsBlock: branch j's parts (`attns.<j>.*`, `ffns.<j>.*`) and a plain block's names for them
THINGS_NAMES = (
    ("attns.{j}.norm.", "norm1."),
    ("attns.{j}.attn.", "attn."),
    ("attns.{j}.ls.", "ls1."),
    ("ffns.{j}.norm.", "norm2."),
    ("ffns.{j}.mlp.", "mlp."),
    ("ffns.{j}.ls.", "ls2."),
)


class _Renamed:
    """A block's tensors under other names (`names`: ours -> theirs), read through the state dict's reader `g`
    so that what is taken is still counted."""

    def __init__(self, g: _Reader, names: dict):
        self.g, self.names, self.source = g, names, g.source
        self.sd = {ours: g.sd[theirs] for ours, theirs in names.items()}

    def __call__(self, key: str):
        return self.g(self.names[key]) if key in self.names else self.g(key)


def _things_block_in(g: _Reader, i: int, num_heads: int) -> Params:
    """timm's ParallelThingsBlock: each branch j read as a plain block (`THINGS_NAMES`), under `branch_<j>/`."""
    t, o = f"blocks.{i}.", f"Transformer/encoderblock_{i}/"
    branches = sorted({int(k[len(t) + len("attns.") :].split(".")[0]) for k in g.sd if k.startswith(t + "attns.")})
    p: Params = {}
    for j in branches:
        names = {}
        for theirs, ours in THINGS_NAMES:
            theirs = t + theirs.format(j=j)
            names.update({t + ours + k[len(theirs) :]: k for k in g.sd if k.startswith(theirs)})
        p.update({f"{o}branch_{j}/{k[len(o) :]}": v for k, v in _block_in(_Renamed(g, names), i, num_heads).items()})
    return p


def _block_in(g: _Reader, i: int, num_heads: int) -> Params:
    """Block `i`'s tensors in official keys."""
    if f"blocks.{i}.in_proj.weight" in g.sd:
        return _parallel_block_in(g, i, num_heads)
    if f"blocks.{i}.attns.0.norm.weight" in g.sd:
        return _things_block_in(g, i, num_heads)
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


def _map_head_in(g: _Reader, p: Params, num_heads: int, source: str) -> None:
    """timm's `AttentionPoolLatent` (one latent query) as big_vision's MAPHead."""
    latent = g("attn_pool.latent")
    if latent.shape[1] != 1:
        raise ValueError(f"{source}: attn_pool.latent holds {latent.shape[1]} queries; keras_vit's MAP head has one.")
    p[_MAP + "probe"] = latent
    k, v = np.split(g("attn_pool.kv.weight"), 2, axis=0)
    bk, bv = np.split(g("attn_pool.kv.bias"), 2)
    p.update(
        _attention_in(
            g("attn_pool.q.weight"),
            k,
            v,
            g("attn_pool.proj.weight"),
            (g("attn_pool.q.bias"), bk, bv, g("attn_pool.proj.bias")),
            num_heads,
            _MAP + "MultiHeadDotProductAttention_0/",
        )
    )
    _norm_in(g, p, "attn_pool.norm", _MAP + "LayerNorm_0")
    _linear(g, p, "attn_pool.mlp.fc1", _MAP + "MlpBlock_0/Dense_0")
    _linear(g, p, "attn_pool.mlp.fc2", _MAP + "MlpBlock_0/Dense_1")


_BACKBONE = "patch_embed.backbone."
_UNIT = re.compile(r"^patch_embed\.backbone\.stages\.(\d+)\.blocks\.(\d+)\.")
# timm's ResNetV2 unit (non-pre-activation bottleneck) -> the original code's names
_UNIT_PARTS = (
    ("conv1", "norm1", "conv1", "gn1"),
    ("conv2", "norm2", "conv2", "gn2"),
    ("conv3", "norm3", "conv3", "gn3"),
    ("downsample.conv", "downsample.norm", "conv_proj", "gn_proj"),
)


def _stem_in(g: _Reader, p: Params) -> None:
    """timm's hybrid backbone (a ResNetV2 without pre-activation, or its stem alone) in the original code's keys."""
    root = _BACKBONE + ("stem." if any(k.startswith(_BACKBONE + "stem.") for k in g.sd) else "")
    p["conv_root/kernel"] = _conv_in(g(root + "conv.weight"))
    _norm_in(g, p, root + "norm", "gn_root")
    for stage, unit in sorted({(int(m.group(1)), int(m.group(2))) for m in map(_UNIT.match, g.sd) if m}):
        t, o = f"{_BACKBONE}stages.{stage}.blocks.{unit}.", f"block{stage + 1}/unit{unit + 1}/"
        for conv, norm, our_conv, our_norm in _UNIT_PARTS:
            if conv != "downsample.conv" or t + conv + ".weight" in g.sd:
                p[o + our_conv + "/kernel"] = _conv_in(g(t + conv + ".weight"))
                _norm_in(g, p, t + norm, o + our_norm)


def _convolutional_stem_in(g: _Reader, p: Params) -> None:
    """timm's ConvStem (MobileCLIP): `patch_embed.backbone.<i>.conv` with its BatchNorm `bn` (statistics and
    all), the last convolution (with its bias, no norm) being the patch embedding."""
    layers = sorted({int(k.split(".")[2]) for k in g.sd if k.startswith(_BACKBONE) and k.endswith(".conv.weight")})
    *stem, last = layers
    for i in stem:
        t, o = f"{_BACKBONE}{i}.", "convolutional_stem/"
        p[f"{o}conv_{i}/kernel"] = _conv_in(g(t + "conv.weight"))
        for theirs, ours in (("weight", "scale"), ("bias", "bias"), ("running_mean", "mean"), ("running_var", "var")):
            p[f"{o}norm_{i}/{ours}"] = g(f"{t}bn.{theirs}")
        g(t + "bn.num_batches_tracked")  # a training counter, no weight: read so the file is wholly accounted for
    p["embedding/kernel"] = _conv_in(g(f"{_BACKBONE}{last}.conv.weight"))
    p["embedding/bias"] = g(f"{_BACKBONE}{last}.conv.bias")


def _naflex_embeds_in(g: _Reader, p: Params) -> None:
    """NaFlexVit's embedding (`embeds.*`). A Linear patch projection (D, ph * pw * C) reads patches flattened
    row by row, channels fastest (timm's `batch_patchify`, channels last): kept flat as `embedding/patch_kernel`
    until the model says its patch size and channels. The position table is (1, rows, cols, D), its grid kept;
    a factorized one is a (1, rows, D) and a (1, cols, D) table."""
    weight = g("embeds.proj.weight")
    if weight.ndim == 2:
        p["embedding/patch_kernel"] = _linear_in(weight)
    else:
        p["embedding/kernel"] = _conv_in(weight)
    if "embeds.pos_embed" in g.sd:
        p[POSEMB_KEY] = g("embeds.pos_embed")
    for axis in ("y", "x"):
        if f"embeds.pos_embed_{axis}" in g.sd:
            p[f"{POSEMB_KEY}_{axis}"] = g(f"embeds.pos_embed_{axis}")


def timm_to_official(sd: Params, num_heads: int, source: str = "state dict") -> Params:
    """A timm ViT state dict (every family of `keras_vit.VisionTransformer`, timm's ResNetV2 hybrids included) in
    official keys. Every tensor is mapped or the read is refused naming it (`_Reader`)."""
    unsupported = sorted({k.split(".")[0] for k in sd} - _TOP)
    if unsupported:
        raise ValueError(f"{source} has parts keras_vit's timm reader does not map: {unsupported}.")
    g = _Reader(sd, source)
    p: Params = {}
    if _BACKBONE + "0.conv.weight" in sd:  # MobileCLIP's convolutional stem
        _convolutional_stem_in(g, p)
    elif any(k.startswith(_BACKBONE) for k in sd):
        _stem_in(g, p)
    naflex = "embeds." if any(k.startswith("embeds.") for k in sd) else ""  # timm's NaFlexVit
    if naflex:
        _naflex_embeds_in(g, p)
    elif "embedding/kernel" not in p:
        p["embedding/kernel"] = _conv_in(g("patch_embed.proj.weight"))
    if "patch_embed.norm.weight" in sd:  # AIMv2
        _norm_in(g, p, "patch_embed.norm", "embedding_norm")
    if "pos_embed" in sd:  # none: rotary embeddings alone (DINOv3, RoPE-ViT)
        p[POSEMB_KEY] = g("pos_embed")
    if naflex + "proj.bias" in sd or "patch_embed.proj.bias" in sd:
        p["embedding/bias"] = g(naflex + "proj.bias" if naflex else "patch_embed.proj.bias")
    for theirs, ours in _TOKENS:
        if naflex + theirs in sd:
            p[ours] = g(naflex + theirs)
    for theirs, ours in _NORMS:
        if theirs + ".weight" in sd:
            _norm_in(g, p, theirs, ours)
    p.update(per_block(_blocks(sd, _BLOCK), lambda i: _block_in(g, i, num_heads)))
    if "rope.freqs" in sd:  # RoPE-Mixed: (2, depth, heads, head_dim / 2), one slice per block
        for i, freqs in enumerate(np.moveaxis(g("rope.freqs"), 1, 0)):
            p[f"Transformer/encoderblock_{i}/MultiHeadDotProductAttention_1/rotary_frequencies"] = freqs
    if any(k.startswith("attn_pool.") for k in sd):
        _map_head_in(g, p, num_heads, source)
    for theirs, ours in (("head", "head"), ("head_dist", "head_dist")):
        if theirs + ".weight" in sd:
            _linear(g, p, theirs, ours)
    g.check_all_used()
    return p
