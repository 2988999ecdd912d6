"""The `keras.applications`-style constructors (`ViT_B16`, ...) and `create_model` by name.

Each constructor builds one row of the model table (`keras_vit.vit.table.MODELS`) as a
`keras_vit.VisionTransformer`, then applies `weights=` through `keras_vit.weights` (the model
class itself does no file I/O). A release's own head size is resolved before building.
"""

from keras_vit.applications.create import create_model
from keras_vit.applications.paper_models import (
    ViT_Ti16,
    ViT_S16,
    ViT_S32,
    ViT_B8,
    ViT_B16,
    ViT_B32,
    ViT_L16,
    ViT_L32,
    ViT_H14,
    R50_ViT_B16,
    R50_ViT_B32,
    R50_ViT_L16,
    R50_ViT_L32,
    R26_ViT_S32,
    R26_ViT_B32,
    R_ViT_Ti16,
)

__all__ = [
    "create_model",
    "ViT_Ti16",
    "ViT_S16",
    "ViT_S32",
    "ViT_B8",
    "ViT_B16",
    "ViT_B32",
    "ViT_L16",
    "ViT_L32",
    "ViT_H14",
    "R50_ViT_B16",
    "R50_ViT_B32",
    "R50_ViT_L16",
    "R50_ViT_L32",
    "R26_ViT_S32",
    "R26_ViT_B32",
    "R_ViT_Ti16",
]
