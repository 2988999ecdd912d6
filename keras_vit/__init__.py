"""keras-vit: the Vision Transformer model zoo for Keras 3 (Dosovitskiy et al., ICLR 2021).

    import keras_vit
    model = keras_vit.ViT_B16(weights="imagenet21k+imagenet2012", input_shape=(384, 384, 3))
    model = keras_vit.load_model("ViT-B_16.npz")      # the architecture is read from the file

Packages, layered one way (each imports only those before it): `utils` (atomic writes, argument checks)
-> `vit` (the model) -> `weights` (file or name -> variables) -> `applications` (constructors)
-> `analysis` (few-shot, inspection, summaries).
"""

# first, before anything imports Keras: a backend that cannot load is named in one line
from keras_vit.utils.keras_backend import keras  # noqa: F401
from keras_vit.utils.compilation_cache import enable_by_default as _enable_compilation_cache_by_default
from keras_vit.utils.compilation_cache import enable_compilation_cache

# the model
from keras_vit.vit import (
    MODELS,
    AddPositionEmbedding,
    ClassToken,
    DropPath,
    Encoder,
    EncoderBlock,
    MlpBlock,
    MultiHeadDotProductAttention,
    PatchEmbedding,
    ResidualUnit,
    ResNetStem,
    StdConv2D,
    TokenPooling,
    ViTConfig,
    VisionTransformer,
    layout_map,
    preprocess_input,
    vit_config,
)
from keras_vit.vit.data_config import DataConfig
from keras_vit.vit.fine_tuning import fine_tuning_optimizer
from keras_vit.vit.fused_adamw import FusedAdamW
from keras_vit.vit.naflex import naflex_batch, naflex_forward
from keras_vit.vit.preprocessing import ImagePreprocessing
from keras_vit.vit.table import get_config  # deprecated alias of vit_config
from keras_vit.vit.clip_tokenizer import ClipTokenizer
from keras_vit.vit.contrastive import clip_loss, contrastive_losses, siglip_loss
from keras_vit.vit.hub_tokenizer import HubTokenizer
from keras_vit.vit.sentencepiece_tokenizer import SentencePieceTokenizer
from keras_vit.vit.image_text import ImageTextModel
from keras_vit.vit.text_model import TextTransformer
from keras_vit.vit.text_tower import TextTower
from keras_vit.vit.zero_shot import ZeroShotClassifier, prompt_templates, zero_shot_weights

# search and the retrieval benchmarks' scores over embeddings
from keras_vit.analysis.retrieval import retrieval_metrics, search

# the weights
from keras_vit.weights import load_lora_weights, load_model, load_weights, save_lora_weights
from keras_vit.weights.official import load_npz, resize_position_embeddings, save_npz
from keras_vit.weights.image_text_sources import load_image_text
from keras_vit.weights.big_vision_siglip import load_big_vision_siglip
from keras_vit.weights.open_clip import load_open_clip, save_open_clip
from keras_vit.weights.safetensors_files import save_safetensors
from keras_vit.weights.timm.repository import save_pretrained

# the constructors
from keras_vit.applications.catalog import list_models
from keras_vit.applications import (
    R26_ViT_B32,
    R26_ViT_S32,
    R50_ViT_B16,
    R50_ViT_B32,
    R50_ViT_L16,
    R50_ViT_L32,
    R_ViT_Ti16,
    ViT_B8,
    ViT_B16,
    ViT_B32,
    ViT_H14,
    ViT_L16,
    ViT_L32,
    ViT_S16,
    ViT_S32,
    ViT_Ti16,
    create_model,
)

# the analyses users reach for first
from keras_vit.vit.labels import decode_predictions

from keras_vit import _moved

__version__ = "0.3.0"

__all__ = [
    "AddPositionEmbedding",
    "ClassToken",
    "ClipTokenizer",
    "DataConfig",
    "HubTokenizer",
    "SentencePieceTokenizer",
    "ImagePreprocessing",
    "ImageTextModel",
    "DropPath",
    "Encoder",
    "EncoderBlock",
    "MODELS",
    "MlpBlock",
    "MultiHeadDotProductAttention",
    "PatchEmbedding",
    "R26_ViT_B32",
    "R26_ViT_S32",
    "R_ViT_Ti16",
    "R50_ViT_B16",
    "R50_ViT_B32",
    "R50_ViT_L16",
    "R50_ViT_L32",
    "ResNetStem",
    "ResidualUnit",
    "StdConv2D",
    "TextTower",
    "TextTransformer",
    "TokenPooling",
    "ViTConfig",
    "ViT_B16",
    "ViT_B32",
    "ViT_B8",
    "ViT_H14",
    "ViT_L16",
    "ViT_L32",
    "ViT_S16",
    "ViT_S32",
    "ViT_Ti16",
    "VisionTransformer",
    "ZeroShotClassifier",
    "clip_loss",
    "contrastive_losses",
    "create_model",
    "decode_predictions",
    "enable_compilation_cache",
    "fine_tuning_optimizer",
    "FusedAdamW",
    "get_config",
    "layout_map",
    "list_models",
    "load_model",
    "load_npz",
    "load_image_text",
    "load_big_vision_siglip",
    "load_open_clip",
    "naflex_batch",
    "naflex_forward",
    "load_lora_weights",
    "load_weights",
    "save_lora_weights",
    "preprocess_input",
    "prompt_templates",
    "resize_position_embeddings",
    "retrieval_metrics",
    "save_npz",
    "save_open_clip",
    "save_pretrained",
    "save_safetensors",
    "search",
    "siglip_loss",
    "vit_config",
    "zero_shot_weights",
]

# JAX keeps compiled programs for the next process (keras_vit.utils.compilation_cache says when it does not)
_enable_compilation_cache_by_default()

_moved.install()


def __getattr__(name: str):
    """`keras_vit.checkpoints`, `keras_vit.loading`, ...: the module paths of 0.2, deprecated (see `_moved`)."""
    module = _moved.resolve(f"{__name__}.{name}")
    if module is None:
        raise AttributeError(f"module 'keras_vit' has no attribute {name!r}")
    return module
