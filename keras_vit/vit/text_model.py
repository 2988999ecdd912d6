"""`TextTransformer`: a text tower as a Keras model, token ids in, the text's embedding out.

Built functionally from its record (`keras_vit.vit.text_tower.TextTower`) out of the image model's building
blocks: `TextEmbedding`, the `Encoder` (its blocks causal where the record says so, its final norm open_clip's
`ln_final`), `TextPooling` and a dense projection. `get_config` holds the record, so a saved model rebuilds
itself. The model takes a batch of id sequences of any length up to `context_length` (open_clip's tokenizers
pad to it).
"""

from __future__ import annotations

from typing import Union

import keras
import numpy as np

from keras_vit.nn.encoder import Encoder
from keras_vit.nn.initializers import PACKAGE, initial
from keras_vit.nn.specs import ArraySpecs
from keras_vit.nn.text_embedding import TextEmbedding
from keras_vit.nn.text_pooling import TextPooling
from keras_vit.vit.text_tower import TextTower


@keras.saving.register_keras_serializable(package=PACKAGE)
class TextTransformer(ArraySpecs, keras.Model):
    """A text tower: token ids (batch, tokens) -> the text embedding (batch, output_dim), or (batch, width)
    without a projection.

    Args:
      tower: the record (`TextTower`), a dict of its fields, or None for its defaults (OpenAI CLIP B/16's text
        tower); any field may also be given as a keyword, overriding the record's.
      name, dtype: Keras'.

    Parts: `embedding`, `encoder`, `pooling`, `projection` (None without one), and `tower`, the record.
    """

    def __init__(
        self,
        tower: Union[TextTower, dict, None] = None,
        *,
        name: str = "text_transformer",
        dtype=None,
        **fields,
    ):
        if isinstance(tower, TextTower):
            record = TextTower.from_dict({**tower.to_dict(), **fields}) if fields else tower
        elif tower is None or isinstance(tower, dict):
            record = TextTower.from_dict({**(tower or {}), **fields})
        else:
            raise TypeError(f"tower must be a TextTower, a dict of its fields or None, got {type(tower).__name__}.")
        policy = keras.dtype_policies.get(dtype).name if dtype is not None else None
        t = record
        embedding = TextEmbedding(t.vocab_size, t.context_length, t.width, dtype=policy, name="embedding")
        encoder = Encoder(
            t.num_layers,
            t.num_heads,
            t.mlp_dim,
            activation=t.activation,
            layer_norm_epsilon=t.layer_norm_epsilon,
            layer_scale_init=t.layer_scale_init,
            causal=t.causal,
            dtype=policy,
            name="encoder",
        )
        pooling = TextPooling(t.pooling, t.eos_id, dtype=policy, name="pooling")
        projection = (
            keras.layers.Dense(
                t.output_dim,
                use_bias=t.projection_bias,
                kernel_initializer=initial(keras.initializers.RandomNormal(stddev=t.width**-0.5)),  # open_clip's
                bias_initializer=initial("zeros"),
                dtype=policy,
                name="projection",
            )
            if t.output_dim
            else None
        )
        ids = keras.Input((None,), dtype="int32", name="token_ids")
        pooled = pooling(encoder(embedding(ids)), ids)
        out = projection(pooled) if projection is not None else pooled
        super().__init__(ids, out, name=name, dtype=dtype)
        self.tower = record
        self.embedding, self.encoder, self.pooling, self.projection = embedding, encoder, pooling, projection

    def __call__(self, ids, *args, **kwargs):
        if isinstance(ids, (np.ndarray, list, tuple)):  # host input: the text input contract, the tail not read cut
            ids = self._host_ids(ids)
        return super().__call__(ids, *args, **kwargs)

    def predict(self, x, *args, **kwargs):
        if isinstance(x, (np.ndarray, list, tuple)):
            x = self._host_ids(x)
        return super().predict(x, *args, **kwargs)

    def _host_ids(self, ids) -> np.ndarray:
        ids = check_token_ids(ids, self.tower.vocab_size, self.tower.context_length)
        return ids[:, : tokens_read(ids, self.tower)]

    @property
    def context_length(self) -> int:
        return self.tower.context_length

    @property
    def output_dim(self) -> int:
        return self.tower.output_dim or self.tower.width

    def get_config(self) -> dict:
        return {"name": self.name, "tower": self.tower.to_dict(), "dtype": self.dtype_policy.name}

    @classmethod
    def from_config(cls, config: dict) -> "TextTransformer":
        config = dict(config)
        return cls(config.pop("tower", None), **config)


def check_token_ids(ids, vocab_size: int, context_length: int) -> np.ndarray:
    """Token ids as int32 (texts, tokens), or a ValueError naming what is wrong: not whole numbers, not one
    sequence per row, longer than the position table, or an id outside the vocabulary (an embedding lookup
    would clamp it on some backends and fail on others)."""
    array = np.asarray(ids)
    if array.ndim != 2 or array.shape[1] < 1:
        raise ValueError(f"token ids must be (texts, tokens), got shape {array.shape}; tokenize texts first.")
    if not np.issubdtype(array.dtype, np.integer):
        if not (np.issubdtype(array.dtype, np.floating) and np.all(array == np.round(array))):
            raise ValueError(f"token ids must be whole numbers, got {array.dtype} values.")
    if array.shape[1] > context_length:
        raise ValueError(f"{array.shape[1]} tokens per text, but the text tower's context length is {context_length}.")
    if array.size and (array.min() < 0 or array.max() >= vocab_size):
        bad = int(array.max()) if array.max() >= vocab_size else int(array.min())
        raise ValueError(
            f"token id {bad} is outside the text tower's vocabulary (0..{vocab_size - 1}): a tokenizer of another "
            "vocabulary made these ids."
        )
    return array.astype("int32")


def tokens_read(ids: np.ndarray, tower: TextTower) -> int:
    """How many leading tokens of a batch of ids the tower's outputs depend on. In a causal tower (CLIP's) a token
    sees only the tokens before it, and the text is the token the pooling picks (the end-of-text token, at the
    highest id or the first `eos_id`), so the padding after the batch's last picked token changes no output: it is
    cut before the call (prompts are a few tokens of a 77-token context). A bidirectional tower, or one pooled at
    the last position, reads every token."""
    if not tower.causal or tower.pooling == "last" or not ids.size:
        return ids.shape[1]
    if tower.pooling == "first":
        return 1
    picked = np.argmax(ids if tower.pooling == "argmax" else ids == tower.eos_id, axis=1)  # as TextPooling picks
    return int(picked.max()) + 1
