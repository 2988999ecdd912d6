"""The TF Hub module format: a SavedModel whose root carries what `hub.KerasLayer(path, trainable=True)` needs.

The root object holds `variables`, `trainable_variables`, `regularization_losses` and a `tf.function`
`__call__(images, training)` traced for both `training` values (a plain Keras 3 `model.export()` is serving-only),
plus the `serving_default` signature. Images come in [0, 1], as TF Hub's image modules take them, of any size;
inside, the checkpoint's own preprocessing brings them to the model's input. TensorFlow writes it, so it is
imported here and not by `hub_export` itself.
"""

from __future__ import annotations

import keras
import tensorflow as tf


class _Module(tf.Module):
    """Holds the Keras model so its variables are tracked, plus the hub attributes."""

    def __init__(self, net: keras.Model, preprocessing, channels: int = 3):
        super().__init__()
        self._net = net
        self._preprocessing = preprocessing
        self._variables = [v.value if hasattr(v, "value") else v for v in net.variables]
        self._trainable = [v.value if hasattr(v, "value") else v for v in net.trainable_variables]

        @tf.function(input_signature=[tf.TensorSpec([None, None, None, channels], tf.float32, name="images")])
        def serve(images):
            return {"outputs": self._net(self._preprocessing(images * 255.0), training=False)}

        @tf.function
        def call(images, training=False):
            return self._net(self._preprocessing(images * 255.0), training=training)

        spec = tf.TensorSpec([None, None, None, channels], tf.float32)
        call.get_concrete_function(spec, training=False)
        call.get_concrete_function(spec, training=True)
        self.serve = serve
        self.call_fn = call


def save(net: keras.Model, directory: str, preprocessing, channels: int = 3) -> None:
    """Writes `net` behind `preprocessing` (a layer taking pixels in [0, 255]) as a TF Hub module in `directory`."""
    module = _Module(net, preprocessing, channels)
    root = tf.train.Checkpoint()  # an AutoTrackable root whose plain attributes are saved as-is
    root.net_module = module
    root.variables = list(module._variables)
    root.trainable_variables = list(module._trainable)
    root.regularization_losses = []
    root.__call__ = module.call_fn
    tf.saved_model.save(root, directory, signatures={"serving_default": module.serve})
