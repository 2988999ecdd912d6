"""The model: `VisionTransformer`, its record (`Variant`), the table of sizes, and what works on a whole model
(features, preprocessing, LoRA, quantization, sharding). Its layers are `keras_vit.nn`.

Nothing here reads or writes files; weights are applied by `keras_vit.applications` and `keras_vit.weights`.
"""

from keras_vit.nn.attention import MultiHeadDotProductAttention
from keras_vit.nn.layer_norm import LayerNorm
from keras_vit.nn.class_token import ClassToken
from keras_vit.nn.drop_path import DropPath
from keras_vit.nn.encoder import Encoder
from keras_vit.nn.encoder_block import EncoderBlock
from keras_vit.nn.mlp import MlpBlock
from keras_vit.nn.patch_embedding import PatchEmbedding
from keras_vit.nn.token_pooling import TokenPooling
from keras_vit.vit.model import VisionTransformer, ensure_vit, preprocess_input
from keras_vit.nn.position_embedding import AddPositionEmbedding
from keras_vit.nn.resnet import ResidualUnit, ResNetStem, StdConv2D
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
