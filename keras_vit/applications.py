"""The `keras.applications`-style constructors (`ViT_B16`, ...) and `create_model` by name.

Each constructor builds one row of the model table (`keras_vit.vit.table.MODELS`) as a
`keras_vit.VisionTransformer`, then applies `weights=` through `keras_vit.weights` (the model
class itself does no file I/O). A release's own head size is resolved here, before building.
"""

from __future__ import annotations

from typing import Optional, Sequence, Tuple, Union

from keras_vit.utils import validate
from keras_vit.vit import table, timm_table
from keras_vit.nn.initializers import weights_follow
from keras_vit.vit.model import VisionTransformer
from keras_vit.weights import load

_ARGS = """
    Reference: "An Image is Worth 16x16 Words: Transformers for Image Recognition at Scale" (Dosovitskiy et
    al., ICLR 2021); AugReg variants from "How to train your ViT?" (Steiner et al., 2022).

    Args:
      include_top: whether to end with the classification head.
      weights: None (random initialisation) or a weight source: a release name ("imagenet21k",
        "imagenet21k+imagenet2012", "augreg_in21k", "augreg_in21k_ft_in1k", "augreg_in21k_ft_in1k_384",
        "sam"; all: `keras_vit.weights.releases.release_names()`) or an AugReg filename, an official or
        big_vision `.npz`, a `.keras` model, a `.weights.h5` file, a timm `.safetensors` state dict, or a
        `transformers` ViT directory. Position embeddings are resized to `input_shape`; a head of another
        size is zero-initialised (with a warning).
      input_shape: (height, width, channels), default (224, 224, 3); height and width multiples of the
        effective patch size. None height/width: any size at call time. Any channel count; RGB weights
        are adapted to it.
      input_tensor: optional Keras tensor to use as the model's input.
      pooling: with `include_top=False`: None (the pre-logits vector), "token", "avg", "max" or "sequence".
      classes: head size; unset: 1000, or with a released checkpoint its own head.
      classifier_activation: the head's activation ("softmax"; None for logits).
      classifier: "token" (class token) or "gap" (global average pooling, no class token).
      representation_size: width of a Dense+tanh pre-logits layer; None for none.
      dropout_rate: dropout after the embeddings and each dense layer.
      attention_dropout_rate: dropout on the attention probabilities.
      drop_path_rate: stochastic depth of the last block (linear from 0 over the blocks).
      include_preprocessing: True: inputs are pixels in [0, 255], normalised inside per `data_config`.
      gelu_approximate: the MLP's GELU in tanh form (True, the original code) or exact (False, timm).
      position_grid: (rows, cols) of the stored position embeddings of an any-size model.
      name: the model's name (default: the table name, e.g. "ViT-B_16").
      dtype: dtype policy of every layer (e.g. "mixed_bfloat16"; default: the global policy).
      trainable: False freezes every weight.
      remat: True recomputes each encoder block in the backward pass (`keras.remat`): less training
        memory, same gradients; "attention" recomputes only the attention probabilities.
      data_config: the checkpoint's evaluation preprocessing (`keras_vit.DataConfig` or its dict); default:
        what `weights` implies, else the original code's (square resize, [-1, 1]). `model.preprocessor()`
        applies it.
      The ViT family's variations, each defaulting to the paper's model (`keras_vit.vit.variant.Variant`):
      layer_scale_init: LayerScale (DeiT-III, DINOv2) initialised to this value; None for none.
      prefix_position_embedding: False: the prefix tokens are prepended after the position embeddings
        (DeiT-III, DINOv2).
      activation: the MLP's: "gelu_tanh" (default), "gelu" (exact) or "quick_gelu" (OpenAI CLIP).
      layer_norm_epsilon: every LayerNorm's epsilon (CLIP: 1e-5).
      num_register_tokens: DINOv2's register tokens.
      distillation_token: DeiT's distillation token and head (the two heads' logits averaged).
      pre_norm: a LayerNorm on the embeddings (CLIP).
      fc_norm: the final LayerNorm after pooling instead of before (MAE, EVA).
      final_norm: False: no final LayerNorm at all (RADIO, InternViT).
      qk_norm: LayerNorm on each head's queries and keys.
      qkv_bias: biases of the query/key/value projections.
      patch_bias: a bias in the patch embedding (CLIP has none).
      class_token: True keeps a class token in a "gap" / "map" model (EVA).
      stem_numerics: a hybrid stem's numerics, "original" or "timm".
      position_interpolation: how position embeddings are resized: "linear" (the original code's) or "bicubic"
        (timm's).

    Returns:
      A `keras_vit.VisionTransformer` (a `keras.Model`).
"""


