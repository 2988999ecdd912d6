"""The module paths of keras_vit 0.2, kept working for one release with a DeprecationWarning.

0.3 moved the flat package into subpackages (`vit/`, `weights/`, `analysis/`, `utils/`). Importing an old path
(`import keras_vit.checkpoints`, `from keras_vit.loading import load_model`, `python -m keras_vit.inspect`)
gives a module that forwards every attribute to the new modules listed here, in order
(`keras_vit.utils.moved`).
"""

from __future__ import annotations

import types
from typing import Optional

from keras_vit.utils.moved import Forwarder

MOVED = {
    "keras_vit.arguments": ("keras_vit.vit.arguments",),
    "keras_vit.attention": ("keras_vit.vit.attention",),
    "keras_vit.configs": ("keras_vit.vit.table",),
    "keras_vit.initializers": ("keras_vit.nn.initializers",),
    "keras_vit.layers": ("keras_vit.vit.layers",),
    "keras_vit.models": ("keras_vit.vit.model", "keras_vit.applications"),
    "keras_vit.position_embedding": ("keras_vit.vit.position_embedding",),
    "keras_vit.resnet": ("keras_vit.vit.resnet",),
    "keras_vit.sharding": ("keras_vit.vit.sharding",),
    "keras_vit.augreg": ("keras_vit.weights.augreg",),
    "keras_vit.checkpoints": ("keras_vit.weights.official", "keras_vit.weights.releases"),
    "keras_vit.layouts": ("keras_vit.weights.layouts",),
    "keras_vit.loading": ("keras_vit.weights.load",),
    "keras_vit.releases": ("keras_vit.weights.releases",),
    "keras_vit.safetensors_io": ("keras_vit.weights.safetensors_files",),
    "keras_vit.fewshot": ("keras_vit.analysis.fewshot",),
    "keras_vit.images": ("keras_vit.analysis.images",),
    "keras_vit.inspect": ("keras_vit.analysis.inspect",),
    "keras_vit.plots": ("keras_vit.analysis.plots",),
    "keras_vit.summary": ("keras_vit.analysis.summary",),
    "keras_vit.atomic": ("keras_vit.utils.atomic",),
    "keras_vit.validate": ("keras_vit.utils.validate",),
    # after 0.3.0 the building blocks moved to a subpackage of their own (`keras_vit.nn`)
    "keras_vit.vit.specs": ("keras_vit.nn.specs",),
    "keras_vit.vit.initializers": ("keras_vit.nn.initializers",),
    "keras_vit.vit.layer_norm": ("keras_vit.nn.layer_norm",),
    "keras_vit.vit.layer_scale": ("keras_vit.nn.layer_scale",),
}


FORWARDER = Forwarder(MOVED, "keras_vit 0.4")


def install() -> None:
    """Puts the forwarder of the old paths on `sys.meta_path` (once)."""
    FORWARDER.install()


def resolve(name: str) -> Optional[types.ModuleType]:
    """The (deprecated) module of an old path, imported on first use; None for any other name."""
    return FORWARDER.resolve(name)
