"""Makes tests/fixtures/timm_hub/: timm repository directories as `save_for_hf` writes them (config.json with
`architecture`, `model_args` and `pretrained_cfg`, plus model.safetensors), with every parameter perturbed so a
dropped tensor shows, an NHWC input and timm's own logits on it. Run by hand (not in CI):

    PYTHONPATH=tools/torchvision_stub python tools/make_timm_hub_fixtures.py [--out DIR]

with torch 2.13.0 (CPU) and timm 1.0.31; torchvision is replaced by tools/torchvision_stub (see its docstring).
Cases, one per family (small sizes, timm's architecture otherwise): "plain" (class token, exact GELU, augreg2's
data config), "deit3" (LayerScale, prefix tokens after the position embeddings), "deit" (distillation token and
head), "dinov2" (registers, LayerScale), "clip" and "clip_quickgelu" (pre-norm, no patch bias, LayerNorm epsilon
1e-5, exact or quick GELU), "siglip" (MAP head, no class token), "gap_fc_norm" (average pooling, LayerNorm after
it) and "qk_norm" (qk-norm, no query/key/value biases).
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
CASES = {"plain": ("vit_base_patch16_224.augreg2_in21k_ft_in1k", {}),
         "deit3": ("deit3_base_patch16_224.fb_in1k", {}),
         "deit": ("deit_base_distilled_patch16_224.fb_in1k", {}),
         "dinov2": ("vit_small_patch14_reg4_dinov2.lvd142m", {}),
         "clip": ("vit_base_patch16_clip_224.openai", {}),
         "clip_quickgelu": ("vit_base_patch16_clip_quickgelu_224.openai", {}),
         "siglip": ("vit_base_patch16_siglip_224.webli", {}),
         "gap_fc_norm": ("vit_base_patch16_224.mae", dict(global_pool="avg", class_token=False)),
         "qk_norm": ("vit_base_patch16_224", dict(qk_norm=True, qkv_bias=False))}


def _perturb(model: torch.nn.Module, seed: int) -> None:
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=generator))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=os.path.join("tests", "fixtures", "timm_hub"))
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    images = rng.uniform(-1, 1, (2, 32, 32, 3)).astype("float32")  # NHWC, already normalised
    for seed, (case, (name, extra)) in enumerate(CASES.items()):
        model = timm.create_model(name, pretrained=False, **SMALL, **extra).eval()
        _perturb(model, seed)
        folder = os.path.join(args.out, case)
        save_for_hf(model, folder, safe_serialization=True)
        if os.path.exists(os.path.join(folder, "pytorch_model.bin")):
            os.remove(os.path.join(folder, "pytorch_model.bin"))
        with torch.no_grad():
            logits = model(torch.from_numpy(images).permute(0, 3, 1, 2)).numpy()
        np.save(os.path.join(folder, "input.npy"), images)
        np.save(os.path.join(folder, "logits.npy"), logits)
        with open(os.path.join(folder, "versions.json"), "w") as f:
            json.dump({"timm": timm.__version__, "torch": torch.__version__, "name": name, "args": SMALL}, f)
        print(case, folder, sorted(os.listdir(folder)))


if __name__ == "__main__":
    main()
