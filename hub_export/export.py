"""SavedModels in TF Hub's reusable format, written atomically.

The root object carries `variables`, `trainable_variables`, `regularization_losses`
and a `tf.function` `__call__(images, training)` traced for both `training` values:
what `hub.KerasLayer(path, trainable=True)` needs to fine-tune a module (a plain
Keras 3 `model.export()` is serving-only). Images come in [0, 1] as TF Hub's image
modules expect and are mapped to the model's [-1, 1] inside.
"""

from __future__ import annotations

import json
import os
from typing import Optional

import keras
import tensorflow as tf

from hub_export import model_card
from keras_vit import atomic
from keras_vit.models import ensure_vit

VARIANTS = ("feature_vector", "classification")


def _output_model(model: keras.Model, variant: str) -> keras.Model:
    if variant == "feature_vector":
        return model.feature_model()
    if not model.include_top:
        raise ValueError(f"variant='classification' needs a model with a head (include_top=True); "
                         f"{model.name!r} has none.")
    return model.logits_model()


def is_our_export(path: str) -> bool:
    """True for a directory written by `export` (its metadata.json names our exporter)."""
    try:
        with open(os.path.join(path, "metadata.json")) as f:
            return json.load(f).get("exporter") == model_card.EXPORTER
    except (OSError, ValueError, AttributeError):
        return False


class _Module(tf.Module):
    """Holds the Keras model so its variables are tracked, plus the hub attributes."""

    def __init__(self, net: keras.Model, image_size, channels: int = 3):
        super().__init__()
        self._net = net
        h, w = image_size  # None: any size (a model built with input_shape=(None, None, C))
        self._variables = [v.value if hasattr(v, "value") else v for v in net.variables]
        self._trainable = [v.value if hasattr(v, "value") else v for v in net.trainable_variables]

        @tf.function(input_signature=[tf.TensorSpec([None, h, w, channels], tf.float32, name="images")])
        def serve(images):
            return {"outputs": self._net(images * 2.0 - 1.0, training=False)}

        @tf.function
        def call(images, training=False):
            return self._net(images * 2.0 - 1.0, training=training)

        spec = tf.TensorSpec([None, h, w, channels], tf.float32)
        call.get_concrete_function(spec, training=False)
        call.get_concrete_function(spec, training=True)
        self.serve = serve
        self.call_fn = call


def _save(net: keras.Model, directory: str, image_size, channels: int = 3) -> None:
    module = _Module(net, image_size, channels)
    root = tf.train.Checkpoint()  # an AutoTrackable root whose plain attributes are saved as-is
    root.net_module = module
    root.variables = list(module._variables)
    root.trainable_variables = list(module._trainable)
    root.regularization_losses = []
    root.__call__ = module.call_fn
    tf.saved_model.save(root, directory, signatures={"serving_default": module.serve})


def export(model: keras.Model, out_dir: str, variant: str = "feature_vector", *, overwrite: bool = False,
           source: Optional[str] = None, name: Optional[str] = None) -> str:
    """Writes `model` as a TF Hub module at `out_dir` (+ README.md model card, metadata.json).

    Args:
      model: a `keras_vit.VisionTransformer` taking [-1, 1] images (built with the TF backend).
      out_dir: the module directory; an earlier export there is replaced only with
        `overwrite=True`, and anything else there never is.
      variant: "feature_vector" (pre-logits, [batch, D]) or "classification" (logits).
      source: where the weights came from, recorded in the card.
    The module is built in a temporary directory beside `out_dir` and renamed into
    place, so `out_dir` never holds a half-written module.
    """
    if variant not in VARIANTS:
        raise ValueError(f"Unknown variant {variant!r}; expected one of {VARIANTS}.")
    if keras.backend.backend() != "tensorflow":
        raise ValueError("hub_export needs the TensorFlow backend (KERAS_BACKEND=tensorflow).")
    ensure_vit(model)
    if model.include_preprocessing:
        raise ValueError("Export a model built with include_preprocessing=False: the module takes [0, 1] images.")
    net = _output_model(model, variant)
    meta = model_card.metadata(name=name or model.vit_config.name, variant=variant, image_size=model.image_size,
                               output_dim=int(net.output_shape[-1]), source=source, architecture=model.describe())

    def fill(tmp: str) -> None:
        _save(net, tmp, model.image_size, model.channels)
        atomic.write_json(os.path.join(tmp, "metadata.json"), meta)
        atomic.write_file(os.path.join(tmp, "README.md"), model_card.model_card(meta))

    return atomic.write_directory(out_dir, fill, overwrite=overwrite, replaceable=is_our_export)
