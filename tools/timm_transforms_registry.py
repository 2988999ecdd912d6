"""timm's own evaluation transform for every distinct `pretrained_cfg` of the ViT modules keras_vit claims, on
photos of several aspect ratios: the outside reference of `tests/test_timm_transforms_registry.py`.

    python tools/timm_transforms_registry.py OUT_DIR

Needs timm, torch and the real torchvision (not keras_vit's stand-in). For each distinct (input size,
interpolation, crop_pct, crop_mode) of timm's pretrained configs in `vision_transformer`,
`vision_transformer_hybrid` and `deit`, `timm.data.create_transform(..., is_training=False)` runs on
scikit-image's photos (wide, square, tall, a tiny one that must be enlarged, a large one). The output's
normalisation is undone, which gives PIL's uint8 pixels exactly; OUT_DIR gets `transforms_<k>.npz` (at most
seven, compressed) and `transforms.json` (the configs, and the timm, torchvision and Pillow versions).
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np

MODULES = ("vision_transformer", "vision_transformer_hybrid", "deit")


def photos() -> dict:
    """The photos both sides use: wide, square, tall (transposed), tiny (enlarged) and large (tiled)."""
    from skimage import data

    rocket, chelsea = data.rocket(), data.chelsea()
    return {
        "wide": rocket,
        "square": data.astronaut(),
        "tall": np.ascontiguousarray(rocket.transpose(1, 0, 2)),
        "tiny": np.ascontiguousarray(chelsea[100:137, 150:203]),
        "large": np.ascontiguousarray(np.tile(chelsea, (3, 3, 1))),
    }


def distinct_configs() -> dict:
    """{key: pretrained-config fields} for every distinct resize rule of the claimed modules' pretrained tags."""
    import timm
    from timm.models import get_pretrained_cfg

    archs = {a for module in MODULES for a in timm.list_models(module=module)}
    out = {}
    for name in timm.list_pretrained():
        if name.split(".")[0] not in archs:
            continue
        cfg = get_pretrained_cfg(name)
        if cfg is None:
            continue
        d = cfg.to_dict()
        fields = dict(
            input_size=list(d["input_size"]),
            interpolation=d.get("interpolation", "bicubic"),
            crop_pct=d.get("crop_pct", 0.875),
            crop_mode=d.get("crop_mode", "center"),
            mean=list(d.get("mean", (0.485, 0.456, 0.406))),
            std=list(d.get("std", (0.229, 0.224, 0.225))),
        )
        key = (
            f"{fields['input_size'][1]}x{fields['input_size'][2]}_{fields['interpolation']}_"
            f"{fields['crop_pct']}_{fields['crop_mode']}"
        )
        out.setdefault(key, dict(fields, example=name))
    return out


def main(out_dir: str) -> int:
    import PIL
    import timm
    import torchvision
    from PIL import Image
    from timm.data import create_transform

    os.makedirs(out_dir, exist_ok=True)
    configs, images = distinct_configs(), photos()
    groups = [dict() for _ in range(7)]
    for i, (key, c) in enumerate(sorted(configs.items())):
        transform = create_transform(
            input_size=tuple(c["input_size"]),
            is_training=False,
            interpolation=c["interpolation"],
            crop_pct=c["crop_pct"],
            crop_mode=c["crop_mode"],
            mean=tuple(c["mean"]),
            std=tuple(c["std"]),
        )
        c["transform"] = repr(transform)
        mean, std = np.asarray(c["mean"])[:, None, None], np.asarray(c["std"])[:, None, None]
        for photo, image in images.items():
            x = transform(Image.fromarray(image)).numpy()
            pixels = np.round((x * std + mean) * 255.0).clip(0, 255).astype("uint8").transpose(1, 2, 0)
            groups[i % len(groups)][f"{key}/{photo}"] = pixels
    for k, group in enumerate(groups):
        if group:
            np.savez_compressed(os.path.join(out_dir, f"transforms_{k}.npz"), **group)
    with open(os.path.join(out_dir, "transforms.json"), "w") as f:
        json.dump(
            dict(timm=timm.__version__, torchvision=torchvision.__version__, pillow=PIL.__version__, configs=configs),
            f,
            indent=1,
        )
    print(
        len(configs),
        "configs;",
        "timm",
        timm.__version__,
        "torchvision",
        torchvision.__version__,
        "Pillow",
        PIL.__version__,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
