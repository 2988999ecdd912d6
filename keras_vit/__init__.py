"""keras-vit: the Vision Transformer model zoo for Keras 3 (Dosovitskiy et al., ICLR 2021).

    import keras_vit
    model = keras_vit.ViT_B16(weights="imagenet21k+imagenet2012", input_shape=(384, 384, 3))
    model = keras_vit.load_model("ViT-B_16.npz")      # the architecture is read from the file
"""

from keras_vit.applications import (R26_ViT_B32, R26_ViT_S32, R_ViT_Ti16, R50_ViT_B16, R50_ViT_B32, R50_ViT_L16, R50_ViT_L32, ViT_B8,
                                    ViT_B16, ViT_B32, ViT_H14, ViT_L16, ViT_L32, ViT_S16, ViT_S32, ViT_Ti16,
                                    create_model)
from keras_vit.checkpoints import load_npz, resize_position_embeddings, save_npz
from keras_vit.configs import MODELS, ViTConfig, get_config, list_models
from keras_vit.layers import (ClassToken, DropPath, Encoder, EncoderBlock,
                              MlpBlock, MultiHeadDotProductAttention, PatchEmbedding, TokenPooling)
from keras_vit.loading import load_model
from keras_vit.position_embedding import AddPositionEmbedding
from keras_vit.safetensors_io import save_safetensors
from keras_vit.sharding import layout_map
from keras_vit.models import VisionTransformer, preprocess_input
from keras_vit.resnet import ResidualUnit, ResNetStem, StdConv2D
from keras_vit.weights import load_weights

__version__ = "0.2.0"

__all__ = [
    "AddPositionEmbedding", "ClassToken", "DropPath", "Encoder", "EncoderBlock", "MODELS", "MlpBlock",
    "MultiHeadDotProductAttention", "PatchEmbedding", "R26_ViT_B32", "R26_ViT_S32", "R_ViT_Ti16", "R50_ViT_B16", "R50_ViT_B32",
    "R50_ViT_L16", "R50_ViT_L32", "ResNetStem", "ResidualUnit", "StdConv2D", "TokenPooling", "ViTConfig",
    "ViT_B16", "ViT_B32", "ViT_B8", "ViT_H14", "ViT_L16", "ViT_L32", "ViT_S16", "ViT_S32", "ViT_Ti16",
    "VisionTransformer", "create_model", "get_config", "layout_map", "list_models", "load_model", "load_npz", "load_weights",
    "preprocess_input", "resize_position_embeddings", "save_npz", "save_safetensors",
]
