"""The `keras.applications`-style constructors (ViT_B16, ...) and `create_model` by name.

Each is `VisionTransformer` with one row of `keras_vit.configs.MODELS`; they return
`VisionTransformer` instances.
"""

from __future__ import annotations

from typing import Optional, Union

from keras_vit import configs
from keras_vit.models import VisionTransformer


def create_model(model_name: str, **kwargs) -> VisionTransformer:
    """Builds a model of the table by name: `create_model("ViT-B/16", classes=10)`.

    Names as in the paper ("ViT-B/16", "R50+ViT-B/16") or the checkpoints ("ViT-B_16");
    keywords as in `VisionTransformer`.
    """
    config = configs.get_config(model_name)
    return VisionTransformer(**config.model_kwargs(), **kwargs)


def _constructor(model_name: str, function_name: str):
    config = configs.MODELS[model_name]

    def build(include_top: bool = True, weights: Optional[str] = None, input_shape=None,
              input_tensor=None, pooling: Optional[str] = None, classes: Optional[int] = None,
              classifier_activation: Union[str, None] = "softmax", classifier: str = "token",
              representation_size: Optional[int] = None, dropout_rate: float = 0.0,
              attention_dropout_rate: float = 0.0, drop_path_rate: float = 0.0,
              include_preprocessing: bool = False, gelu_approximate: bool = True, position_grid=None,
              name: Optional[str] = None, remat: bool = False) -> VisionTransformer:
        return create_model(
            model_name, include_top=include_top, weights=weights, input_shape=input_shape,
            input_tensor=input_tensor, pooling=pooling, classes=classes,
            classifier_activation=classifier_activation, classifier=classifier,
            representation_size=representation_size, dropout_rate=dropout_rate,
            attention_dropout_rate=attention_dropout_rate, drop_path_rate=drop_path_rate,
            include_preprocessing=include_preprocessing, gelu_approximate=gelu_approximate,
            position_grid=position_grid, name=name, remat=remat)

    hybrid = f" on a BiT-ResNet stem with stages {config.resnet_layers}" if config.is_hybrid else ""
    build.__doc__ = (
        f"Builds {config.name}: {config.num_layers} layers, D={config.hidden_size}, "
        f"MLP {config.mlp_dim}, {config.num_heads} heads, {config.effective_patch_size}x"
        f"{config.effective_patch_size} pixels per token{hybrid}.\n\n"
        "Keywords as in `keras_vit.VisionTransformer` (keras.applications vocabulary). "
        "Inputs are images in [-1, 1] unless include_preprocessing=True.")
    build.__name__ = build.__qualname__ = function_name
    return build


ViT_Ti16 = _constructor("ViT-Ti/16", "ViT_Ti16")
ViT_S16 = _constructor("ViT-S/16", "ViT_S16")
ViT_S32 = _constructor("ViT-S/32", "ViT_S32")
ViT_B8 = _constructor("ViT-B/8", "ViT_B8")
ViT_B16 = _constructor("ViT-B/16", "ViT_B16")
ViT_B32 = _constructor("ViT-B/32", "ViT_B32")
ViT_L16 = _constructor("ViT-L/16", "ViT_L16")
ViT_L32 = _constructor("ViT-L/32", "ViT_L32")
ViT_H14 = _constructor("ViT-H/14", "ViT_H14")
R50_ViT_B16 = _constructor("R50+ViT-B/16", "R50_ViT_B16")
R50_ViT_B32 = _constructor("R50+ViT-B/32", "R50_ViT_B32")
R50_ViT_L16 = _constructor("R50+ViT-L/16", "R50_ViT_L16")
R50_ViT_L32 = _constructor("R50+ViT-L/32", "R50_ViT_L32")
R26_ViT_S32 = _constructor("R26+ViT-S/32", "R26_ViT_S32")
R26_ViT_B32 = _constructor("R26+ViT-B/32", "R26_ViT_B32")
R_ViT_Ti16 = _constructor("R+ViT-Ti/16", "R_ViT_Ti16")
