"""A text tower's input: each token id's learned vector plus a learned vector per position (CLIP, SigLIP)."""

from __future__ import annotations

import keras
from keras import ops

from keras_vit.nn.initializers import PACKAGE as _PACKAGE, initial
from keras_vit.nn.specs import ArraySpecs


@keras.saving.register_keras_serializable(package=_PACKAGE)
class TextEmbedding(ArraySpecs, keras.layers.Layer):
    """Token ids (batch, tokens) -> (batch, tokens, width): `token_embedding[id] + position_embedding[i]`.

    `token_embedding` is (vocab_size, width), `position_embedding` (context_length, width), as open_clip's
    `token_embedding.weight` and `positional_embedding` (CLIP's initialisation: normal, std 0.02 and 0.01).
    A sequence shorter than `context_length` takes the first rows of the position table, as open_clip does.
    """

    def __init__(self, vocab_size: int, context_length: int, width: int, **kwargs):
        super().__init__(**kwargs)
        self.vocab_size, self.context_length, self.width = int(vocab_size), int(context_length), int(width)

    def build(self, input_shape):
        self.token_embedding = self.add_weight(
            name="token_embedding",
            shape=(self.vocab_size, self.width),
            initializer=initial(keras.initializers.RandomNormal(stddev=0.02)),
        )
        self.position_embedding = self.add_weight(
            name="position_embedding",
            shape=(self.context_length, self.width),
            initializer=initial(keras.initializers.RandomNormal(stddev=0.01)),
        )

    def call(self, ids):
        x = ops.take(self.token_embedding, ops.cast(ids, "int32"), axis=0)
        return x + self.position_embedding[: ops.shape(ids)[1]]

    def compute_output_shape(self, input_shape):
        return tuple(input_shape) + (self.width,)

    def get_config(self):
        return {
            **super().get_config(),
            "vocab_size": self.vocab_size,
            "context_length": self.context_length,
            "width": self.width,
        }
