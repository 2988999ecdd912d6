"""The `VisionTransformer` constructor's arguments: types, ranges and the rules that derive the rest.

Checked before any layer is built, so a bad keyword fails at the door instead of deep in the graph; the
model class keeps only the anatomy. Errors name the keyword and what would work.
"""

from __future__ import annotations

import warnings
from typing import Optional, Tuple

import keras

from keras_vit.utils import validate
from keras_vit.vit import table, timm_table
from keras_vit.nn.encoder_block import remat_mode
from keras_vit.vit.variant import Variant

CLASSIFIERS = ("token", "gap", "map")
POOLINGS = (None, "token", "avg", "max", "sequence")
DEFAULT_INPUT_SHAPE = (224, 224, 3)
DEFAULT_CLASSES = 1000


def _check_input_shape(input_shape, effective_patch: int) -> Tuple[Optional[int], Optional[int], int]:
    """(height, width, channels); None height/width: any size at call time (position embeddings resized)."""
    input_shape = validate.image_shape("input_shape", DEFAULT_INPUT_SHAPE if input_shape is None else input_shape)
    h, w, c = input_shape
    if c is None:
        raise ValueError(
            f"input_shape needs a known channel count (1 for grayscale, 3 for RGB, ...), got {input_shape}."
        )
    bad = [(axis, s) for axis, s in (("height", h), ("width", w)) if s is not None and s % effective_patch]
    if bad:
        detail = "; ".join(f"{axis} {s} (try {validate.nearest_multiples(s, effective_patch)})" for axis, s in bad)
        raise ValueError(
            f"input_shape {input_shape} is not divisible by the effective patch size {effective_patch}: {detail}."
        )
    return h, w, c


