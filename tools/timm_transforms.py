"""timm's own evaluation transforms applied to photos: the outside reference of tests/test_preprocessing.py.

    python tools/timm_transforms.py PHOTOS.npz CONFIGS_JSON OUT.npz

PHOTOS.npz holds uint8 (H, W, 3) images; CONFIGS_JSON maps a name to keras_vit data-config fields. For each
(config, photo) OUT.npz holds timm's `create_transform(input_size, crop_pct, interpolation, mean, std)` output
as (224, 224, 3) float32. Exit code 3 when timm, torch or the real torchvision is missing.
"""

import json
import sys

import numpy as np


def main(photos_path: str, configs_json: str, out_path: str) -> int:
    try:
        import timm.data
        import torchvision.transforms
        from PIL import Image
    except (ImportError, RuntimeError) as e:  # RuntimeError: a torchvision built for another torch
        print(f"needs timm, torch and a torchvision built for that torch: {e}", file=sys.stderr)
        return 3
    if "stub" in (torchvision.__file__ or ""):
        print("torchvision here is keras_vit's stand-in, not the real package", file=sys.stderr)
        return 3
    photos, out = np.load(photos_path), {}
    for name, config in json.loads(configs_json).items():
        transform = timm.data.create_transform(
            input_size=(3, 224, 224),
            is_training=False,
            interpolation=config.get("interpolation", "bilinear"),
            crop_pct=config.get("crop_pct", 1.0),
            crop_mode=config.get("crop_mode", "center"),
            mean=tuple(config.get("mean", (0.5, 0.5, 0.5))),
            std=tuple(config.get("std", (0.5, 0.5, 0.5))),
        )
        for photo in photos.files:
            tensor = transform(Image.fromarray(photos[photo]))
            out[f"{name}/{photo}"] = tensor.permute(1, 2, 0).numpy().astype("float32")
    np.savez(out_path, **out)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
