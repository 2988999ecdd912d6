"""A text tower's pooling: one token's features stand for the text (open_clip's `text_global_pool`)."""

from __future__ import annotations

from typing import Optional

import keras
from keras import ops

from keras_vit.nn.initializers import PACKAGE as _PACKAGE
from keras_vit.nn.specs import ArraySpecs

# "argmax": the token with the highest id, CLIP's end-of-text token (its BPE vocabulary puts it last);
# "eos": the first token equal to `eos_id`; "last" / "first": a fixed row (SigLIP pads every text to the
# context length and reads the last row)
TEXT_POOLING = ("argmax", "eos", "last", "first")


@keras.saving.register_keras_serializable(package=_PACKAGE)
class TextPooling(ArraySpecs, keras.layers.Layer):
    """(tokens (batch, n, width), ids (batch, n)) -> (batch, width): the row `mode` picks (`TEXT_POOLING`)."""

    def __init__(self, mode: str = "argmax", eos_id: Optional[int] = None, **kwargs):
        super().__init__(**kwargs)
        if mode not in TEXT_POOLING:
            raise ValueError(f"text pooling {mode!r}; expected one of {TEXT_POOLING}.")
        if mode == "eos" and eos_id is None:
            raise ValueError("text pooling 'eos' needs eos_id, the end-of-text token's id.")
        self.mode, self.eos_id = mode, None if eos_id is None else int(eos_id)

    def call(self, tokens, ids):
        if self.mode == "last":
            return tokens[:, -1]
        if self.mode == "first":
            return tokens[:, 0]
        ids = ops.cast(ids, "int32")
        picked = ops.argmax(ids if self.mode == "argmax" else ops.cast(ops.equal(ids, self.eos_id), "int32"), axis=-1)
        return ops.take_along_axis(tokens, ops.reshape(picked, (-1, 1, 1)), axis=1)[:, 0]

    def compute_output_shape(self, tokens_shape, ids_shape=None):
        return (tokens_shape[0], tokens_shape[-1])

    def get_config(self):
        return {**super().get_config(), "mode": self.mode, "eos_id": self.eos_id}