def create_model(model_name: str, *, weights=None, classes: Optional[int] = None,
                 representation_size: Optional[int] = None, **kwargs) -> VisionTransformer:
    """Builds a model by name: `create_model("ViT-B/16", classes=10)`, `create_model("vit_small_patch14_dinov2")`.

    Names as in the paper ("ViT-B/16", "R50+ViT-B/16") or the checkpoints ("ViT-B_16"), or a timm architecture
    of the ViT family (`keras_vit.list_models("timm")`; a pretrained tag after "." is ignored), built with timm's
    defaults (image size, head, norms, activation) unless a keyword says otherwise. `weights` and the other
    keywords as in `keras_vit.ViT_B16`. A release name without `classes` gives the release's own head.
    """
    timm_spelling = isinstance(model_name, str) and model_name == model_name.lower() and "_" in model_name
    if (timm_table.is_timm_name(model_name) or timm_spelling) and not _is_table_name(model_name):
        arguments = timm_table.model_kwargs(model_name)
        classes = validate.integer("classes", classes, allow_none=True)
        if classes is not None:
            arguments.update(classes=classes, include_top=True)
        arguments.update(kwargs)
        source = load.read_source(weights, None, arguments["num_heads"]) or weights  # read once, used thrice
        if arguments.get("data_config") is None and weights is not None:
            arguments["data_config"] = load.data_config(source, None)
        with weights_follow(weights is not None):  # assigned from `weights` next: no random draws first
            model = VisionTransformer(**arguments, representation_size=representation_size)
        return load.load_weights(model, source)
    config = table.vit_config(model_name)
    classes, representation_size = load.head_size(weights, config.name, classes, representation_size)  # no read
    source = load.read_source(weights, config.name, kwargs.get("num_heads", config.num_heads)) or weights
    if kwargs.get("data_config") is None:
        kwargs["data_config"] = load.data_config(source, config.name)
    with weights_follow(weights is not None):
        model = VisionTransformer(**config.model_kwargs(), classes=classes, representation_size=representation_size,
                                  **kwargs)
    return load.load_weights(model, source)


def _is_table_name(name) -> bool:
    try:
        table.vit_config(name)
        return True
    except ValueError:
        return False


def _variant(model_name: str):
    """Gives the constructor below it the docstring of `model_name`'s row of the table."""
    config = table.MODELS[model_name]

    def document(function):
        hybrid = f" on a BiT-ResNet stem with stages {config.resnet_layers}" if config.is_hybrid else ""
        function.__doc__ = (
            f"Builds {config.name}: {config.num_layers} layers, D={config.hidden_size}, MLP {config.mlp_dim}, "
            f"{config.num_heads} heads, {config.effective_patch_size}x{config.effective_patch_size} pixels per "
            f"token{hybrid}.\n" + _ARGS)
        return function

    return document


Shape = Optional[Tuple[Optional[int], Optional[int], int]]
Grid = Optional[Sequence[int]]


