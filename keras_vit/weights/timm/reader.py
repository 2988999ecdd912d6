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
Each block is read by the module of the timm class that laid it out (`keras_vit.weights.timm.block_forms`: the
plain `Block` and Eva's, ParallelScalingBlock, ParallelThingsBlock).
timm's DiffAttention (differential attention) adds `attn.lambda_q1` ... `lambda_k2` and `attn.sub_norm`.
timm's NaFlexVit (SigLIP 2 NaFlex, RADIO) keeps its patch projection, tokens and position table under `embeds.`.
MobileCLIP's convolutional stem is timm's ConvStem under `patch_embed.backbone.`, its last convolution the patch
embedding. The writer, official keys -> timm, is `keras_vit.weights.timm.writer`.
"""

from __future__ import annotations

import re

import numpy as np

from keras_vit.weights.keys import POSEMB_KEY, Params, _attention_in, _blocks, _conv_in, _linear_in, _Reader, per_block
from keras_vit.weights.timm.block import _linear, _norm_in
from keras_vit.weights.timm.block_forms import read_block

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
    p.update(per_block(_blocks(sd, _BLOCK), lambda i: read_block(g, i, num_heads)))
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
