"""`keras_vit.list_models`: every name keras_vit builds, from each catalogue: the paper's table and timm's
architectures (`keras_vit.vit.table`), and open_clip's pretrained image-text models
(`keras_vit.weights.open_clip_names`)."""

from __future__ import annotations

from typing import Optional

from keras_vit.vit import table


def list_models(family: Optional[str] = None) -> list:
    """Model names keras_vit builds. None or "paper": the paper's table, in its order (`create_model`); "timm":
    every timm architecture keras_vit builds; a family ("vit", "deit", "deit3", "dinov2", "dinov3", "eva02", "pe",
    "rope", "aimv2", "clip", "siglip", "siglip2", "gap", "hybrid", "mobileclip", "naflex"): the timm architectures
    of that family, image towers (`create_model`; "siglip2": those with SigLIP 2 weights); "image-text": open_clip's
    pretrained image-text models whose two towers keras_vit builds, as "name:tag" (`load_open_clip`)."""
    if family == "image-text":
        from keras_vit.weights import open_clip_names

        return open_clip_names.list_image_text()
    return table.list_models(family)
