"""Writes tests/fixtures/backbones/: one timm repository per backbone family beyond the paper's ViT (timm's `eva` module; AIMv2,
BEiT-3 and the parallel-layer ViTs of its `vision_transformer` module), written
by timm itself (`save_for_hf`) with timm's logits, so the default suite checks keras_vit against timm without
torch:

    PYTHONPATH=tools/torchvision_stub python tools/make_backbone_fixtures.py

Each is the architecture timm registers under that name with what `model_args` may change made small (one or
two blocks, a narrower width, a 2x3 patch grid: a non-square input), every parameter perturbed, and a
head of 5 classes where the architecture has one. Files per case: `<case>/` (config.json + model.safetensors),
`<case>_input.npy` (2 images, NHWC, already normalised) and `<case>_logits.npy` (timm's float32 output); for the
NaFlex cases also `<case>_naflex.npz` (three images, timm's NaFlex batch of them and its logits). MobileCLIP's
convolutional stem (`mci_small`) is a bare state dict: its stem's widths are fixed by the architecture's name.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "torchvision_stub"))

import numpy as np  # noqa: E402
import timm  # noqa: E402
import torch  # noqa: E402
from safetensors.torch import save_file  # noqa: E402
from timm.models._hub import save_for_hf  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "fixtures", "backbones")

# case -> (timm architecture, model_args). Widths keep a head width divisible by 4 (rotary embeddings) and an
# MLP width timm's int(width * ratio) and keras_vit agree on.
CASES = {
    # EVA-02: packed SwiGLU, axial RoPE rescaled to a 16x16 reference grid, a position table, avg pool + fc_norm
    "eva02_tiny": ("eva02_tiny_patch14_224", dict(depth=2, embed_dim=96, num_heads=3, num_classes=5)),
    # EVA-02 CLIP: separate q/k/v (no key bias), SwiGLU with its sub-LN, a norm on the attention output, token pool
    "eva02_clip": ("eva02_base_patch16_clip_224", dict(depth=1, embed_dim=96, num_heads=3, num_classes=5)),
    # DINOv3: centred RoPE in halves, class + 4 storage tokens, no position table, LayerScale, no head
    "dinov3_small": ("vit_small_patch16_dinov3", dict(depth=2, embed_dim=64, num_heads=2)),
    # Perception Encoder core: pre-norm without patch bias, xy RoPE with offset 1, an 8-head MAP head over all tokens
    "pe_core_tiny": ("vit_pe_core_tiny_patch16_384", dict(depth=2, embed_dim=64, num_heads=2, num_classes=5)),
    # RoPE-ViT (naver): xy RoPE at temperature 100 beside a learned table, LayerScale, token pool
    "rope_ape_small": ("vit_small_patch16_rope_ape_224", dict(depth=1, embed_dim=64, num_heads=2, num_classes=5)),
    # AIMv2: RMSNorm everywhere (the patch embeddings too), SwiGLU and projections without bias, no class token
    "aimv2_large": ("aimv2_large_patch14_224", dict(depth=2, embed_dim=64, num_heads=2)),
    # BEiT-3: norms inside the attention and the GELU MLP
    "beit3_base": ("beit3_base_patch16_224", dict(depth=1, embed_dim=64, num_heads=2, num_classes=5)),
    # timm's ResPostBlock ViT: each branch normalised after it (post-norm), average pooling
    "rpn_base": ("vit_base_patch16_rpn_224", dict(depth=2, embed_dim=64, num_heads=2, num_classes=5)),
    # Sapiens2: RMSNorm qk-norm, grouped-query attention in some blocks, LayerScale on attention only, 8 registers
    "sapiens2_base": (
        "vit_base_patch16_sapiens2",
        dict(depth=2, embed_dim=64, num_heads=4, num_kv_heads=[4, 2], num_classes=5),
    ),
    # RoPE-Mixed (naver): learned rotary frequencies per block and head, no position table
    "rope_mixed_small": ("vit_small_patch16_rope_mixed_224", dict(depth=2, embed_dim=64, num_heads=2, num_classes=5)),
    # ViT-22B's parallel layers (ParallelScalingBlock): RMSNorm, qk-norm, no q/k/v bias (the MLP's bias apart)
    "xp_base": ("vit_base_patch16_xp_224", dict(depth=2, embed_dim=64, num_heads=2, num_classes=5)),
    # parallel layers with q/k/v biases packed beside the MLP's, LayerScale on the sum, a register, average pool
    "pwee": ("vit_pwee_patch16_reg1_gap_256", dict(depth=2, embed_dim=64, num_heads=2, num_classes=5)),
    # differential attention (DiffAttention) in three blocks: each block's lambda_init is its own
    "dwee": ("vit_dwee_patch16_reg1_gap_256", dict(depth=3, embed_dim=64, num_heads=2, num_classes=5)),
    # differential attention in parallel layers, one output projection over both branches (DiffParallelScalingBlock)
    "dpwee": ("vit_dpwee_patch16_reg1_gap_256", dict(depth=2, embed_dim=64, num_heads=2, num_classes=5)),
    # parallel branches (ParallelThingsBlock): two attention and two MLP branches per block, each with its LayerScale
    "things_18x2": ("vit_small_patch16_18x2_224", dict(depth=2, embed_dim=64, num_heads=2, num_classes=5)),
}

# NaFlex (timm's naflexvit): also a NaFlex batch of three images of other aspect ratios, made by timm's own
# NaFlex steps (its sequence size, an antialiased bicubic resize, its patchify and collator), with timm's logits
NAFLEX_CASES = {
    # SigLIP 2 NaFlex: a 2-D table resampled bilinearly (antialiased), a MAP head, no prefix tokens
    "naflex_siglip": ("naflexvit_base_patch16_siglip", dict(depth=1, embed_dim=64, num_heads=2, num_classes=5)),
    # one table per axis resampled aspect-preserving, 4 registers, average pooling with fc_norm
    "naflex_parfac": ("naflexvit_base_patch16_parfac_gap", dict(depth=2, embed_dim=64, num_heads=2, num_classes=5)),
    # RADIO v3: bilinear with aligned corners, aspect-preserving, class + 7 registers, token pooling, no final norm
    "radio_v3": (
        "naflexvit_base_patch16_radio_v3",
        dict(depth=1, embed_dim=64, num_heads=2, num_classes=5, pos_embed_grid_size=[12, 12]),
    ),
}
NAFLEX_SIZES, NAFLEX_PATCHES = ((40, 90), (100, 30), (64, 64)), 12


def _naflex_batch(model, seed: int) -> tuple:
    """(images, timm's NaFlex batch) for `model`: uint8 images of three aspect ratios, resized as timm's
    `ResizeToSequence` sizes them (on tensors: torch's antialiased bicubic), normalised, patchified, collated."""
    import torch.nn.functional as F
    from timm.data.naflex_dataset import NaFlexCollator
    from timm.data.naflex_transforms import get_image_size_for_seq, patchify_image

    rng = np.random.default_rng(seed)
    images = [rng.integers(0, 256, (*size, 3), dtype=np.uint8) for size in NAFLEX_SIZES]
    mean = torch.tensor(model.pretrained_cfg["mean"]).view(3, 1, 1)
    std = torch.tensor(model.pretrained_cfg["std"]).view(3, 1, 1)
    samples = []
    for image in images:
        x = torch.from_numpy(image).permute(2, 0, 1).float()[None] / 255.0
        size = get_image_size_for_seq(image.shape[:2], 16, NAFLEX_PATCHES)[1]
        x = (F.interpolate(x, size=size, mode="bicubic", antialias=True, align_corners=False)[0] - mean) / std
        patches, coord, valid = patchify_image(x, (16, 16))
        samples.append((dict(patches=patches, patch_coord=coord, patch_valid=valid), 0))
    batch = NaFlexCollator(max_seq_len=NAFLEX_PATCHES)(samples)[0]
    return images, {k: batch[k].numpy() for k in ("patches", "patch_coord", "patch_valid")}


def _naflex_case(case: str, name: str, args: dict) -> None:
    seed = sum(map(ord, case))
    size = (32, 48)
    model = _build(name, args, size, seed)
    x = np.random.default_rng(seed).uniform(-1, 1, (2, *size, 3)).astype("float32")
    images, batch = _naflex_batch(model, seed)
    with torch.no_grad():
        logits = model(torch.from_numpy(x).permute(0, 3, 1, 2)).numpy()
        naflex_logits = model({k: torch.from_numpy(v) for k, v in batch.items()}).numpy()
    save_for_hf(model, os.path.join(OUT, case), model_args=dict(args, img_size=list(size)), safe_serialization=True)
    np.save(os.path.join(OUT, f"{case}_input.npy"), x)
    np.save(os.path.join(OUT, f"{case}_logits.npy"), logits)
    np.savez(
        os.path.join(OUT, f"{case}_naflex.npz"),
        logits=naflex_logits,
        **batch,
        **{f"image_{i}": image for i, image in enumerate(images)},
    )
    print(case, name, logits.shape, naflex_logits.shape, batch["patch_valid"].sum(1))


def _build(name: str, args: dict, size: tuple, seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    model = timm.create_model(name, pretrained=False, img_size=size, **args).eval()
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn(p.shape, generator=g))
    return model


def _mobileclip_case() -> None:
    """`mci_small/model.safetensors`: timm's `vit_base_mci_224` (MobileCLIP's ViT-B: a convolutional stem with
    BatchNorm) built by timm's own hybrid constructor with a narrower stem, (16, 16, 64) channels instead of
    (192, 192, 768), which the architecture's name fixes and `model_args` cannot change: so a bare state dict,
    with its BatchNorm statistics perturbed too."""
    from timm.models.vision_transformer_hybrid import ConvStem, _create_vision_transformer_hybrid
    from torch import nn

    case, seed, size = "mci_small", sum(map(ord, "mci_small")), (32, 48)
    torch.manual_seed(seed)
    stem = ConvStem(channels=(16, 16, 64), stride=(4, 2, 2), kernel_size=(4, 2, 2), padding=0, act_layer=nn.GELU)
    model = _create_vision_transformer_hybrid(
        "vit_base_mci_224",
        backbone=stem,
        embed_args=dict(proj=False),
        pretrained=False,
        img_size=size,
        embed_dim=64,
        depth=1,
        num_heads=2,
        no_embed_class=True,
        num_classes=5,
    ).eval()
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn(p.shape, generator=g))
        for name, b in model.named_buffers():
            if name.endswith("running_mean"):
                b.add_(0.1 * torch.randn(b.shape, generator=g))
            elif name.endswith("running_var"):
                b.mul_(torch.exp(0.3 * torch.randn(b.shape, generator=g)))
    x = np.random.default_rng(seed).uniform(-1, 1, (2, *size, 3)).astype("float32")
    with torch.no_grad():
        logits = model(torch.from_numpy(x).permute(0, 3, 1, 2)).numpy()
    os.makedirs(os.path.join(OUT, case), exist_ok=True)
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, os.path.join(OUT, case, "model.safetensors"))
    np.save(os.path.join(OUT, f"{case}_input.npy"), x)
    np.save(os.path.join(OUT, f"{case}_logits.npy"), logits)
    print(case, logits.shape, sum(p.numel() for p in model.parameters()))


