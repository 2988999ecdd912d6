"""The patch embedding (paper eq. 1): the image cut into P x P patches, each mapped linearly to D dimensions.

The kernel has the official checkpoints' layout (P, P, channels, D), so loading one is a rename.
"""

from __future__ import annotations

import keras
from keras import ops

from keras_vit.nn.initializers import PACKAGE as _PACKAGE
from keras_vit.nn.initializers import initial
from keras_vit.nn.specs import ArraySpecs


@keras.saving.register_keras_serializable(package=_PACKAGE)
class PatchEmbedding(ArraySpecs, keras.layers.Layer):
    """Cuts the image into P x P patches and maps each linearly to D dims (eq. 1).

    A P x P convolution with stride P is the same map as flattening each patch
    and multiplying by E. Output: (batch, grid_h * grid_w, D), row-major grid.
    """

    def __init__(self, patch_size: int, hidden_size: int, use_bias: bool = True, **kwargs):
        super().__init__(**kwargs)
        self.patch_size = int(patch_size)
        self.hidden_size = int(hidden_size)
        self.use_bias = bool(use_bias)  # False: CLIP's pre-norm models (timm drops the bias with pre_norm)

    def build(self, input_shape):
        channels = input_shape[-1]
        p = self.patch_size
        self.kernel = self.add_weight(
            name="kernel",
            shape=(p, p, channels, self.hidden_size),
            initializer=initial(keras.initializers.LecunNormal()),
        )
        self.bias = (
            self.add_weight(name="bias", shape=(self.hidden_size,), initializer=initial("zeros"))
            if self.use_bias
            else None
        )

    def call(self, images):
        x = ops.conv(images, self.kernel, strides=self.patch_size, padding="valid")
        if self.bias is not None:
            x = x + self.bias
        return ops.reshape(x, (ops.shape(x)[0], -1, self.hidden_size))

    def compute_output_shape(self, input_shape):
        h, w = input_shape[1], input_shape[2]
        n = None if h is None or w is None else (h // self.patch_size) * (w // self.patch_size)
        return (input_shape[0], n, self.hidden_size)

    def get_config(self):
        return {
            **super().get_config(),
            "patch_size": self.patch_size,
            "hidden_size": self.hidden_size,
            "use_bias": self.use_bias,
        }
