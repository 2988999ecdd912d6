"""Reading image files at their real bit depth, into the range a model expects.

PIL's `convert("RGB")` clips 16-bit grayscale (medical scans, microscopy) to white; here
16- and 32-bit integer images are scaled by their format's maximum, grayscale is repeated
to RGB and alpha is dropped.
"""

from __future__ import annotations

import os

import numpy as np

_INTEGER_MAX = {"I;16": 65535.0, "I;16B": 65535.0, "I;16L": 65535.0, "I;16N": 65535.0}


def read_image(path: str, what: str = "image") -> np.ndarray:
    """The image at `path` as float32 (H, W, 3) pixels in [0, 255], whatever its mode and bit depth."""
    from PIL import Image, UnidentifiedImageError

    if not os.path.exists(path):
        raise FileNotFoundError(f"{what} {path!r} does not exist.")
    try:
        image = Image.open(path)
        image.load()
    except (UnidentifiedImageError, OSError) as e:
        raise ValueError(f"{what} {path!r} is not a readable image: {e}") from e
    if image.mode in _INTEGER_MAX or image.mode == "I":
        pixels = np.asarray(image, dtype="float64")
        top = _INTEGER_MAX.get(image.mode) or (65535.0 if pixels.max() > 255 else 255.0)
        pixels = np.clip(pixels / top * 255.0, 0, 255)
    elif image.mode == "F":
        pixels = np.asarray(image, dtype="float64")
        pixels = np.clip(pixels * (255.0 if pixels.max() <= 1.0 else 1.0), 0, 255)
    else:
        pixels = np.asarray(image.convert("RGB"), dtype="float64")
    if pixels.ndim == 2:
        pixels = np.repeat(pixels[..., None], 3, axis=-1)
    return pixels.astype("float32")


def resize(pixels: np.ndarray, height: int, width: int) -> np.ndarray:
    """Bilinear (antialiased) resize of (H, W, 3) float pixels."""
    import keras

    out = keras.ops.image.resize(pixels[None], (height, width), interpolation="bilinear", antialias=True)
    return np.asarray(keras.ops.convert_to_numpy(out))[0]
