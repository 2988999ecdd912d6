"""Image folders of real pictures for the folder-dataset tests: scikit-learn's digit scans and scikit-image's
photos written as PNG / JPEG / GIF / BMP files in class folders, grayscale, RGB and RGBA, of several sizes."""

from __future__ import annotations

import os

import numpy as np
from PIL import Image


def _digit_images(per_class: int, classes):
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    for label in classes:
        picked = x[y == label][:per_class].reshape(-1, 8, 8) * (255.0 / 16.0)
        yield (
            label,
            [Image.fromarray(d.round().astype("uint8")).resize((24 + 4 * (i % 3),) * 2) for i, d in enumerate(picked)],
        )


def _photos():
    from skimage import data

    return [
        Image.fromarray(data.astronaut()).resize((40, 30)),
        Image.fromarray(data.camera()).resize((30, 44)),
        Image.fromarray(data.coffee()).resize((36, 36)),
        Image.fromarray(data.chelsea()).resize((48, 32)),
    ]


def write_folder(root, per_class: int = 34, classes=(0, 1, 2), corrupt: int = 1) -> list:
    """Writes `root/<digit name>/...` (some PNG grayscale, some JPEG RGB, a photo as RGBA PNG, GIF and BMP per
    class) and `corrupt` undecodable `.jpg` files; returns the class names in label order."""
    names = []
    photos = _photos()
    for label, images in _digit_images(per_class, classes):
        name = f"digit_{label}"
        names.append(name)
        folder = os.path.join(root, name)
        os.makedirs(os.path.join(folder, "more"), exist_ok=True)  # nested folders below a class are followed
        for i, image in enumerate(images):
            if i % 2:
                image.convert("RGB").save(os.path.join(folder, f"{i:03d}.jpg"), quality=95)
            else:
                image.save(os.path.join(folder if i % 4 else os.path.join(folder, "more"), f"{i:03d}.png"))
        photo = photos[label % len(photos)]
        photo.convert("RGBA").save(os.path.join(folder, "photo_rgba.png"))
        photo.convert("P").save(os.path.join(folder, "photo.gif"))
        photo.convert("RGB").save(os.path.join(folder, "photo.BMP"))
    for i in range(corrupt):
        with open(os.path.join(root, names[i % len(names)], f"broken_{i}.jpg"), "wb") as f:
            f.write(b"\xff\xd8\xff\xe0 not really a jpeg")
    return names


def pixels(path) -> np.ndarray:
    """A file's pixels as PIL decodes them, RGB uint8 (an independent decoder for the tests)."""
    return np.asarray(Image.open(path).convert("RGB"))
