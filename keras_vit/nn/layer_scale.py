"""LayerScale (Touvron et al., "Going deeper with image transformers", 2021; used by DeiT-III and DINOv2): a
learned per-channel scale on each residual branch, initialised small so that deep stacks start close to the
identity. Not part of the original ViT: its checkpoints have none, and `save_npz` refuses a model with it."""

from __future__ import annotations

import keras

from keras_vit.nn.initializers import PACKAGE, initial
from keras_vit.nn.specs import ArraySpecs


@keras.saving.register_keras_serializable(package=PACKAGE)
class LayerScale(ArraySpecs, keras.layers.Layer):
    """x * scale, with `scale` of shape (D,) initialised to `init_value` (timm's `ls1.gamma` / `ls2.gamma`)."""

    def __init__(self, init_value: float, **kwargs):
        super().__init__(**kwargs)
        self.init_value = float(init_value)

    def build(self, input_shape):
        self.scale = self.add_weight(
            name="scale", shape=(input_shape[-1],), initializer=initial(keras.initializers.Constant(self.init_value))
        )

    def call(self, x):
        return x * keras.ops.cast(self.scale, x.dtype)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return {**super().get_config(), "init_value": self.init_value}
