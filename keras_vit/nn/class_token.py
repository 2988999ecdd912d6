"""Learned tokens put before the patches: the class token, DINOv2's registers, DeiT's distillation token.

The weight has the official checkpoints' layout (1, tokens, D).
"""

from __future__ import annotations

import keras
from keras import ops

from keras_vit.nn.initializers import PACKAGE as _PACKAGE
from keras_vit.nn.initializers import initial
from keras_vit.nn.specs import ArraySpecs


@keras.saving.register_keras_serializable(package=_PACKAGE)
class ClassToken(ArraySpecs, keras.layers.Layer):
    """Prepends learned tokens (zero-initialised, as the original code's [class] token): the class token, and
    with `num_tokens` > 1 or another name the DINOv2 register tokens or DeiT's distillation token."""

    def __init__(self, num_tokens: int = 1, **kwargs):
        super().__init__(**kwargs)
        self.num_tokens = int(num_tokens)

    def build(self, input_shape):
        self.cls = self.add_weight(
            name="cls", shape=(1, self.num_tokens, input_shape[-1]), initializer=initial("zeros")
        )

    def call(self, tokens):
        cls = ops.cast(self.cls, tokens.dtype)
        cls = ops.broadcast_to(cls, (ops.shape(tokens)[0], self.num_tokens, ops.shape(tokens)[2]))
        return ops.concatenate([cls, tokens], axis=1)

    def compute_output_shape(self, input_shape):
        n = None if input_shape[1] is None else input_shape[1] + self.num_tokens
        return (input_shape[0], n, input_shape[2])

    def get_config(self):
        return {**super().get_config(), "num_tokens": self.num_tokens}
