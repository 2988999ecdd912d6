"""Writes tests/fixtures/pillow12/resized.npz: PIL's bicubic resize + centre crop of scikit-image's photos under
Pillow 12 (columns always resized first), the reference for `DataConfig(pass_order="pillow12")`. Run where Pillow
12 is installed (the test environment has the current Pillow):

    python -m venv /tmp/pil12 && /tmp/pil12/bin/pip install "pillow==12.3.0" numpy scikit-image
    /tmp/pil12/bin/python tools/make_pillow12_reference.py

Each entry "<photo>/<crop_mode>_<crop_pct>" is the uint8 (224, 224, 3) image torchvision's eval transform feeds
its normalisation: the shorter side (or both, "squash") to floor(224 / crop_pct), then the centre crop.
"""

import math
import os

import numpy as np
import PIL
from PIL import Image
from skimage import data

OUT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "fixtures", "pillow12")
CASES = (("center", 0.9), ("squash", 1.0), ("squash", 0.9))


def photos() -> dict:
    """The photos both sides use: landscape ones and tall ones made by transposing."""
    return {
        "astronaut": data.astronaut(),
        "chelsea": data.chelsea(),
        "rocket": data.rocket(),
        "rocket_tall": np.ascontiguousarray(data.rocket().transpose(1, 0, 2)),
        "chelsea_tall": np.ascontiguousarray(data.chelsea().transpose(1, 0, 2)),
    }


def resize_crop(image: np.ndarray, crop_mode: str, crop_pct: float, size: int = 224) -> np.ndarray:
    h, w = image.shape[:2]
    short = math.floor(size / crop_pct)
    if crop_mode == "squash":
        nh = nw = short
    else:
        nh, nw = (short, int(short * w / h)) if h <= w else (int(short * h / w), short)
    resized = np.asarray(Image.fromarray(image).resize((nw, nh), Image.BICUBIC))
    top, left = int(round((nh - size) / 2.0)), int(round((nw - size) / 2.0))
    return resized[top : top + size, left : left + size]


if __name__ == "__main__":
    assert PIL.__version__.startswith("12."), f"run under Pillow 12, not {PIL.__version__}"
    os.makedirs(OUT, exist_ok=True)
    out = {
        f"{name}/{mode}_{pct}": resize_crop(image, mode, pct) for name, image in photos().items() for mode, pct in CASES
    }
    np.savez_compressed(os.path.join(OUT, "resized.npz"), pillow=np.asarray(PIL.__version__), **out)
    print(sorted(out), PIL.__version__)