@_variant("ViT-Ti/16")
def ViT_Ti16(include_top: bool = True, weights=None, input_shape: Shape = None, input_tensor=None,
             pooling: Optional[str] = None, classes: Optional[int] = None,
             classifier_activation: Union[str, None] = "softmax", classifier: str = "token",
             representation_size: Optional[int] = None, dropout_rate: float = 0.0,
             attention_dropout_rate: float = 0.0, drop_path_rate: float = 0.0, include_preprocessing: bool = False,
             gelu_approximate: Optional[bool] = None, position_grid: Grid = None, name: Optional[str] = None,
             dtype=None, trainable: bool = True, remat: Union[bool, str] = False, data_config=None,
             layer_scale_init: Optional[float] = None, prefix_position_embedding: bool = True,
             activation: Optional[str] = None, layer_norm_epsilon: float = 1e-6, num_register_tokens: int = 0,
             distillation_token: bool = False, pre_norm: bool = False, fc_norm: bool = False, qk_norm: bool = False,
             qkv_bias: bool = True, patch_bias: bool = True, class_token: Optional[bool] = None,
             stem_numerics: str = "original", position_interpolation: str = "linear",
             final_norm: bool = True) -> VisionTransformer:
    return create_model("ViT-Ti/16", **locals())


@_variant("ViT-S/16")
def ViT_S16(include_top: bool = True, weights=None, input_shape: Shape = None, input_tensor=None,
            pooling: Optional[str] = None, classes: Optional[int] = None,
            classifier_activation: Union[str, None] = "softmax", classifier: str = "token",
            representation_size: Optional[int] = None, dropout_rate: float = 0.0, attention_dropout_rate: float = 0.0,
            drop_path_rate: float = 0.0, include_preprocessing: bool = False, gelu_approximate: Optional[bool] = None,
            position_grid: Grid = None, name: Optional[str] = None, dtype=None, trainable: bool = True,
            remat: Union[bool, str] = False, data_config=None, layer_scale_init: Optional[float] = None,
            prefix_position_embedding: bool = True, activation: Optional[str] = None,
            layer_norm_epsilon: float = 1e-6, num_register_tokens: int = 0, distillation_token: bool = False,
            pre_norm: bool = False, fc_norm: bool = False, qk_norm: bool = False, qkv_bias: bool = True,
            patch_bias: bool = True, class_token: Optional[bool] = None, stem_numerics: str = "original",
            position_interpolation: str = "linear", final_norm: bool = True) -> VisionTransformer:
    return create_model("ViT-S/16", **locals())


@_variant("ViT-S/32")
def ViT_S32(include_top: bool = True, weights=None, input_shape: Shape = None, input_tensor=None,
            pooling: Optional[str] = None, classes: Optional[int] = None,
            classifier_activation: Union[str, None] = "softmax", classifier: str = "token",
            representation_size: Optional[int] = None, dropout_rate: float = 0.0, attention_dropout_rate: float = 0.0,
            drop_path_rate: float = 0.0, include_preprocessing: bool = False, gelu_approximate: Optional[bool] = None,
            position_grid: Grid = None, name: Optional[str] = None, dtype=None, trainable: bool = True,
            remat: Union[bool, str] = False, data_config=None, layer_scale_init: Optional[float] = None,
            prefix_position_embedding: bool = True, activation: Optional[str] = None,
            layer_norm_epsilon: float = 1e-6, num_register_tokens: int = 0, distillation_token: bool = False,
            pre_norm: bool = False, fc_norm: bool = False, qk_norm: bool = False, qkv_bias: bool = True,
            patch_bias: bool = True, class_token: Optional[bool] = None, stem_numerics: str = "original",
            position_interpolation: str = "linear", final_norm: bool = True) -> VisionTransformer:
    return create_model("ViT-S/32", **locals())


