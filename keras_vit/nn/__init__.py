"""The layers a ViT is assembled from, one concept per file: the patch embedding, tokens, position tables and
rotary embeddings, norms, attention forms, MLPs, the encoder block and encoder, stems, pooling heads.

A layer here takes plain arguments (sizes, rates, flags) and reads no files; which layers a model has is chosen
from its record in `keras_vit.vit.components`.
"""

from keras_vit.nn.layer_norm import LayerNorm
from keras_vit.nn.layer_scale import LayerScale
from keras_vit.nn.rms_norm import RMSNorm
from keras_vit.nn.rotary import Rotary, RotaryPositionEmbedding
from keras_vit.nn.swiglu import SwiGLU

__all__ = ["LayerNorm", "LayerScale", "RMSNorm", "Rotary", "RotaryPositionEmbedding", "SwiGLU"]
