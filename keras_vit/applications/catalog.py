"""`keras_vit.list_models`: every name keras_vit builds, from each catalogue: the paper's table and timm's
architectures (`keras_vit.vit.table`), and open_clip's pretrained image-text models
(`keras_vit.weights.open_clip_names`)."""

from __future__ import annotations

from typing import Optional

from keras_vit.vit import table


def list_models(family: Optional[str] = None) -> list:
    """Model names keras_vit builds: `family` None, "paper", "timm" or a timm family as
    `keras_vit.vit.table.list_models` takes them (image models, `create_model`), or "image-text": open_clip's
    pretrained image-text models whose two towers keras_vit builds, as "name:tag" (`load_open_clip`)."""
    if family == "image-text":
        from keras_vit.weights import open_clip_names

        return open_clip_names.list_image_text()
    return table.list_models(family)