def position_grid_for(h, w, effective_patch: int, position_grid) -> Tuple[int, int]:
    """The stored position-embedding grid: the input's, or for a size-free axis `position_grid` (default: the
    grid of a 224-pixel side, where the released checkpoints were pre-trained)."""
    if position_grid is not None:
        position_grid = validate.integers("position_grid", position_grid)
        if len(position_grid) != 2:
            raise ValueError(f"position_grid must be (rows, cols), got {position_grid}.")
    default = max(1, DEFAULT_INPUT_SHAPE[0] // effective_patch)
    grid = []
    for i, size in enumerate((h, w)):
        if size is None:
            grid.append(position_grid[i] if position_grid is not None else default)
        else:
            if position_grid is not None and position_grid[i] != size // effective_patch:
                raise ValueError(
                    f"position_grid {tuple(position_grid)} disagrees with the fixed input size "
                    f"{(h, w)}; it is only for size-free (None) axes."
                )
            grid.append(size // effective_patch)
    return tuple(grid)


def model_inputs(input_shape, input_tensor, effective_patch: int) -> tuple:
    """(the model's input tensor, (H, W)) after checking the size against the patch grid."""
    if input_tensor is not None and input_shape is None:
        input_shape = tuple(input_tensor.shape[1:])
    h, w, c = _check_input_shape(input_shape, effective_patch)
    if input_tensor is None:
        return keras.Input(shape=(h, w, c), name="images"), (h, w, c)
    if not keras.backend.is_keras_tensor(input_tensor):
        input_tensor = keras.Input(tensor=input_tensor)
    return input_tensor, (h, w, c)


def check_arguments(
    sizes: dict,
    resnet_layers,
    resnet_width,
    flags: dict,
    classifier,
    pooling,
    representation_size,
    classes,
    rates: dict,
) -> tuple:
    """The constructor's keywords after type and range checks."""
    sizes = {field: validate.integer(field, v) for field, v in sizes.items()}
    if resnet_layers is not None:
        resnet_layers = validate.integers("resnet_layers", resnet_layers, allow_empty=True)  # (): root only
    resnet_width = validate.number("resnet_width", resnet_width, positive=True)
    for field, v in flags.items():
        remat_mode(v) if field == "remat" else validate.boolean(field, v)  # remat: also "attention"
    validate.choice("classifier", classifier, CLASSIFIERS)
    validate.choice("pooling", pooling, POOLINGS)
    if pooling == "token" and classifier != "token":
        raise ValueError(f"pooling='token' needs classifier='token' (a {classifier!r} model has no class token).")
    representation_size = validate.integer("representation_size", representation_size, allow_none=True)
    classes = validate.integer("classes", classes, allow_none=True)
    if sizes["hidden_size"] % sizes["num_heads"]:
        raise ValueError(f"hidden_size {sizes['hidden_size']} must be divisible by num_heads {sizes['num_heads']}.")
    rates = {field: validate.rate(field, r) for field, r in rates.items()}
    return sizes, resnet_layers, resnet_width, representation_size, classes, rates


SIZES = tuple(f for f in table.SIZE_FIELDS if not f.startswith("resnet"))  # the Transformer's own


def resolve_arguments(architecture: dict, variant, options: dict, use: dict, keywords) -> dict:
    """The constructor's sizes, record and head after `variant` (a record, its dict, or a registered name that
    also supplies sizes, classifier, input size, head and data config, each overridable) and the record's fields
    given as keywords (`options`). Any other keyword (not one of the constructor's `keywords` nor a field of the
    record) is refused by name with the closest valid one;
    `weights=` is refused naming the loaders (the model class reads no files)."""
    options = dict(options)
    if options.pop("weights", None) is not None:
        raise ValueError(
            "VisionTransformer builds a model; it reads no files: use keras_vit.create_model(name, weights=...) or "
            "keras_vit.load_model(source)."
        )
    gelu_approximate = options.pop("gelu_approximate", None)
    if gelu_approximate is not None:
        warnings.warn(
            'gelu_approximate is deprecated: use activation="gelu_tanh" (True) or "gelu" (False).',
            DeprecationWarning,
            stacklevel=3,
        )
    validate.refuse_unknown("VisionTransformer", options, set(keywords) | set(Variant.fields()))
    named = _named_architecture(variant) if isinstance(variant, str) else {}
    record = {k: v for k, v in named.items() if k in Variant.fields()}
    record.update(Variant.flatten(None if isinstance(variant, str) else variant))
    record.update(options)
    if gelu_approximate is not None:
        record["gelu_approximate"] = gelu_approximate
    out = {"variant": record, "sizes": {}}
    for field in SIZES:
        value = architecture[field] if architecture[field] is not None else named.get(field)
        if value is None:
            raise ValueError(
                f"VisionTransformer needs {field} (the sizes {', '.join(SIZES)}), or variant= a registered "
                "architecture name that supplies them."
            )
        out["sizes"][field] = value
    out["resnet_layers"] = (
        architecture["resnet_layers"] if architecture["resnet_layers"] is not None else named.get("resnet_layers")
    )
    out["resnet_width"] = (
        architecture["resnet_width"] if architecture["resnet_width"] != 1 else named.get("resnet_width", 1)
    )
    for key, default in (
        ("classifier", "token"),
        ("input_shape", None),
        ("classes", None),
        ("data_config", None),
        ("representation_size", None),
    ):
        out[key] = use[key] if use[key] is not None else named.get(key, default)
    headless = named.get("include_top") is False and use["classes"] is None  # a named feature extractor
    out["include_top"] = False if headless else use["include_top"]
    return out


def _named_architecture(name: str) -> dict:
    """The keywords a registered architecture name stands for: the paper's table ("ViT-B/16": its sizes) or
    timm's ("vit_small_patch16_dinov3": sizes, record, classifier, input, head and timm's data config)."""

    try:
        return table.vit_config(name).model_kwargs()
    except ValueError:
        pass
    arguments = timm_table.model_kwargs(name)  # a ValueError naming the closest registered names
    arguments["data_config"] = timm_table.data_config(name)
    return arguments
