"""`ImageTextModel`: two towers in one embedding space (CLIP, SigLIP): an image model and a text model, each
ending in a projection to the shared width, and the learned temperature (and SigLIP's bias) of their
similarity logits.

`encode_image` / `encode_text` give the towers' embeddings (L2-normalised by default, as zero-shot and search use
them); calling the model on `(images, token_ids)` gives the (images x texts) logits
`exp(logit_scale) * cos(image, text) + logit_bias`, CLIP's and SigLIP's form (a softmax over texts for CLIP, a
sigmoid per pair for SigLIP).
"""

from __future__ import annotations

import math
from typing import Optional

import keras
from keras import ops

from keras_vit.nn.initializers import PACKAGE


def l2_normalize(x, axis: int = -1):
    """x / ||x|| along `axis` (in float32; open_clip's `F.normalize` with its epsilon 1e-12 on the norm)."""
    x = ops.cast(x, "float32")
    return x / ops.maximum(ops.sqrt(ops.sum(ops.square(x), axis=axis, keepdims=True)), 1e-12)


@keras.saving.register_keras_serializable(package=PACKAGE)
class ImageTextModel(keras.Model):
    """An image tower and a text tower sharing one embedding space.

    Args:
      image_model: images -> (batch, embed_dim): a `VisionTransformer` whose head is the image projection.
      text_model: token ids -> (batch, embed_dim): a `keras_vit.TextTransformer`.
      logit_scale: the log of the logits' temperature (CLIP starts at log(1/0.07)); a trained weight.
      logit_bias: SigLIP's bias on every logit (None: CLIP's, no bias); a trained weight.
      tokenizer: how texts become the text model's ids: {"kind": "clip", "clean": ...} (CLIP's BPE, shipped with
        keras_vit; kept in the model's config) or a tokenizer object (a `HubTokenizer` read from the repository
        the model came from; not saved with the model). None: `text_preprocessor()` refuses.
      open_clip_config: the `open_clip_config.json` it was loaded from, which `keras_vit.save_open_clip` writes
        back (kept in the model's config).
      naflex: a NaFlex image tower's batch settings, `keras_vit.naflex_batch`'s keywords (patch size, patch budget,
        mean, std, interpolation) as the repository's processor states them (kept in the model's config).
    """

    def __init__(
        self,
        image_model: keras.Model,
        text_model: keras.Model,
        logit_scale: float = math.log(1 / 0.07),
        logit_bias: Optional[float] = None,
        name: str = "image_text_model",
        tokenizer=None,
        open_clip_config: Optional[dict] = None,
        naflex: Optional[dict] = None,
        **kwargs,
    ):
        super().__init__(name=name, **kwargs)
        self.naflex = None if naflex is None else {k: tuple(v) if isinstance(v, list) else v for k, v in naflex.items()}
        if isinstance(tokenizer, dict) and tokenizer.get("kind") != "clip":
            raise ValueError(f"tokenizer={tokenizer!r}: a saved tokenizer is {{'kind': 'clip', 'clean': ...}}.")
        self._tokenizer = tokenizer
        self.open_clip_config = open_clip_config  # the config it was read from, written back by save_open_clip
        self.image_model, self.text_model = image_model, text_model
        self._logit_scale_init = float(logit_scale)
        self._logit_bias_init = None if logit_bias is None else float(logit_bias)
        self.logit_scale = self.add_weight(
            shape=(), initializer=keras.initializers.Constant(self._logit_scale_init), name="logit_scale"
        )
        self.logit_bias = (
            self.add_weight(shape=(), initializer=keras.initializers.Constant(self._logit_bias_init), name="logit_bias")
            if logit_bias is not None
            else None
        )
        self.built = True

    def text_preprocessor(self, context_length: Optional[int] = None):
        """The host-side tokenizer of this model's text tower: texts -> token ids (texts, context length)."""
        tokenizer = self._tokenizer
        if tokenizer is None:
            why = getattr(self, "no_tokenizer", "it was not loaded from a repository that names one")
            raise ValueError(
                f"{self.name} knows no tokenizer ({why}): pass token ids, or a tokenizer such as "
                "keras_vit.ClipTokenizer(...) / keras_vit.HubTokenizer(folder, ...)."
            )
        if isinstance(tokenizer, dict):
            from keras_vit.vit.clip_tokenizer import ClipTokenizer

            return ClipTokenizer(
                context_length or self.text_model.context_length, clean=tokenizer.get("clean", "lower")
            )
        if context_length is not None and context_length != tokenizer.context_length:
            raise ValueError(
                f"this model's tokenizer makes {tokenizer.context_length} ids per text, not {context_length}."
            )
        return tokenizer

    def encode_image(self, images, normalize: bool = True, training=None):
        """Images (batch, H, W, 3), as the image model takes them -> (batch, embed_dim). A frozen image tower
        (`image_model.trainable = False`, LiT's locked tower) runs in inference mode even while training. A NaFlex
        image tower (SigLIP 2's) also takes a NaFlex batch: `keras_vit.naflex_batch`'s dict, or transformers'
        `Siglip2ImageProcessor` output (`keras_vit.vit.naflex`), each image at its own aspect ratio."""
        training = training if self.image_model.trainable else False
        if isinstance(images, dict):
            from keras_vit.vit.naflex import naflex_forward

            features = naflex_forward(self.image_model, images, training=bool(training))
            return l2_normalize(features) if normalize else features
        features = self.image_model(images, training=training)
        return l2_normalize(features) if normalize else features

    def encode_text(self, token_ids, normalize: bool = True, training=None):
        """Token ids (batch, tokens) -> (batch, embed_dim)."""
        features = self.text_model(token_ids, training=training)
        return l2_normalize(features) if normalize else features

    def similarity(self, image_embeddings, text_embeddings):
        """(images, texts) logits from normalised embeddings: exp(logit_scale) * cosine (+ logit_bias)."""
        logits = ops.exp(ops.cast(self.logit_scale, "float32")) * ops.matmul(
            ops.cast(image_embeddings, "float32"), ops.transpose(ops.cast(text_embeddings, "float32"))
        )
        return logits + ops.cast(self.logit_bias, "float32") if self.logit_bias is not None else logits

    def call(self, inputs, training=None):
        images, token_ids = inputs
        return self.similarity(
            self.encode_image(images, training=training), self.encode_text(token_ids, training=training)
        )

    def get_config(self) -> dict:
        return {
            "name": self.name,
            "image_model": keras.saving.serialize_keras_object(self.image_model),
            "text_model": keras.saving.serialize_keras_object(self.text_model),
            "logit_scale": self._logit_scale_init,
            "logit_bias": self._logit_bias_init,
            "tokenizer": self._tokenizer if isinstance(self._tokenizer, dict) else None,
            "open_clip_config": self.open_clip_config,
            "naflex": self.naflex,
        }

    @classmethod
    def from_config(cls, config: dict) -> "ImageTextModel":
        config = dict(config)
        for key in ("image_model", "text_model"):
            config[key] = keras.saving.deserialize_keras_object(config[key])
        return cls(**config)