def main(only=()) -> None:
    """Every case, or those named on the command line (`only`)."""
    os.makedirs(OUT, exist_ok=True)
    for case, (name, args) in sorted(CASES.items()):
        if only and case not in only:
            continue
        seed = sum(map(ord, case))  # a case's own seed: adding a case leaves the others' files as they are
        with torch.device("meta"):
            stride = timm.create_model(name, pretrained=False).patch_embed.patch_size[0]
        size = (2 * stride, 3 * stride)
        model = _build(name, args, size, seed)
        x = np.random.default_rng(seed).uniform(-1, 1, (2, *size, 3)).astype("float32")
        with torch.no_grad():
            logits = model(torch.from_numpy(x).permute(0, 3, 1, 2)).numpy()
        save_for_hf(model, os.path.join(OUT, case), model_args=dict(args, img_size=list(size)), safe_serialization=True)
        np.save(os.path.join(OUT, f"{case}_input.npy"), x)
        np.save(os.path.join(OUT, f"{case}_logits.npy"), logits)
        print(case, name, logits.shape, sum(p.numel() for p in model.parameters()))
    if only:
        return
    for case, (name, args) in sorted(NAFLEX_CASES.items()):
        _naflex_case(case, name, args)
    _naflex_sizes()
    _mobileclip_case()


def _naflex_sizes() -> None:
    """naflex_sizes.json: timm's NaFlex image size (`get_image_size_for_seq`) for 200 random images, patch sizes
    and patch budgets, as [[height, width, patch, budget], [height, width]]."""
    import json

    from timm.data.naflex_transforms import get_image_size_for_seq

    rng = np.random.default_rng(0)
    cases = []
    for _ in range(200):
        h, w = (int(v) for v in rng.integers(1, 2000, 2))
        p, n = int(rng.choice([14, 16, 32])), int(rng.choice([1, 16, 64, 256, 576, 1024]))
        cases.append([[h, w, p, n], list(get_image_size_for_seq((h, w), p, n)[1])])
    with open(os.path.join(OUT, "naflex_sizes.json"), "w") as f:
        json.dump(cases, f)


if __name__ == "__main__":
    main(tuple(sys.argv[1:]))
