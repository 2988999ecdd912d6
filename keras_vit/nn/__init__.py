"""The building blocks the model is assembled from, one small file per part: LayerNorm and RMSNorm, LayerScale,
rotary position embeddings, the SwiGLU MLP, and the initializers and array specs every layer shares.

These know nothing of a Vision Transformer's anatomy (`keras_vit.vit` puts them together) and read no files.
"""
