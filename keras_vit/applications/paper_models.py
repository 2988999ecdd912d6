"""The `keras.applications`-style constructors of the paper's models (`ViT_B16`, ...): one documented function
per row of the model table (`keras_vit.vit.table.MODELS`), each a `create_model` of that row.
"""

from __future__ import annotations

from typing import Optional, Sequence, Tuple, Union

from keras_vit.applications.create import create_model
from keras_vit.applications.docstring import variant as _variant
from keras_vit.vit.model import VisionTransformer

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
             stem_numerics: str = "original", position_interpolation: str = "linear", final_norm: bool = True,
             rotary_embedding: Optional[dict] = None, absolute_position_embedding: bool = True, swiglu: bool = False,
             mlp_norm: bool = False, attention_norm: bool = False, attention_pooling_heads: Optional[int] = None,
             pooling_includes_prefix: bool = False, key_bias: bool = True, rms_norm: bool = False,
             patch_norm: bool = False, projection_bias: bool = True, post_norm: bool = False,
             attention_only_layer_scale: bool = False, key_value_heads=None,
             parallel_layers: bool = False, position_resampling: Optional[dict] = None,
        differential_attention: bool = False, convolutional_stem=None) -> VisionTransformer:
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
            position_interpolation: str = "linear", final_norm: bool = True, rotary_embedding: Optional[dict] = None,
            absolute_position_embedding: bool = True, swiglu: bool = False, mlp_norm: bool = False,
            attention_norm: bool = False, attention_pooling_heads: Optional[int] = None,
            pooling_includes_prefix: bool = False, key_bias: bool = True, rms_norm: bool = False,
            patch_norm: bool = False, projection_bias: bool = True, post_norm: bool = False,
            attention_only_layer_scale: bool = False, key_value_heads=None,
            parallel_layers: bool = False, position_resampling: Optional[dict] = None,
        differential_attention: bool = False, convolutional_stem=None) -> VisionTransformer:
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
            position_interpolation: str = "linear", final_norm: bool = True, rotary_embedding: Optional[dict] = None,
            absolute_position_embedding: bool = True, swiglu: bool = False, mlp_norm: bool = False,
            attention_norm: bool = False, attention_pooling_heads: Optional[int] = None,
            pooling_includes_prefix: bool = False, key_bias: bool = True, rms_norm: bool = False,
            patch_norm: bool = False, projection_bias: bool = True, post_norm: bool = False,
            attention_only_layer_scale: bool = False, key_value_heads=None,
            parallel_layers: bool = False, position_resampling: Optional[dict] = None,
        differential_attention: bool = False, convolutional_stem=None) -> VisionTransformer:
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
           position_interpolation: str = "linear", final_norm: bool = True, rotary_embedding: Optional[dict] = None,
           absolute_position_embedding: bool = True, swiglu: bool = False, mlp_norm: bool = False,
           attention_norm: bool = False, attention_pooling_heads: Optional[int] = None,
           pooling_includes_prefix: bool = False, key_bias: bool = True, rms_norm: bool = False,
           patch_norm: bool = False, projection_bias: bool = True, post_norm: bool = False,
           attention_only_layer_scale: bool = False, key_value_heads=None,
           parallel_layers: bool = False, position_resampling: Optional[dict] = None,
        differential_attention: bool = False, convolutional_stem=None) -> VisionTransformer:
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
            position_interpolation: str = "linear", final_norm: bool = True, rotary_embedding: Optional[dict] = None,
            absolute_position_embedding: bool = True, swiglu: bool = False, mlp_norm: bool = False,
            attention_norm: bool = False, attention_pooling_heads: Optional[int] = None,
            pooling_includes_prefix: bool = False, key_bias: bool = True, rms_norm: bool = False,
            patch_norm: bool = False, projection_bias: bool = True, post_norm: bool = False,
            attention_only_layer_scale: bool = False, key_value_heads=None,
            parallel_layers: bool = False, position_resampling: Optional[dict] = None,
        differential_attention: bool = False, convolutional_stem=None) -> VisionTransformer:
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
            position_interpolation: str = "linear", final_norm: bool = True, rotary_embedding: Optional[dict] = None,
            absolute_position_embedding: bool = True, swiglu: bool = False, mlp_norm: bool = False,
            attention_norm: bool = False, attention_pooling_heads: Optional[int] = None,
            pooling_includes_prefix: bool = False, key_bias: bool = True, rms_norm: bool = False,
            patch_norm: bool = False, projection_bias: bool = True, post_norm: bool = False,
            attention_only_layer_scale: bool = False, key_value_heads=None,
            parallel_layers: bool = False, position_resampling: Optional[dict] = None,
        differential_attention: bool = False, convolutional_stem=None) -> VisionTransformer:
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
            position_interpolation: str = "linear", final_norm: bool = True, rotary_embedding: Optional[dict] = None,
            absolute_position_embedding: bool = True, swiglu: bool = False, mlp_norm: bool = False,
            attention_norm: bool = False, attention_pooling_heads: Optional[int] = None,
            pooling_includes_prefix: bool = False, key_bias: bool = True, rms_norm: bool = False,
            patch_norm: bool = False, projection_bias: bool = True, post_norm: bool = False,
            attention_only_layer_scale: bool = False, key_value_heads=None,
            parallel_layers: bool = False, position_resampling: Optional[dict] = None,
        differential_attention: bool = False, convolutional_stem=None) -> VisionTransformer:
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
            position_interpolation: str = "linear", final_norm: bool = True, rotary_embedding: Optional[dict] = None,
            absolute_position_embedding: bool = True, swiglu: bool = False, mlp_norm: bool = False,
            attention_norm: bool = False, attention_pooling_heads: Optional[int] = None,
            pooling_includes_prefix: bool = False, key_bias: bool = True, rms_norm: bool = False,
            patch_norm: bool = False, projection_bias: bool = True, post_norm: bool = False,
            attention_only_layer_scale: bool = False, key_value_heads=None,
            parallel_layers: bool = False, position_resampling: Optional[dict] = None,
        differential_attention: bool = False, convolutional_stem=None) -> VisionTransformer:
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
            position_interpolation: str = "linear", final_norm: bool = True, rotary_embedding: Optional[dict] = None,
            absolute_position_embedding: bool = True, swiglu: bool = False, mlp_norm: bool = False,
            attention_norm: bool = False, attention_pooling_heads: Optional[int] = None,
            pooling_includes_prefix: bool = False, key_bias: bool = True, rms_norm: bool = False,
            patch_norm: bool = False, projection_bias: bool = True, post_norm: bool = False,
            attention_only_layer_scale: bool = False, key_value_heads=None,
            parallel_layers: bool = False, position_resampling: Optional[dict] = None,
        differential_attention: bool = False, convolutional_stem=None) -> VisionTransformer:
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
                position_interpolation: str = "linear", final_norm: bool = True,
                rotary_embedding: Optional[dict] = None, absolute_position_embedding: bool = True,
                swiglu: bool = False, mlp_norm: bool = False, attention_norm: bool = False,
                attention_pooling_heads: Optional[int] = None, pooling_includes_prefix: bool = False,
                key_bias: bool = True, rms_norm: bool = False, patch_norm: bool = False, projection_bias: bool = True,
                post_norm: bool = False, attention_only_layer_scale: bool = False, key_value_heads=None,
                parallel_layers: bool = False, position_resampling: Optional[dict] = None,
        differential_attention: bool = False, convolutional_stem=None) -> VisionTransformer:
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
                position_interpolation: str = "linear", final_norm: bool = True,
                rotary_embedding: Optional[dict] = None, absolute_position_embedding: bool = True,
                swiglu: bool = False, mlp_norm: bool = False, attention_norm: bool = False,
                attention_pooling_heads: Optional[int] = None, pooling_includes_prefix: bool = False,
                key_bias: bool = True, rms_norm: bool = False, patch_norm: bool = False, projection_bias: bool = True,
                post_norm: bool = False, attention_only_layer_scale: bool = False, key_value_heads=None,
                parallel_layers: bool = False, position_resampling: Optional[dict] = None,
        differential_attention: bool = False, convolutional_stem=None) -> VisionTransformer:
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
                position_interpolation: str = "linear", final_norm: bool = True,
                rotary_embedding: Optional[dict] = None, absolute_position_embedding: bool = True,
                swiglu: bool = False, mlp_norm: bool = False, attention_norm: bool = False,
                attention_pooling_heads: Optional[int] = None, pooling_includes_prefix: bool = False,
                key_bias: bool = True, rms_norm: bool = False, patch_norm: bool = False, projection_bias: bool = True,
                post_norm: bool = False, attention_only_layer_scale: bool = False, key_value_heads=None,
                parallel_layers: bool = False, position_resampling: Optional[dict] = None,
        differential_attention: bool = False, convolutional_stem=None) -> VisionTransformer:
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
                position_interpolation: str = "linear", final_norm: bool = True,
                rotary_embedding: Optional[dict] = None, absolute_position_embedding: bool = True,
                swiglu: bool = False, mlp_norm: bool = False, attention_norm: bool = False,
                attention_pooling_heads: Optional[int] = None, pooling_includes_prefix: bool = False,
                key_bias: bool = True, rms_norm: bool = False, patch_norm: bool = False, projection_bias: bool = True,
                post_norm: bool = False, attention_only_layer_scale: bool = False, key_value_heads=None,
                parallel_layers: bool = False, position_resampling: Optional[dict] = None,
        differential_attention: bool = False, convolutional_stem=None) -> VisionTransformer:
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
                position_interpolation: str = "linear", final_norm: bool = True,
                rotary_embedding: Optional[dict] = None, absolute_position_embedding: bool = True,
                swiglu: bool = False, mlp_norm: bool = False, attention_norm: bool = False,
                attention_pooling_heads: Optional[int] = None, pooling_includes_prefix: bool = False,
                key_bias: bool = True, rms_norm: bool = False, patch_norm: bool = False, projection_bias: bool = True,
                post_norm: bool = False, attention_only_layer_scale: bool = False, key_value_heads=None,
                parallel_layers: bool = False, position_resampling: Optional[dict] = None,
        differential_attention: bool = False, convolutional_stem=None) -> VisionTransformer:
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
                position_interpolation: str = "linear", final_norm: bool = True,
                rotary_embedding: Optional[dict] = None, absolute_position_embedding: bool = True,
                swiglu: bool = False, mlp_norm: bool = False, attention_norm: bool = False,
                attention_pooling_heads: Optional[int] = None, pooling_includes_prefix: bool = False,
                key_bias: bool = True, rms_norm: bool = False, patch_norm: bool = False, projection_bias: bool = True,
                post_norm: bool = False, attention_only_layer_scale: bool = False, key_value_heads=None,
                parallel_layers: bool = False, position_resampling: Optional[dict] = None,
        differential_attention: bool = False, convolutional_stem=None) -> VisionTransformer:
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
               stem_numerics: str = "original", position_interpolation: str = "linear", final_norm: bool = True,
               rotary_embedding: Optional[dict] = None, absolute_position_embedding: bool = True,
               swiglu: bool = False, mlp_norm: bool = False, attention_norm: bool = False,
               attention_pooling_heads: Optional[int] = None, pooling_includes_prefix: bool = False,
               key_bias: bool = True, rms_norm: bool = False, patch_norm: bool = False, projection_bias: bool = True,
               post_norm: bool = False, attention_only_layer_scale: bool = False, key_value_heads=None,
               parallel_layers: bool = False, position_resampling: Optional[dict] = None,
        differential_attention: bool = False, convolutional_stem=None) -> VisionTransformer:
    return create_model("R+ViT-Ti/16", **locals())
