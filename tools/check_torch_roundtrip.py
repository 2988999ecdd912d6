"""Loads keras_vit's `save_safetensors` output in PyTorch's own libraries and prints their logits' distance to
keras_vit's. Used by tests/test_torch_roundtrip.py (slow: needs torch, timm, transformers).

    python tools/check_torch_roundtrip.py timm  DIR   (with tools/torchvision_stub on PYTHONPATH)
    python tools/check_torch_roundtrip.py transformers DIR
    python tools/check_torch_roundtrip.py timm_dir DIR   (keras_vit.save_pretrained's `repo/`, read by timm's
                                                          own local-dir: loader; torchvision stub as above)
DIR holds `timm.safetensors` / `hf/` / `repo/`, `input.npy`, `keras_logits.npy` and `sizes.json`.
"""

import json
import os
import sys
import warnings

import numpy as np
import torch


def main(kind: str, directory: str) -> None:
    x = torch.from_numpy(np.load(os.path.join(directory, "input.npy")).transpose(0, 3, 1, 2).copy())
    ours = np.load(os.path.join(directory, "keras_logits.npy"))
    s = json.load(open(os.path.join(directory, "sizes.json"))) if kind != "timm_dir" else None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if kind == "timm_dir":
            import timm

            model = timm.create_model("local-dir:" + os.path.join(directory, "repo"), pretrained=True)
        elif kind == "timm":
            import timm

            model = timm.create_model(
                "vit_tiny_patch16_224",
                pretrained=True,
                img_size=s["image"],
                patch_size=s["patch"],
                embed_dim=s["width"],
                depth=s["depth"],
                num_heads=s["heads"],
                mlp_ratio=s["mlp"] / s["width"],
                num_classes=s["classes"],
                pretrained_cfg_overlay=dict(file=os.path.join(directory, "timm.safetensors"), num_classes=s["classes"]),
            )
        else:
            from transformers import ViTForImageClassification

            model, info = ViTForImageClassification.from_pretrained(
                os.path.join(directory, "hf"), output_loading_info=True
            )
            bad = {k: v for k, v in info.items() if v}
            if bad:
                raise SystemExit(f"transformers reported {bad}")
    noisy = [
        str(w.message) for w in caught if "missing" in str(w.message).lower() or "unexpected" in str(w.message).lower()
    ]
    if noisy:
        raise SystemExit(f"{kind} warned: {noisy}")
    model.eval()
    with torch.no_grad():
        out = model(x)
    theirs = (out.logits if hasattr(out, "logits") else out).numpy()
    print(f"{kind} max|diff| {np.abs(theirs - ours).max():.3e}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