@_variant("ViT-B/8")
def ViT_B8(include_top: bool = True, weights=None, input_shape: Shape = None, input_tensor=None,
           pooling: Optional[str] = None, classes: Optional[int] = None,
           classifier_activation: Union[str, None] = "softmax", classifier: str = "token",
           representation_size: Optional[int] = None, dropout_rate: float = 0.0, attention_dropout_rate: float = 0.0,
           drop_path_rate: float = 0.0, include_preprocessing: bool = False, gelu_approximate: Optional[bool] = None,
           position_grid: Grid = None, name: Optional[str] = None, dtype=None, trainable: bool = True,
           remat: Union[bool, str] = False, data_config=None, layer_scale_init: Optional[float] = None,
           prefix_position_embedding: bool = True, activation: Optional[str] = None, layer_norm_epsilon: float = 1e-6,
           num_register_tokens: int = 0, distillation_token: bool = False, pre_norm: bool = False,
           fc_norm: bool = False, qk_norm: bool = False, qkv_bias: bool = True, patch_bias: bool = True,
           class_token: Optional[bool] = None, stem_numerics: str = "original",
           position_interpolation: str = "linear", final_norm: bool = True) -> VisionTransformer:
    return create_model("ViT-B/8", **locals())


@_variant("ViT-B/16")
def ViT_B16(include_top: bool = True, weights=None, input_shape: Shape = None, input_tensor=None,
            pooling: Optional[str] = None, classes: Optional[int] = None,
            classifier_activation: Union[str, None] = "softmax", classifier: str = "token",
            representation_size: Optional[int] = None, dropout_rate: float = 0.0, attention_dropout_rate: float = 0.0,
            drop_path_rate: float = 0.0, include_preprocessing: bool = False, gelu_approximate: Optional[bool] = None,
            position_grid: Grid = None, name: Optional[str] = None, dtype=None, trainable: bool = True,
            remat: Union[bool, str] = False, data_config=None, layer_scale_init: Optional[float] = None,
            prefix_position_embedding: bool = True, activation: Optional[str] = None,
            layer_norm_epsilon: float = 1e-6, num_register_tokens: int = 0, distillation_token: bool = False,
            pre_norm: bool = False, fc_norm: bool = False, qk_norm: bool = False, qkv_bias: bool = True,
            patch_bias: bool = True, class_token: Optional[bool] = None, stem_numerics: str = "original",
            position_interpolation: str = "linear", final_norm: bool = True) -> VisionTransformer:
    return create_model("ViT-B/16", **locals())


@_variant("ViT-B/32")
def ViT_B32(include_top: bool = True, weights=None, input_shape: Shape = None, input_tensor=None,
            pooling: Optional[str] = None, classes: Optional[int] = None,
            classifier_activation: Union[str, None] = "softmax", classifier: str = "token",
            representation_size: Optional[int] = None, dropout_rate: float = 0.0, attention_dropout_rate: float = 0.0,
            drop_path_rate: float = 0.0, include_preprocessing: bool = False, gelu_approximate: Optional[bool] = None,
            position_grid: Grid = None, name: Optional[str] = None, dtype=None, trainable: bool = True,
            remat: Union[bool, str] = False, data_config=None, layer_scale_init: Optional[float] = None,
            prefix_position_embedding: bool = True, activation: Optional[str] = None,
            layer_norm_epsilon: float = 1e-6, num_register_tokens: int = 0, distillation_token: bool = False,
            pre_norm: bool = False, fc_norm: bool = False, qk_norm: bool = False, qkv_bias: bool = True,
            patch_bias: bool = True, class_token: Optional[bool] = None, stem_numerics: str = "original",
            position_interpolation: str = "linear", final_norm: bool = True) -> VisionTransformer:
    return create_model("ViT-B/32", **locals())


@_variant("ViT-L/16")
def ViT_L16(include_top: bool = True, weights=None, input_shape: Shape = None, input_tensor=None,
            pooling: Optional[str] = None, classes: Optional[int] = None,
            classifier_activation: Union[str, None] = "softmax", classifier: str = "token",
            representation_size: Optional[int] = None, dropout_rate: float = 0.0, attention_dropout_rate: float = 0.0,
            drop_path_rate: float = 0.0, include_preprocessing: bool = False, gelu_approximate: Optional[bool] = None,
            position_grid: Grid = None, name: Optional[str] = None, dtype=None, trainable: bool = True,
            remat: Union[bool, str] = False, data_config=None, layer_scale_init: Optional[float] = None,
            prefix_position_embedding: bool = True, activation: Optional[str] = None,
            layer_norm_epsilon: float = 1e-6, num_register_tokens: int = 0, distillation_token: bool = False,
            pre_norm: bool = False, fc_norm: bool = False, qk_norm: bool = False, qkv_bias: bool = True,
            patch_bias: bool = True, class_token: Optional[bool] = None, stem_numerics: str = "original",
            position_interpolation: str = "linear", final_norm: bool = True) -> VisionTransformer:
    return create_model("ViT-L/16", **locals())


