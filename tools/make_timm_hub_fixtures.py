"""Makes tests/fixtures/timm_hub/: timm repository directories as `save_for_hf` writes them (config.json with
`architecture`, `model_args` and `pretrained_cfg`, plus model.safetensors), with every parameter perturbed so a
dropped tensor shows, an NHWC input and timm's own logits on it. Run by hand (not in CI):

    PYTHONPATH=tools/torchvision_stub python tools/make_timm_hub_fixtures.py [--out DIR] [--only CASE ...]

with torch 2.13.0 (CPU) and timm 1.0.31; torchvision is replaced by tools/torchvision_stub (see its docstring).
Cases, one per family (small sizes, timm's architecture otherwise): "plain" (class token, exact GELU, augreg2's
data config), "deit3" (LayerScale, prefix tokens after the position embeddings), "deit" (distillation token and
head), "dinov2" (registers, LayerScale), "clip" and "clip_quickgelu" (pre-norm, no patch bias, LayerNorm epsilon
1e-5, exact or quick GELU), "siglip" (MAP head, no class token), "gap_fc_norm" (average pooling, LayerNorm after
it), "qk_norm" (qk-norm, no query/key/value biases), "hybrid_root" (timm's root-only BiT stem) and
"no_final_norm" (RADIO: seven registers, LayerScale, no final LayerNorm); plus
"hybrid_units", a bare state dict of a hybrid with two ResNet stages.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "torchvision_stub"))

import numpy as np  # noqa: E402
import timm  # noqa: E402
import torch  # noqa: E402
from timm.models._hub import save_for_hf  # noqa: E402

SMALL = dict(img_size=32, patch_size=8, embed_dim=32, depth=2, num_heads=2, num_classes=5)
CASES = {
    "plain": ("vit_base_patch16_224.augreg2_in21k_ft_in1k", {}),
    "deit3": ("deit3_base_patch16_224.fb_in1k", {}),
    "deit": ("deit_base_distilled_patch16_224.fb_in1k", {}),
    "dinov2": ("vit_small_patch14_reg4_dinov2.lvd142m", {}),
    "clip": ("vit_base_patch16_clip_224.openai", {}),
    "clip_quickgelu": ("vit_base_patch16_clip_quickgelu_224.openai", {}),
    "siglip": ("vit_base_patch16_siglip_224.webli", {}),
    "gap_fc_norm": ("vit_base_patch16_224.mae", dict(global_pool="avg", class_token=False)),
    "qk_norm": ("vit_base_patch16_224", dict(qk_norm=True, qkv_bias=False)),
    "hybrid_root": ("vit_tiny_r_s16_p8_224.augreg_in21k", dict(img_size=64, patch_size=2)),
    "no_final_norm": ("vit_base_patch16_radio_v3", {}),
}


def _hybrid_units(folder: str, images64: np.ndarray) -> None:
    """A bare state dict of a hybrid with a two-stage BiT ResNet (timm's ResNetV2, width 0.5 so the file stays
    small): what no registered name builds, so a `.safetensors` file with its logits, read off the shapes."""
    from functools import partial

    from safetensors.torch import save_file
    from timm.layers import StdConv2dSame
    from timm.models.resnetv2 import ResNetV2
    from timm.models.vision_transformer import VisionTransformer
    from timm.models.vision_transformer_hybrid import HybridEmbed

    backbone = ResNetV2(
        layers=(1, 1),
        channels=(128, 256),
        stem_chs=32,
        num_classes=0,
        global_pool="",
        preact=False,
        stem_type="same",
        conv_layer=partial(StdConv2dSame, eps=1e-8),
    )
    model = VisionTransformer(
        img_size=64,
        patch_size=1,
        embed_dim=32,
        depth=2,
        num_heads=2,
        num_classes=5,
        embed_layer=partial(HybridEmbed, backbone=backbone),
    ).eval()
    _perturb(model, 99)
    os.makedirs(folder, exist_ok=True)
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, os.path.join(folder, "model.safetensors"))
    with torch.no_grad():
        logits = model(torch.from_numpy(images64).permute(0, 3, 1, 2)).numpy()
    np.save(os.path.join(folder, "input.npy"), images64)
    np.save(os.path.join(folder, "logits.npy"), logits)


def _perturb(model: torch.nn.Module, seed: int) -> None:
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=generator))


def _resized(folder: str, name: str, extra: dict, images48: np.ndarray) -> None:
    """timm's own logits at 48 px from the 32 px repository in `folder`: timm resamples the position embeddings
    on load (bicubic, antialiased), the rule keras_vit must follow for timm-sourced models."""
    model = timm.create_model(
        name.split(".")[0],
        pretrained=True,
        **{**SMALL, **extra, "img_size": 48},
        pretrained_cfg_overlay=dict(file=os.path.join(folder, "model.safetensors"), num_classes=SMALL["num_classes"]),
    ).eval()
    with torch.no_grad():
        logits = model(torch.from_numpy(images48).permute(0, 3, 1, 2)).numpy()
    np.save(os.path.join(folder, "input_48.npy"), images48)
    np.save(os.path.join(folder, "logits_48.npy"), logits)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=os.path.join("tests", "fixtures", "timm_hub"))
    parser.add_argument("--only", nargs="*", help="cases to (re)make; default all")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    images = rng.uniform(-1, 1, (2, 32, 32, 3)).astype("float32")  # NHWC, already normalised
    images64 = rng.uniform(-1, 1, (2, 64, 64, 3)).astype("float32")
    images48 = rng.uniform(-1, 1, (2, 48, 48, 3)).astype("float32")
    for case in ("plain", "dinov2"):  # timm at another size: its position-embedding resampling
        if not args.only or "resized" in args.only:
            _resized(os.path.join(args.out, case), *CASES[case], images48)
    if not args.only or "hybrid_units" in args.only:
        _hybrid_units(os.path.join(args.out, "hybrid_units"), images64)
    for seed, (case, (name, extra)) in enumerate(CASES.items()):
        if args.only and case not in args.only:
            continue
        x = images64 if case.startswith("hybrid") else images
        torch.manual_seed(seed)
        model = timm.create_model(name, pretrained=False, **{**SMALL, **extra}).eval()
        _perturb(model, seed)
        folder = os.path.join(args.out, case)
        save_for_hf(model, folder, safe_serialization=True)
        if os.path.exists(os.path.join(folder, "pytorch_model.bin")):
            os.remove(os.path.join(folder, "pytorch_model.bin"))
        with torch.no_grad():
            logits = model(torch.from_numpy(x).permute(0, 3, 1, 2)).numpy()
        np.save(os.path.join(folder, "input.npy"), x)
        np.save(os.path.join(folder, "logits.npy"), logits)
        with open(os.path.join(folder, "versions.json"), "w") as f:
            json.dump({"timm": timm.__version__, "torch": torch.__version__, "name": name, "args": SMALL}, f)
        print(case, folder, sorted(os.listdir(folder)))


if __name__ == "__main__":
    main()
