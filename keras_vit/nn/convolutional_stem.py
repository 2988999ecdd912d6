"""A convolutional stem in place of the linear patch embedding (MobileCLIP's ViT-B image tower, timm's
`vit_base_mci_224`; "Early Convolutions Help Transformers See Better", Xiao et al. 2021).

Each layer is a convolution whose kernel equals its stride (no bias), a BatchNorm and the exact GELU; the patch
embedding that follows takes the rest of the patch. The kernels never overlap, so the stem and the embedding are
one function of each P x P patch alone, as the paper's linear embedding is: the token grid, any-size inputs and
position tables are the plain ViT's. The BatchNorm epsilon is 1e-5, PyTorch's default, which timm's `ConvStem`
uses; its momentum 0.1 in PyTorch's convention is Keras' 0.9.
"""

from __future__ import annotations

from typing import Optional, Sequence, Tuple

import keras

from keras_vit.nn.initializers import PACKAGE as _PACKAGE
from keras_vit.nn.initializers import initial
from keras_vit.nn.specs import ArraySpecs
from keras_vit.utils import validate
from keras_vit.nn.mlp import gelu

BATCH_NORM_EPSILON = 1e-5
BATCH_NORM_MOMENTUM = 0.9


def checked_stem(value) -> Optional[Tuple[Tuple[int, int], ...]]:
    """`convolutional_stem` as ((channels, size), ...), or a ValueError naming the keyword."""
    if value is None:
        return None
    layers = (
        tuple(tuple(layer) if isinstance(layer, (list, tuple)) else (layer,) for layer in value)
        if isinstance(value, (list, tuple))
        else None
    )
    if not layers or any(len(layer) != 2 for layer in layers):
        raise ValueError(
            f"convolutional_stem={value!r}: expected (channels, kernel size) pairs, one per layer, "
            "e.g. ((192, 4), (192, 2)) for MobileCLIP's ViT-B."
        )
    return tuple(
        (
            validate.integer("convolutional_stem channels", c, minimum=1),
            validate.integer("convolutional_stem kernel size", k, minimum=1),
        )
        for c, k in layers
    )


def stem_stride(layers: Optional[Sequence[Tuple[int, int]]]) -> int:
    """Pixels per side the stem's layers down-sample (1 without a stem)."""
    stride = 1
    for _, size in layers or ():
        stride *= size
    return stride


def embedding_patch(patch_size: int, layers: Optional[Sequence[Tuple[int, int]]], hybrid: bool = False) -> int:
    """The patch embedding's kernel after the stem: the part of `patch_size` the stem leaves; a ValueError naming
    both where the stem does not divide the patch, or where a ResNet stem is asked for as well."""
    if layers and hybrid:
        raise ValueError("convolutional_stem and resnet_layers are two stems; a model has one.")
    stride = stem_stride(layers)
    if patch_size % stride:
        raise ValueError(
            f"convolutional_stem={[list(layer) for layer in layers]} down-samples {stride}x, which does "
            f"not divide patch_size={patch_size}: the embedding takes the rest of each patch."
        )
    return patch_size // stride


@keras.saving.register_keras_serializable(package=_PACKAGE)
class ConvolutionalStem(ArraySpecs, keras.layers.Layer):
    """Images -> the stem's feature map, (batch, H / stride, W / stride, last channels)."""

    def __init__(self, layers: Sequence[Tuple[int, int]], **kwargs):
        super().__init__(**kwargs)
        self.stem_layers = checked_stem(layers)
        self.convs, self.norms = [], []
        for i, (channels, size) in enumerate(self.stem_layers):
            self.convs.append(
                keras.layers.Conv2D(
                    channels,
                    size,
                    strides=size,
                    padding="valid",
                    use_bias=False,
                    dtype=self.dtype_policy,
                    kernel_initializer=initial(keras.initializers.HeNormal()),
                    name=f"conv_{i}",
                )
            )
            self.norms.append(
                keras.layers.BatchNormalization(
                    epsilon=BATCH_NORM_EPSILON,
                    momentum=BATCH_NORM_MOMENTUM,
                    dtype=self.dtype_policy,
                    gamma_initializer=initial("ones"),
                    beta_initializer=initial("zeros"),
                    moving_mean_initializer=initial("zeros"),
                    moving_variance_initializer=initial("ones"),
                    name=f"norm_{i}",
                )
            )

    def build(self, input_shape):
        shape = tuple(input_shape)
        for conv, norm in zip(self.convs, self.norms):
            conv.build(shape)
            shape = conv.compute_output_shape(shape)
            norm.build(shape)

    def call(self, images, training=None):
        x = images
        for conv, norm in zip(self.convs, self.norms):
            x = gelu(norm(conv(x), training=training), approximate=False)  # erf itself: exports take it
        return x

    def compute_output_shape(self, input_shape):
        shape = tuple(input_shape)
        for conv in self.convs:
            shape = conv.compute_output_shape(shape)
        return shape

    def get_config(self):
        return {**super().get_config(), "layers": [list(layer) for layer in self.stem_layers]}