@_variant("ViT-L/32")
def ViT_L32(include_top: bool = True, weights=None, input_shape: Shape = None, input_tensor=None,
            pooling: Optional[str] = None, classes: Optional[int] = None,
            classifier_activation: Union[str, None] = "softmax", classifier: str = "token",
            representation_size: Optional[int] = None, dropout_rate: float = 0.0, attention_dropout_rate: float = 0.0,
            drop_path_rate: float = 0.0, include_preprocessing: bool = False, gelu_approximate: Optional[bool] = None,
            position_grid: Grid = None, name: Optional[str] = None, dtype=None, trainable: bool = True,
            remat: Union[bool, str] = False, data_config=None, layer_scale_init: Optional[float] = None,
            prefix_position_embedding: bool = True, activation: Optional[str] = None,
            layer_norm_epsilon: float = 1e-6, num_register_tokens: int = 0, distillation_token: bool = False,
            pre_norm: bool = False, fc_norm: bool = False, qk_norm: bool = False, qkv_bias: bool = True,
            patch_bias: bool = True, class_token: Optional[bool] = None, stem_numerics: str = "original",
            position_interpolation: str = "linear", final_norm: bool = True) -> VisionTransformer:
    return create_model("ViT-L/32", **locals())


@_variant("ViT-H/14")
def ViT_H14(include_top: bool = True, weights=None, input_shape: Shape = None, input_tensor=None,
            pooling: Optional[str] = None, classes: Optional[int] = None,
            classifier_activation: Union[str, None] = "softmax", classifier: str = "token",
            representation_size: Optional[int] = None, dropout_rate: float = 0.0, attention_dropout_rate: float = 0.0,
            drop_path_rate: float = 0.0, include_preprocessing: bool = False, gelu_approximate: Optional[bool] = None,
            position_grid: Grid = None, name: Optional[str] = None, dtype=None, trainable: bool = True,
            remat: Union[bool, str] = False, data_config=None, layer_scale_init: Optional[float] = None,
            prefix_position_embedding: bool = True, activation: Optional[str] = None,
            layer_norm_epsilon: float = 1e-6, num_register_tokens: int = 0, distillation_token: bool = False,
            pre_norm: bool = False, fc_norm: bool = False, qk_norm: bool = False, qkv_bias: bool = True,
            patch_bias: bool = True, class_token: Optional[bool] = None, stem_numerics: str = "original",
            position_interpolation: str = "linear", final_norm: bool = True) -> VisionTransformer:
    return create_model("ViT-H/14", **locals())


@_variant("R50+ViT-B/16")
def R50_ViT_B16(include_top: bool = True, weights=None, input_shape: Shape = None, input_tensor=None,
                pooling: Optional[str] = None, classes: Optional[int] = None,
                classifier_activation: Union[str, None] = "softmax", classifier: str = "token",
                representation_size: Optional[int] = None, dropout_rate: float = 0.0,
                attention_dropout_rate: float = 0.0, drop_path_rate: float = 0.0, include_preprocessing: bool = False,
                gelu_approximate: Optional[bool] = None, position_grid: Grid = None, name: Optional[str] = None,
                dtype=None, trainable: bool = True, remat: Union[bool, str] = False, data_config=None,
                layer_scale_init: Optional[float] = None, prefix_position_embedding: bool = True,
                activation: Optional[str] = None, layer_norm_epsilon: float = 1e-6, num_register_tokens: int = 0,
                distillation_token: bool = False, pre_norm: bool = False, fc_norm: bool = False,
                qk_norm: bool = False, qkv_bias: bool = True, patch_bias: bool = True,
                class_token: Optional[bool] = None, stem_numerics: str = "original",
                position_interpolation: str = "linear", final_norm: bool = True) -> VisionTransformer:
    return create_model("R50+ViT-B/16", **locals())


