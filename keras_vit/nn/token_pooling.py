"""Pooling the encoded token sequence into one vector: a token by index, or the mean or max over the patches
(with or without the prefix tokens)."""

from __future__ import annotations

import keras
from keras import ops

from keras_vit.nn.initializers import PACKAGE as _PACKAGE
from keras_vit.nn.specs import ArraySpecs


@keras.saving.register_keras_serializable(package=_PACKAGE)
class TokenPooling(ArraySpecs, keras.layers.Layer):
    """Reduces the token sequence to one vector.

    mode 'token': the token at row `index` (0: the class token; 1: DeiT's distillation token); 'gap': mean
    over the patch tokens;
    'max': max over the patch tokens. `num_prefix_tokens` rows are skipped for
    'gap'/'max'.
    """

    MODES = ("token", "gap", "max")

    def __init__(self, mode: str = "token", num_prefix_tokens: int = 1, index: int = 0, **kwargs):
        super().__init__(**kwargs)
        if mode not in self.MODES:
            raise ValueError(f"Unknown pooling mode {mode!r}; expected one of {self.MODES}.")
        self.mode = mode
        self.num_prefix_tokens = int(num_prefix_tokens)
        self.index = int(index)

    def call(self, x):
        if self.mode == "token":
            return x[:, self.index]
        patches = x[:, self.num_prefix_tokens :]
        if self.mode == "gap":
            return ops.mean(patches, axis=1)
        return ops.max(patches, axis=1)

    def compute_output_shape(self, input_shape):
        return (input_shape[0], input_shape[2])

    def get_config(self):
        return {
            **super().get_config(),
            "mode": self.mode,
            "num_prefix_tokens": self.num_prefix_tokens,
            "index": self.index,
        }
