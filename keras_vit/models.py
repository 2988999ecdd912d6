"""The ViT builder and the `keras.applications`-style constructors (ViT_B16, ...).

`VisionTransformer` assembles the functional model from the layers in
`keras_vit.layers` (and `keras_vit.resnet` for hybrids); every named constructor
is that builder with a row of `keras_vit.configs.MODELS`.
"""

from __future__ import annotations

import os
import re
from typing import Optional, Sequence, Tuple, Union

import keras
import numpy as np

from keras_vit import configs
from keras_vit.layers import AddPositionEmbedding, ClassToken, Encoder, PatchEmbedding, TokenPooling
from keras_vit.resnet import ResNetStem

CLASSIFIERS = ("token", "gap")
POOLINGS = (None, "token", "avg", "max", "sequence")
DEFAULT_INPUT_SHAPE = (224, 224, 3)


def preprocess_input(x):
    """Maps pixels in [0, 255] (uint8 or float) to [-1, 1], the models' input range."""
    if isinstance(x, np.ndarray) or np.isscalar(x) or isinstance(x, (list, tuple)):
        return np.asarray(x, dtype="float32") / 127.5 - 1.0
    return keras.ops.cast(x, "float32") / 127.5 - 1.0


def _suggest(size: int, multiple: int) -> str:
    lower = max(multiple, size // multiple * multiple)
    return f"{lower} or {lower + multiple}"


def _validate_input_shape(input_shape, effective_patch: int) -> Tuple[int, int, int]:
    if input_shape is None:
        input_shape = DEFAULT_INPUT_SHAPE
    input_shape = tuple(input_shape)
    if len(input_shape) != 3:
        raise ValueError(f"input_shape must be (height, width, 3), got {input_shape}.")
    h, w, c = input_shape
    if c != 3:
        raise ValueError(f"input_shape must have 3 (RGB) channels in the last axis, got {c} "
                         f"in {input_shape}; convert grayscale images to RGB first.")
    if h is None or w is None:
        raise ValueError("input_shape needs a fixed height and width (position embeddings are "
                         f"sized to the patch grid), got {input_shape}.")
    bad = [(axis, s) for axis, s in (("height", h), ("width", w)) if s % effective_patch or s <= 0]
    if bad:
        detail = "; ".join(f"{axis} {s} (try {_suggest(s, effective_patch)})" for axis, s in bad)
        raise ValueError(f"input_shape {input_shape} is not divisible by the effective patch size "
                         f"{effective_patch}: {detail}.")
    return int(h), int(w), int(c)


def _default_name(patch_size, hidden_size, num_layers, resnet_layers) -> str:
    for config in configs.MODELS.values():
        if (config.patch_size, config.hidden_size, config.num_layers,
                config.resnet_layers) == (patch_size, hidden_size, num_layers, resnet_layers):
            return re.sub(r"[^A-Za-z0-9_-]", "_", config.name)
    return "vision_transformer"


def VisionTransformer(
    patch_size: int,
    hidden_size: int,
    mlp_dim: int,
    num_heads: int,
    num_layers: int,
    resnet_layers: Optional[Sequence[int]] = None,
    resnet_width: float = 1,
    include_top: bool = True,
    weights: Optional[str] = None,
    input_shape: Optional[Tuple[int, int, int]] = None,
    input_tensor=None,
    pooling: Optional[str] = None,
    classes: int = 1000,
    classifier_activation: Union[str, None] = "softmax",
    classifier: str = "token",
    representation_size: Optional[int] = None,
    dropout_rate: float = 0.0,
    attention_dropout_rate: float = 0.0,
    drop_path_rate: float = 0.0,
    include_preprocessing: bool = False,
    name: Optional[str] = None,
) -> keras.Model:
    """Builds a Vision Transformer (or an R-hybrid when `resnet_layers` is given).

    Args:
      patch_size: patch side in pixels (on the ResNet feature map for hybrids).
      hidden_size, mlp_dim, num_heads, num_layers: Transformer sizes (paper Table 1).
      resnet_layers: units per BiT-ResNet stage, e.g. (3, 4, 9); None for a plain ViT.
      resnet_width: ResNet width factor (root width 64 * factor).
      include_top: whether to end with the classification head.
      weights: None (random init), a path to a `.keras` / `.weights.h5` / official
        `.npz` file, or a released checkpoint name (see `keras_vit.checkpoints.available()`).
      input_shape: (height, width, 3); default (224, 224, 3). Height and width must be
        multiples of the effective patch size.
      input_tensor: optional Keras tensor to use as the model's input.
      pooling: with `include_top=False`: None -> the pre-logits vector (pooled per
        `classifier`, then the representation layer if any); "token" -> the class
        token; "avg" / "max" -> mean / max over patch tokens; "sequence" -> all tokens
        after the final LayerNorm, (batch, tokens, D).
      classes: number of classes of the head.
      classifier_activation: activation of the head ("softmax", None for logits, ...).
      classifier: "token" (class token) or "gap" (global average pooling, no class token).
      representation_size: width of the Dense+tanh pre-logits layer; None for none.
      dropout_rate, attention_dropout_rate: dropout after dense layers / on attention weights.
      drop_path_rate: stochastic depth of the last block (linear from 0).
      include_preprocessing: if True, inputs are pixels in [0, 255], rescaled inside.
      name: model name.

    Returns:
      A `keras.Model` taking images in [-1, 1] (or [0, 255]), NHWC.
    """
    if classifier not in CLASSIFIERS:
        raise ValueError(f"Unknown classifier {classifier!r}; expected one of {CLASSIFIERS}.")
    if pooling not in POOLINGS:
        raise ValueError(f"Unknown pooling {pooling!r}; expected one of {POOLINGS}.")
    if pooling == "token" and classifier != "token":
        raise ValueError("pooling='token' needs classifier='token' (a 'gap' model has no class token).")
    if representation_size is not None and int(representation_size) <= 0:
        raise ValueError(f"representation_size must be a positive integer or None, got {representation_size}.")
    if include_top and (classes is None or int(classes) <= 0):
        raise ValueError(f"classes must be a positive integer when include_top=True, got {classes}.")
    if hidden_size % num_heads:
        raise ValueError(f"hidden_size {hidden_size} must be divisible by num_heads {num_heads}.")
    for field, rate in (("dropout_rate", dropout_rate), ("attention_dropout_rate", attention_dropout_rate),
                        ("drop_path_rate", drop_path_rate)):
        if not 0.0 <= rate < 1.0:
            raise ValueError(f"{field} must be in [0, 1), got {rate}.")
    resnet_layers = tuple(resnet_layers) if resnet_layers else None
    effective_patch = patch_size * configs.resnet_stride(resnet_layers)

    if input_tensor is not None:
        if input_shape is None:
            input_shape = tuple(input_tensor.shape[1:])
        inputs = input_tensor if keras.backend.is_keras_tensor(input_tensor) else keras.Input(
            tensor=input_tensor)
    else:
        inputs = None
    h, w, c = _validate_input_shape(input_shape, effective_patch)
    if inputs is None:
        inputs = keras.Input(shape=(h, w, c), name="images")
    _check_weights_argument(weights)

    x = inputs
    if include_preprocessing:
        x = keras.layers.Rescaling(1.0 / 127.5, offset=-1.0, name="rescaling")(x)
    if resnet_layers:
        x = ResNetStem(resnet_layers, resnet_width, name="resnet")(x)
    x = PatchEmbedding(patch_size, hidden_size, name="embedding")(x)
    prefix = 1 if classifier == "token" else 0
    if prefix:
        x = ClassToken(name="cls")(x)
    grid = (h // effective_patch, w // effective_patch)
    x = AddPositionEmbedding(grid, prefix, name="posembed_input")(x)
    x = keras.layers.Dropout(dropout_rate, name="dropout")(x)
    x = Encoder(num_layers, num_heads, mlp_dim, dropout_rate, attention_dropout_rate,
                drop_path_rate, name="Transformer")(x)

    if not include_top and pooling == "sequence":
        outputs = x
    elif not include_top and pooling is not None:
        mode = {"token": "token", "avg": "gap", "max": "max"}[pooling]
        outputs = TokenPooling(mode, prefix, name="pooling")(x)
    else:
        x = TokenPooling(classifier, prefix, name="pooling")(x)
        if representation_size is not None:
            x = keras.layers.Dense(int(representation_size), activation="tanh",
                                   kernel_initializer=keras.initializers.LecunNormal(),
                                   name="pre_logits")(x)
        if include_top:
            x = keras.layers.Dense(int(classes), kernel_initializer="zeros", name="head")(x)
            if classifier_activation is not None:
                x = keras.layers.Activation(classifier_activation, dtype="float32",
                                            name="predictions")(x)
        outputs = x

    name = name or _default_name(patch_size, hidden_size, num_layers, resnet_layers)
    model = keras.Model(inputs, outputs, name=name)
    if weights is not None:
        load_weights(model, weights)
    return model


def _check_weights_argument(weights) -> None:
    if weights is None:
        return
    if not isinstance(weights, (str, os.PathLike)):
        raise ValueError(f"weights must be None, a file path or a release name, got {type(weights).__name__}.")
    weights = os.fspath(weights)
    from keras_vit import checkpoints  # local: checkpoints imports this module

    if checkpoints.is_release_name(weights):
        return
    if not os.path.exists(weights):
        raise FileNotFoundError(
            f"weights file {weights!r} does not exist (expected None, a path to a .keras, "
            f".weights.h5 or .npz file, or one of the release names "
            f"{', '.join(checkpoints.release_names())}).")


def load_weights(model: keras.Model, weights: str, **npz_kwargs) -> keras.Model:
    """Loads `weights` (.keras, .weights.h5, official .npz, or a release name) into `model`."""
    from keras_vit import checkpoints

    weights = os.fspath(weights)
    if checkpoints.is_release_name(weights):
        weights = checkpoints.fetch(weights, model)
    if weights.endswith(".npz"):
        checkpoints.load_npz(model, weights, **npz_kwargs)
    elif weights.endswith(".keras") or weights.endswith(".weights.h5"):
        model.load_weights(weights)
    else:
        raise ValueError(f"Unsupported weights file {weights!r}: expected a .keras, .weights.h5 or .npz file.")
    return model


def create_model(model_name: str, **kwargs) -> keras.Model:
    """Builds a model of the table by name: `create_model("ViT-B/16", classes=10)`.

    Names as in the paper ("ViT-B/16", "R50+ViT-B/16") or the checkpoints ("ViT-B_16");
    keywords as in `VisionTransformer`.
    """
    config = configs.get_config(model_name)
    if kwargs.get("name") is None:
        kwargs["name"] = re.sub(r"[^A-Za-z0-9_-]", "_", config.name)
    return VisionTransformer(**config.model_kwargs(), **kwargs)


def _constructor(model_name: str):
    config = configs.MODELS[model_name]

    def build(include_top: bool = True, weights: Optional[str] = None, input_shape=None,
              input_tensor=None, pooling: Optional[str] = None, classes: int = 1000,
              classifier_activation: Union[str, None] = "softmax", classifier: str = "token",
              representation_size: Optional[int] = None, dropout_rate: float = 0.0,
              attention_dropout_rate: float = 0.0, drop_path_rate: float = 0.0,
              include_preprocessing: bool = False, name: Optional[str] = None) -> keras.Model:
        return create_model(
            model_name, include_top=include_top, weights=weights, input_shape=input_shape,
            input_tensor=input_tensor, pooling=pooling, classes=classes,
            classifier_activation=classifier_activation, classifier=classifier,
            representation_size=representation_size, dropout_rate=dropout_rate,
            attention_dropout_rate=attention_dropout_rate, drop_path_rate=drop_path_rate,
            include_preprocessing=include_preprocessing, name=name)

    hybrid = (f" on a BiT-ResNet stem with stages {config.resnet_layers}"
              if config.is_hybrid else "")
    build.__doc__ = (
        f"Builds {config.name}: {config.num_layers} layers, D={config.hidden_size}, "
        f"MLP {config.mlp_dim}, {config.num_heads} heads, {config.effective_patch_size}x"
        f"{config.effective_patch_size} pixels per token{hybrid}.\n\n"
        "Keywords as in `keras_vit.VisionTransformer` (keras.applications vocabulary). "
        "Inputs are images in [-1, 1] unless include_preprocessing=True.")
    return build


ViT_Ti16 = _constructor("ViT-Ti/16")
ViT_S16 = _constructor("ViT-S/16")
ViT_S32 = _constructor("ViT-S/32")
ViT_B8 = _constructor("ViT-B/8")
ViT_B16 = _constructor("ViT-B/16")
ViT_B32 = _constructor("ViT-B/32")
ViT_L16 = _constructor("ViT-L/16")
ViT_L32 = _constructor("ViT-L/32")
ViT_H14 = _constructor("ViT-H/14")
R50_ViT_B16 = _constructor("R50+ViT-B/16")
R50_ViT_L32 = _constructor("R50+ViT-L/32")
R26_ViT_S32 = _constructor("R26+ViT-S/32")

for _fn, _n in ((ViT_Ti16, "ViT_Ti16"), (ViT_S16, "ViT_S16"), (ViT_S32, "ViT_S32"), (ViT_B8, "ViT_B8"),
                (ViT_B16, "ViT_B16"), (ViT_B32, "ViT_B32"), (ViT_L16, "ViT_L16"), (ViT_L32, "ViT_L32"),
                (ViT_H14, "ViT_H14"), (R50_ViT_B16, "R50_ViT_B16"), (R50_ViT_L32, "R50_ViT_L32"),
                (R26_ViT_S32, "R26_ViT_S32")):
    _fn.__name__ = _fn.__qualname__ = _n
