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


def preprocess_image(pixels, data_config=None, size=(224, 224)) -> np.ndarray:
    """The numpy / PIL reference of a data config (`keras_vit.DataConfig` or its dict): one image (H, W, C) in
    [0, 255] -> float32 (size[0], size[1], C), resized, centre-cropped and normalised as the checkpoint was
    evaluated. For runtimes that take the model's input only (ONNX, LiteRT, OpenVINO: `metadata.json` holds
    the data config). Antialiased resizes of 8-bit RGB images go through PIL, as timm and `transformers` do;
    other cases resample in float64 with the same kernels as `keras_vit.ImagePreprocessing`."""
    from keras_vit.vit.data_config import DataConfig, center_crop_offset

    config = DataConfig.from_dict(data_config)
    image = np.asarray(pixels)
    if image.ndim != 3:
        raise ValueError(f"preprocess_image takes one (H, W, C) image, got shape {image.shape}.")
    (rh, rw), size = config.resized_size(image.shape[0], image.shape[1], tuple(size)), tuple(size)
    if config.antialias and image.dtype == np.uint8 and image.shape[-1] == 3 and config.interpolation != "nearest":
        from PIL import Image

        filters = {"bilinear": Image.BILINEAR, "bicubic": Image.BICUBIC}
        resized = np.asarray(Image.fromarray(image).resize((rw, rh), filters[config.interpolation]), "float64")
    else:
        resized = _resample(_resample(image.astype("float64"), rw, 1, config), rh, 0, config)  # PIL's order
    top, left = center_crop_offset(rh, size[0]), center_crop_offset(rw, size[1])
    crop = resized[top:top + size[0], left:left + size[1]]
    mean, std = config.for_channels(crop.shape[-1])
    return ((crop / 255.0 - np.asarray(mean)) / np.asarray(std)).astype("float32")


def _resample(image: np.ndarray, out: int, axis: int, config) -> np.ndarray:
    """One axis of `image` resampled to `out` pixels by the data config's kernel (PIL's and TensorFlow's
    separable scheme: normalised kernel weights, widened by the downscale factor when antialiasing)."""
    n = image.shape[axis]
    scale = n / out
    centers = (np.arange(out) + 0.5) * scale
    positions = np.arange(n) + 0.5
    if config.interpolation == "nearest":
        weights = (np.arange(n)[None, :] == np.minimum(np.floor(centers), n - 1)[:, None]).astype("float64")
    else:
        x = np.abs(positions[None, :] - centers[:, None]) / (max(scale, 1.0) if config.antialias else 1.0)
        if config.interpolation == "bilinear":
            weights = np.maximum(1.0 - x, 0.0)
        else:  # Keys bicubic, a = -0.5
            a = -0.5
            weights = np.where(x < 1, ((a + 2) * x - (a + 3)) * x * x + 1,
                               np.where(x < 2, ((a * x - 5 * a) * x + 8 * a) * x - 4 * a, 0.0))
        weights = weights / weights.sum(axis=1, keepdims=True)
    out_image = np.tensordot(weights, np.moveaxis(image, axis, 0), axes=1)
    out_image = np.moveaxis(out_image, 0, axis)
    return np.clip(out_image, 0, 255) if config.interpolation == "bicubic" else out_image
