"""How a ViT's variables are laid out over a device mesh: `keras_vit.layout_map(model_or_config, mesh)`.

The Megatron pattern (Shoeybi et al., 2019) on the paper's anatomy: in each encoder block the query, key
and value projections are split by attention head and the output projection by its input heads, the MLP's
first Dense by its output units and the second by its input units, so each block needs one all-reduce
after attention and one after the MLP (the SwiGLU's gate is split as its first Dense). Embeddings, the class token, position embeddings, LayerNorms, the
ResNet stem and the head stay replicated. Optimizer slots follow their variable (Keras copies the layout).
"""

from __future__ import annotations

from typing import Union

import keras

from keras_vit.vit.table import ViTConfig, vit_config

# variable-path pattern (re.fullmatch) -> the mesh axis of each dimension, "model" standing for `model_axis`
_BLOCK = r"(?:.*/)?Transformer/encoderblock_\d+/"
MEGATRON = {
    _BLOCK + r"MultiHeadDotProductAttention_1/(?:query|key|value)/kernel": (None, "model", None),  # (D, H, Dh)
    _BLOCK + r"MultiHeadDotProductAttention_1/(?:query|key|value)/bias": ("model", None),  # (H, Dh)
    _BLOCK + r"MultiHeadDotProductAttention_1/out/kernel": ("model", None, None),  # (H, Dh, D)
    _BLOCK + r"MlpBlock_3/(?:Dense_0|gate)/kernel": (None, "model"),  # (D, mlp_dim); SwiGLU's two branches
    _BLOCK + r"MlpBlock_3/(?:Dense_0|gate)/bias": ("model",),
    _BLOCK + r"MlpBlock_3/Dense_1/kernel": ("model", None),  # (mlp_dim, D)
}


def _sizes(model_or_config) -> tuple:
    """(num_heads, mlp_dim) of a model, a `ViTConfig` or a model-table name."""
    if isinstance(model_or_config, str):
        model_or_config = vit_config(model_or_config)
    if isinstance(model_or_config, ViTConfig):
        return model_or_config.num_heads, model_or_config.mlp_dim
    config = getattr(model_or_config, "vit_config", None)
    if isinstance(config, ViTConfig):
        return config.num_heads, config.mlp_dim
    raise TypeError(
        "layout_map takes a keras_vit.VisionTransformer, a keras_vit.ViTConfig or a model name, "
        f"got {type(model_or_config).__name__}."
    )


def layout_map(
    model_or_config: Union[keras.Model, ViTConfig, str],
    mesh: "keras.distribution.DeviceMesh",
    *,
    model_axis: str = "model",
) -> "keras.distribution.LayoutMap":
    """A `keras.distribution.LayoutMap` sharding every encoder block over `mesh`'s `model_axis`.

    Use it with `keras.distribution.ModelParallel(layout_map=...)`; the batch goes on the mesh's other
    axis. The head count and the MLP width must split evenly over the model axis; the error says which
    does not. A layout map only names variable paths, so it serves any image size or class count.
    """
    if model_axis not in mesh.axis_names:
        raise ValueError(f"The mesh has axes {list(mesh.axis_names)}; model_axis={model_axis!r} is not one of them.")
    ways = mesh.shape[list(mesh.axis_names).index(model_axis)]
    heads, mlp_dim = _sizes(model_or_config)
    for what, size in (("num_heads", heads), ("mlp_dim", mlp_dim)):
        if size % ways:
            raise ValueError(
                f"{what}={size} does not split over the {ways} devices of mesh axis {model_axis!r}; "
                f"use a model axis that divides {size}."
            )
    layouts = keras.distribution.LayoutMap(mesh)
    for pattern, axes in MEGATRON.items():
        layouts[pattern] = tuple(model_axis if a == "model" else a for a in axes)
    return layouts
