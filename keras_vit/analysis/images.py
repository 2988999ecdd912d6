"""Reading image files at their real bit depth, into the range a model expects.

PIL's `convert("RGB")` clips 16-bit grayscale (medical scans, microscopy) to white; here
16- and 32-bit integer images are scaled by their format's maximum, grayscale is repeated
to RGB and alpha is dropped.
"""

from __future__ import annotations

import os
from typing import Tuple

import numpy as np

from keras_vit.utils import validate

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


def preprocess_image(
    pixels: np.ndarray, data_config=None, size: Tuple[int, int] = (224, 224), normalize: bool = True
) -> np.ndarray:
    """The numpy / PIL reference of a data config (`keras_vit.DataConfig` or its dict): one image (H, W, C) in
    [0, 255] -> float32 (size[0], size[1], C), resized, centre-cropped and normalised as the checkpoint was
    evaluated. For runtimes that take the model's input only (ONNX, LiteRT, OpenVINO: `metadata.json` holds
    the data config). Antialiased resizes of 8-bit RGB images go through PIL, as timm and `transformers` do;
    other cases resample in float64 with the same kernels as `keras_vit.ImagePreprocessing`. `normalize=False`
    leaves the crop in [0, 255] (for a model built with `include_preprocessing`)."""
    from keras_vit.vit.data_config import DataConfig, center_crop_offset

    from keras_vit.vit import pixels as contract

    config = DataConfig.from_dict(data_config)
    image = contract.check_image(pixels, "preprocess_image")
    contract.warn_if_unit_range([image], "preprocess_image")
    if isinstance(size, (str, bytes)) or len(validate.integers("size", size)) != 2:
        raise ValueError(f"size must be (height, width), got {size!r}.")
    (rh, rw), size = config.resized_size(image.shape[0], image.shape[1], tuple(size)), tuple(size)
    if config.antialias and image.dtype == np.uint8 and image.shape[-1] == 3 and config.interpolation != "nearest":
        from PIL import Image

        filters = {"bilinear": Image.BILINEAR, "bicubic": Image.BICUBIC}
        resized = np.asarray(Image.fromarray(image).resize((rw, rh), filters[config.interpolation]), "float64")
    else:
        resized = _resample(_resample(image.astype("float64"), rw, 1, config), rh, 0, config)  # PIL's order
    top, left = center_crop_offset(rh, size[0]), center_crop_offset(rw, size[1])
    crop = resized[top : top + size[0], left : left + size[1]]
    if not normalize:
        return crop.astype("float32")
    mean, std = config.for_channels(crop.shape[-1])
    return ((crop / 255.0 - np.asarray(mean)) / np.asarray(std)).astype("float32")


def _resample(image: np.ndarray, out: int, axis: int, config) -> np.ndarray:
    """One axis of `image` resampled to `out` pixels with the data config's kernel: the weights of
    `keras_vit.nn.resampling.resampling_matrix` applied in float64 numpy (bicubic clipped after each pass,
    as PIL does)."""
    from keras_vit.nn.resampling import HOST, resampling_matrix

    n = image.shape[axis]  # in numpy: a new size compiles nothing (keras.ops on JAX would, per size)
    weights = np.asarray(resampling_matrix(n, out, 0, out, config.interpolation, config.antialias, HOST), "float64")
    resized = np.moveaxis(np.tensordot(weights, np.moveaxis(image, axis, 0), axes=1), 0, axis)
    return np.clip(resized, 0, 255) if config.interpolation == "bicubic" else resized