@_variant("R50+ViT-B/32")
def R50_ViT_B32(include_top: bool = True, weights=None, input_shape: Shape = None, input_tensor=None,
                pooling: Optional[str] = None, classes: Optional[int] = None,
                classifier_activation: Union[str, None] = "softmax", classifier: str = "token",
                representation_size: Optional[int] = None, dropout_rate: float = 0.0,
                attention_dropout_rate: float = 0.0, drop_path_rate: float = 0.0, include_preprocessing: bool = False,
                gelu_approximate: Optional[bool] = None, position_grid: Grid = None, name: Optional[str] = None,
                dtype=None, trainable: bool = True, remat: Union[bool, str] = False, data_config=None,
                layer_scale_init: Optional[float] = None, prefix_position_embedding: bool = True,
                activation: Optional[str] = None, layer_norm_epsilon: float = 1e-6, num_register_tokens: int = 0,
                distillation_token: bool = False, pre_norm: bool = False, fc_norm: bool = False,
                qk_norm: bool = False, qkv_bias: bool = True, patch_bias: bool = True,
                class_token: Optional[bool] = None, stem_numerics: str = "original",
                position_interpolation: str = "linear", final_norm: bool = True) -> VisionTransformer:
    return create_model("R50+ViT-B/32", **locals())


@_variant("R50+ViT-L/16")
def R50_ViT_L16(include_top: bool = True, weights=None, input_shape: Shape = None, input_tensor=None,
                pooling: Optional[str] = None, classes: Optional[int] = None,
                classifier_activation: Union[str, None] = "softmax", classifier: str = "token",
                representation_size: Optional[int] = None, dropout_rate: float = 0.0,
                attention_dropout_rate: float = 0.0, drop_path_rate: float = 0.0, include_preprocessing: bool = False,
                gelu_approximate: Optional[bool] = None, position_grid: Grid = None, name: Optional[str] = None,
                dtype=None, trainable: bool = True, remat: Union[bool, str] = False, data_config=None,
                layer_scale_init: Optional[float] = None, prefix_position_embedding: bool = True,
                activation: Optional[str] = None, layer_norm_epsilon: float = 1e-6, num_register_tokens: int = 0,
                distillation_token: bool = False, pre_norm: bool = False, fc_norm: bool = False,
                qk_norm: bool = False, qkv_bias: bool = True, patch_bias: bool = True,
                class_token: Optional[bool] = None, stem_numerics: str = "original",
                position_interpolation: str = "linear", final_norm: bool = True) -> VisionTransformer:
    return create_model("R50+ViT-L/16", **locals())


@_variant("R50+ViT-L/32")
def R50_ViT_L32(include_top: bool = True, weights=None, input_shape: Shape = None, input_tensor=None,
                pooling: Optional[str] = None, classes: Optional[int] = None,
                classifier_activation: Union[str, None] = "softmax", classifier: str = "token",
                representation_size: Optional[int] = None, dropout_rate: float = 0.0,
                attention_dropout_rate: float = 0.0, drop_path_rate: float = 0.0, include_preprocessing: bool = False,
                gelu_approximate: Optional[bool] = None, position_grid: Grid = None, name: Optional[str] = None,
                dtype=None, trainable: bool = True, remat: Union[bool, str] = False, data_config=None,
                layer_scale_init: Optional[float] = None, prefix_position_embedding: bool = True,
                activation: Optional[str] = None, layer_norm_epsilon: float = 1e-6, num_register_tokens: int = 0,
                distillation_token: bool = False, pre_norm: bool = False, fc_norm: bool = False,
                qk_norm: bool = False, qkv_bias: bool = True, patch_bias: bool = True,
                class_token: Optional[bool] = None, stem_numerics: str = "original",
                position_interpolation: str = "linear", final_norm: bool = True) -> VisionTransformer:
    return create_model("R50+ViT-L/32", **locals())


