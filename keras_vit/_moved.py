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

# 0.2's `keras_vit.layers`: the layers now in one file each
LAYERS = (
    "keras_vit.nn.patch_embedding",
    "keras_vit.nn.class_token",
    "keras_vit.nn.encoder_block",
    "keras_vit.nn.encoder",
    "keras_vit.nn.mlp",
    "keras_vit.nn.attention",
    "keras_vit.nn.token_pooling",
    "keras_vit.nn.layer_norm",
    "keras_vit.nn.drop_path",
)

MOVED = {
    "keras_vit.arguments": ("keras_vit.vit.arguments",),
    "keras_vit.attention": ("keras_vit.nn.attention",),
    "keras_vit.configs": ("keras_vit.vit.table",),
    "keras_vit.initializers": ("keras_vit.nn.initializers",),
    "keras_vit.layers": LAYERS,
    "keras_vit.models": ("keras_vit.vit.model", "keras_vit.applications"),
    "keras_vit.position_embedding": ("keras_vit.nn.position_embedding",),
    "keras_vit.resnet": ("keras_vit.nn.resnet",),
    "keras_vit.sharding": ("keras_vit.vit.sharding",),
    "keras_vit.augreg": ("keras_vit.weights.augreg",),
    "keras_vit.checkpoints": ("keras_vit.weights.official", "keras_vit.weights.releases"),
    "keras_vit.layouts": (
        "keras_vit.weights.keys",
        "keras_vit.weights.big_vision",
        "keras_vit.weights.transformers_vit",
    ),
    "keras_vit.loading": ("keras_vit.weights.load",),
    "keras_vit.releases": ("keras_vit.weights.releases",),
    "keras_vit.safetensors_io": (
        "keras_vit.weights.safetensors_files",
        "keras_vit.weights.timm.state_dict",
        "keras_vit.weights.transformers_vit",
    ),
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
    # after 0.3.0 the layers assembled from the record joined them (one subpackage for every layer)
    "keras_vit.vit.layers": LAYERS,
    # and each framework's layout got a module (timm's a folder) of its own
    "keras_vit.weights.layouts": (
        "keras_vit.weights.keys",
        "keras_vit.weights.big_vision",
        "keras_vit.weights.transformers_vit",
    ),
    "keras_vit.weights.timm_layout": ("keras_vit.weights.timm.reader",),
    "keras_vit.weights.timm_out": ("keras_vit.weights.timm.writer",),
    "keras_vit.weights.timm_args": ("keras_vit.weights.timm.model_args",),
    "keras_vit.weights.timm_dirs": ("keras_vit.weights.timm.repository",),
    "keras_vit.vit.attention": ("keras_vit.nn.attention",),
    "keras_vit.vit.attention_core": ("keras_vit.nn.attention_core",),
    "keras_vit.vit.differential_attention": ("keras_vit.nn.differential_attention",),
    "keras_vit.vit.parallel_branches": ("keras_vit.nn.parallel_branches",),
    "keras_vit.vit.attention_pooling": ("keras_vit.nn.attention_pooling",),
    "keras_vit.vit.mlp": ("keras_vit.nn.mlp",),
    "keras_vit.vit.mlp_core": ("keras_vit.nn.mlp_core",),
    "keras_vit.vit.position_embedding": ("keras_vit.nn.position_embedding",),
    "keras_vit.vit.position_resampling": ("keras_vit.nn.position_resampling",),
    "keras_vit.vit.token_pooling": ("keras_vit.nn.token_pooling",),
    "keras_vit.vit.resnet": ("keras_vit.nn.resnet",),
    "keras_vit.vit.convolutional_stem": ("keras_vit.nn.convolutional_stem",),
    "keras_vit.vit.recompute": ("keras_vit.nn.recompute",),
    "keras_vit.vit.block_graph": ("keras_vit.nn.block_graph",),
}


FORWARDER = Forwarder(MOVED, "keras_vit 0.4")


def install() -> None:
    """Puts the forwarder of the old paths on `sys.meta_path` (once)."""
    FORWARDER.install()


def resolve(name: str) -> Optional[types.ModuleType]:
    """The (deprecated) module of an old path, imported on first use; None for any other name."""
    return FORWARDER.resolve(name)
