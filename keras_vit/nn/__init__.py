"""The building blocks the model is assembled from, one small file per part: LayerNorm and RMSNorm, LayerScale,
rotary position embeddings, the SwiGLU MLP, and the initializers and array specs every layer shares.

These know nothing of a Vision Transformer's anatomy (`keras_vit.vit` puts them together) and read no files.
"""

from keras_vit.nn.layer_norm import LayerNorm
from keras_vit.nn.layer_scale import LayerScale
from keras_vit.nn.rms_norm import RMSNorm
from keras_vit.nn.rotary import Rotary, RotaryPositionEmbedding
from keras_vit.nn.swiglu import SwiGLU

__all__ = ["LayerNorm", "LayerScale", "RMSNorm", "Rotary", "RotaryPositionEmbedding", "SwiGLU"]
