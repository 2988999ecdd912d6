"""The model: the table of sizes, the layers, and `VisionTransformer` (anatomy, description, feature API).

Nothing here reads or writes files; weights are applied by `keras_vit.applications` and `keras_vit.weights`.
"""

from keras_vit.vit.attention import MultiHeadDotProductAttention
from keras_vit.nn.layer_norm import LayerNorm
from keras_vit.vit.layers import ClassToken, DropPath, Encoder, EncoderBlock, MlpBlock, PatchEmbedding, TokenPooling
from keras_vit.vit.model import VisionTransformer, ensure_vit, preprocess_input
from keras_vit.vit.position_embedding import AddPositionEmbedding
from keras_vit.vit.resnet import ResidualUnit, ResNetStem, StdConv2D
from keras_vit.vit.sharding import layout_map
from keras_vit.vit.table import MODELS, ViTConfig, list_models, vit_config

__all__ = [
    "AddPositionEmbedding",
    "ClassToken",
    "DropPath",
    "Encoder",
    "EncoderBlock",
    "LayerNorm",
    "MODELS",
    "MlpBlock",
    "MultiHeadDotProductAttention",
    "PatchEmbedding",
    "ResNetStem",
    "ResidualUnit",
    "StdConv2D",
    "TokenPooling",
    "ViTConfig",
    "VisionTransformer",
    "ensure_vit",
    "layout_map",
    "list_models",
    "preprocess_input",
    "vit_config",
]