@_variant("R26+ViT-S/32")
def R26_ViT_S32(include_top: bool = True, weights=None, input_shape: Shape = None, input_tensor=None,
                pooling: Optional[str] = None, classes: Optional[int] = None,
                classifier_activation: Union[str, None] = "softmax", classifier: str = "token",
                representation_size: Optional[int] = None, dropout_rate: float = 0.0,
                attention_dropout_rate: float = 0.0, drop_path_rate: float = 0.0, include_preprocessing: bool = False,
                gelu_approximate: Optional[bool] = None, position_grid: Grid = None, name: Optional[str] = None,
                dtype=None, trainable: bool = True, remat: Union[bool, str] = False, data_config=None,
                layer_scale_init: Optional[float] = None, prefix_position_embedding: bool = True,
                activation: Optional[str] = None, layer_norm_epsilon: float = 1e-6, num_register_tokens: int = 0,
                distillation_token: bool = False, pre_norm: bool = False, fc_norm: bool = False,
                qk_norm: bool = False, qkv_bias: bool = True, patch_bias: bool = True,
                class_token: Optional[bool] = None, stem_numerics: str = "original",
                position_interpolation: str = "linear", final_norm: bool = True) -> VisionTransformer:
    return create_model("R26+ViT-S/32", **locals())


@_variant("R26+ViT-B/32")
def R26_ViT_B32(include_top: bool = True, weights=None, input_shape: Shape = None, input_tensor=None,
                pooling: Optional[str] = None, classes: Optional[int] = None,
                classifier_activation: Union[str, None] = "softmax", classifier: str = "token",
                representation_size: Optional[int] = None, dropout_rate: float = 0.0,
                attention_dropout_rate: float = 0.0, drop_path_rate: float = 0.0, include_preprocessing: bool = False,
                gelu_approximate: Optional[bool] = None, position_grid: Grid = None, name: Optional[str] = None,
                dtype=None, trainable: bool = True, remat: Union[bool, str] = False, data_config=None,
                layer_scale_init: Optional[float] = None, prefix_position_embedding: bool = True,
                activation: Optional[str] = None, layer_norm_epsilon: float = 1e-6, num_register_tokens: int = 0,
                distillation_token: bool = False, pre_norm: bool = False, fc_norm: bool = False,
                qk_norm: bool = False, qkv_bias: bool = True, patch_bias: bool = True,
                class_token: Optional[bool] = None, stem_numerics: str = "original",
                position_interpolation: str = "linear", final_norm: bool = True) -> VisionTransformer:
    return create_model("R26+ViT-B/32", **locals())


@_variant("R+ViT-Ti/16")
def R_ViT_Ti16(include_top: bool = True, weights=None, input_shape: Shape = None, input_tensor=None,
               pooling: Optional[str] = None, classes: Optional[int] = None,
               classifier_activation: Union[str, None] = "softmax", classifier: str = "token",
               representation_size: Optional[int] = None, dropout_rate: float = 0.0,
               attention_dropout_rate: float = 0.0, drop_path_rate: float = 0.0, include_preprocessing: bool = False,
               gelu_approximate: Optional[bool] = None, position_grid: Grid = None, name: Optional[str] = None,
               dtype=None, trainable: bool = True, remat: Union[bool, str] = False, data_config=None,
               layer_scale_init: Optional[float] = None, prefix_position_embedding: bool = True,
               activation: Optional[str] = None, layer_norm_epsilon: float = 1e-6, num_register_tokens: int = 0,
               distillation_token: bool = False, pre_norm: bool = False, fc_norm: bool = False, qk_norm: bool = False,
               qkv_bias: bool = True, patch_bias: bool = True, class_token: Optional[bool] = None,
               stem_numerics: str = "original", position_interpolation: str = "linear",
               final_norm: bool = True) -> VisionTransformer:
    return create_model("R+ViT-Ti/16", **locals())
