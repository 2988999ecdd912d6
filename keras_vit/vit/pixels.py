"""The input contract for images given as pixels: (H, W, C) arrays, channels last, values in [0, 255].

Every host-side entry point that takes pixels (`naflex_batch`, `keras_vit.analysis.images.preprocess_image`,
`ImagePreprocessing` on a NumPy batch, batch inference) checks them here, so a new entry point inherits the same
refusals and the same warning: an empty image or a channels-first array is refused naming its shape; floats all
inside [0, 1] (a `[0, 1]`-scaled image, which would land near the mean after normalisation) warn once per caller.
"""

from __future__ import annotations

import warnings

import numpy as np

CHANNELS = (1, 3, 4)


def check_image(image, where: str) -> np.ndarray:
    """`image` as a numpy array after the checks of one (H, W, C) pixel image; `where` names the entry point."""
    array = np.asarray(image)
    if array.ndim != 3:
        raise ValueError(f"{where} takes (H, W, C) images, got shape {array.shape}.")
    height, width, channels = array.shape
    if channels not in CHANNELS and height in CHANNELS:
        raise ValueError(
            f"{where} takes channels-last images (H, W, C); shape {array.shape} looks channels-first (C, H, W): "
            "transpose it (x.transpose(1, 2, 0))."
        )
    if height < 1 or width < 1 or channels < 1:
        raise ValueError(f"{where}: an empty image of shape {array.shape}; every side needs at least one pixel.")
    if array.dtype.kind not in "uif":
        raise ValueError(f"{where} takes numeric pixels, got dtype {array.dtype}.")
    if array.dtype.kind == "f" and not np.isfinite(array).all():
        raise ValueError(f"{where}: the image of shape {array.shape} holds NaN or infinite values.")
    return array


def warn_if_unit_range(arrays, where: str, owner=None) -> None:
    """Warns (once per `owner`, where given) when float `arrays` all lie inside [0, 1] with a positive value:
    pixels scaled to [0, 1] where [0, 255] is taken."""
    if owner is not None and getattr(owner, "_unit_range_warned", False):
        return
    floats = [a for a in arrays if a.dtype.kind == "f" and a.size]
    if not floats or len(floats) != len(arrays):
        return
    low = min(float(a.min()) for a in floats)
    high = max(float(a.max()) for a in floats)
    if 0 <= low and 0 < high <= 1:
        if owner is not None:
            owner._unit_range_warned = True
        warnings.warn(
            f"{where} takes pixels in [0, 255]; got floats in [0, 1]: multiply them by 255 first.", stacklevel=3
        )
