"""`ImagePreprocessing`: a checkpoint's evaluation preprocessing as a Keras layer (resize, centre crop,
normalise), built from its `DataConfig`.

The resize is separable resampling written as two matrix products in `keras.ops`, so it runs on every
backend, under XLA / jit, inside SavedModels and for images of any size known only at run time. Each output
pixel is a normalised weighted sum of the input pixels its kernel covers; with antialiasing the kernel is
widened by the downscaling factor, as PIL (and so timm and `transformers`) resize, and without it the kernel
keeps its width, as `tf.image.resize` does in the original code's evaluation. The centre crop is folded into
the matrices: only the rows of the kept pixels are computed. Kernels: bilinear (triangle), bicubic (Keys,
a = -0.5, PIL's and TensorFlow's), nearest.
"""

from __future__ import annotations

from typing import Optional, Sequence, Tuple, Union

import keras
import numpy as np
from keras import ops

from keras_vit.vit import pixels
from keras_vit.vit.data_config import DataConfig, center_crop_offset
from keras_vit.nn.initializers import PACKAGE
from keras_vit.nn.resampling import resampling_matrix
from keras_vit.nn.specs import ArraySpecs


def _plan(config: DataConfig, height, width, size: Tuple[int, int]):
    """((resized_h, resized_w), (top, left)) for an input of `height` x `width`: exact integer rules with
    Python ints; the same rules in `keras.ops` when a size is only known at run time (TensorFlow graphs)."""
    if isinstance(height, int) and isinstance(width, int):
        resized = config.resized_size(height, width, size)
        return resized, tuple(center_crop_offset(r, s) for r, s in zip(resized, size))
    h, w = ops.cast(height, "int32"), ops.cast(width, "int32")
    scaled = [int(s / config.crop_pct // 1) for s in size]
    if config.crop_mode == "squash":
        resized = tuple(scaled)
    elif scaled[0] == scaled[1]:
        short, long = ops.minimum(h, w), ops.maximum(h, w)
        new_long = ops.floor_divide(scaled[0] * long, short)
        resized = (ops.where(h <= w, scaled[0], new_long), ops.where(h <= w, new_long, scaled[0]))
    else:
        ratio = ops.maximum(scaled[0] / ops.cast(h, "float32"), scaled[1] / ops.cast(w, "float32"))
        resized = tuple(ops.cast(ops.round(ops.cast(d, "float32") * ratio), "int32") for d in (h, w))
    offsets = []
    for r, s in zip(resized, size):
        extra = ops.cast(r, "int32") - s  # round(extra / 2), half to even: k + (k odd and extra odd)
        half = ops.floor_divide(extra, 2)
        offsets.append(half + ops.mod(half, 2) * ops.mod(extra, 2))
    return resized, tuple(offsets)


@keras.saving.register_keras_serializable(package=PACKAGE)
class ImagePreprocessing(ArraySpecs, keras.layers.Layer):
    """Pixels in [0, 255] (any dtype, any size) -> what a checkpoint's model takes.

    Resizes (shorter side or both sides to `size / crop_pct`, per `data_config.crop_mode`), crops the centre
    `size`, and normalises by the data config's mean and std. Takes a batch (N, H, W, C) or one image
    (H, W, C), channels last, and always returns a float32 batch.

    Args:
      size: (height, width) of the output; None keeps the input's size (normalisation only: what a model built
        with `include_preprocessing=True` does inside).
      data_config: a `keras_vit.DataConfig` or its dict (default: the original code's evaluation).
      normalize: False returns resized pixels still in [0, 255] (for a model that normalises inside).
    """

    def __init__(
        self,
        size: Optional[Sequence[int]] = None,
        data_config: Union[None, dict, DataConfig] = None,
        normalize: bool = True,
        **kwargs,
    ):
        kwargs.setdefault("dtype", "float32")
        super().__init__(**kwargs)
        if size is not None:
            if len(size) != 2 or any(isinstance(s, bool) or not isinstance(s, int) or s <= 0 for s in size):
                raise ValueError(f"size must be (height, width) of positive ints or None, got {size!r}.")
            size = (int(size[0]), int(size[1]))
        self.size = size
        self.data_config = DataConfig.from_dict(data_config)
        self.normalize = bool(normalize)

    def __call__(self, images, *args, **kwargs):
        """`keras.layers.Layer.__call__`; a NumPy batch of floats inside [0, 1] warns once: the layer takes pixels
        in [0, 255], and such values would all land near the mean (tensors are not read back)."""
        if isinstance(images, np.ndarray):
            pixels.warn_if_unit_range([images], "ImagePreprocessing", owner=self)
        return super().__call__(images, *args, **kwargs)

    def call(self, images):
        x = ops.cast(images, "float32")
        if len(x.shape) == 3:
            x = ops.expand_dims(x, 0)
        if len(x.shape) != 4:
            raise ValueError(f"ImagePreprocessing takes (H, W, C) or (N, H, W, C) images, got shape {x.shape}.")
        if x.shape[-1] is not None and x.shape[-1] > 4 and x.shape[1] is not None and x.shape[1] <= 4:
            raise ValueError(
                f"ImagePreprocessing takes channels-last images (N, H, W, C); shape {tuple(x.shape)} "
                "looks channels-first (N, C, H, W): transpose it (x.transpose(0, 2, 3, 1))."
            )
        if self.size is not None:
            x = self._resize(x)
        if self.normalize:
            mean, std = self.data_config.for_channels(x.shape[-1])
            scale = ops.convert_to_tensor([1.0 / (255.0 * s) for s in std], "float32")
            shift = ops.convert_to_tensor([m / s for m, s in zip(mean, std)], "float32")
            x = x * scale - shift
        return x

    def _resize(self, x):
        """Resize + centre crop as two matrix products, in the order PIL runs its two passes
        (`DataConfig.pass_order`, `_rows_first`); a bicubic pass's overshoot is clipped after each
        pass, as PIL does."""
        config = self.data_config
        shape = ops.shape(x)
        height = x.shape[1] if x.shape[1] is not None else shape[1]
        width = x.shape[2] if x.shape[2] is not None else shape[2]
        resized, offsets = _plan(config, height, width, self.size)
        rows = resampling_matrix(height, resized[0], offsets[0], self.size[0], config.interpolation, config.antialias)
        cols = resampling_matrix(width, resized[1], offsets[1], self.size[1], config.interpolation, config.antialias)
        clip = config.interpolation == "bicubic"
        if config.pass_order == "pillow12" or not clip:  # without clipping the two orders are the same map
            return _two_passes(x, rows, cols, clip, rows_first=False)
        first = _rows_first(height, width, resized)
        if isinstance(first, bool):
            return _two_passes(x, rows, cols, clip, first)
        return ops.where(first, _two_passes(x, rows, cols, clip, True), _two_passes(x, rows, cols, clip, False))

    def compute_output_shape(self, input_shape):
        shape = tuple(input_shape)
        if len(shape) == 3:
            shape = (1, *shape)
        return (shape[0], *(self.size or shape[1:3]), shape[3])

    def get_config(self) -> dict:
        config = super().get_config()
        config.update(
            size=list(self.size) if self.size else None,
            data_config=self.data_config.to_dict(),
            normalize=self.normalize,
        )
        return config


def _rows_first(height, width, resized):
    """Whether Pillow 13 resizes rows before columns (its `ImagingResampleInner`): when the height shrinks by more
    than twice as many pixels as the width. A bool for sizes known now, a scalar tensor for run-time sizes."""
    if all(isinstance(v, int) for v in (height, width, *resized)):
        shrink_h, shrink_w = height - resized[0], width - resized[1]
        return shrink_h > 0 and shrink_h > 2 * shrink_w
    shrink_h = ops.cast(height, "int32") - ops.cast(resized[0], "int32")
    shrink_w = ops.cast(width, "int32") - ops.cast(resized[1], "int32")
    return ops.logical_and(shrink_h > 0, shrink_h > 2 * shrink_w)


def _two_passes(x, rows, cols, clip: bool, rows_first: bool):
    """(N, H, W, C) through the row matrix (out_h, H) and the column matrix (out_w, W), `rows_first` or columns
    first, clipped to [0, 255] after each pass when `clip`."""
    clipped = (lambda t: ops.clip(t, 0.0, 255.0)) if clip else (lambda t: t)
    if rows_first:
        return clipped(ops.einsum("pw,nowc->nopc", cols, clipped(ops.einsum("oh,nhwc->nowc", rows, x))))
    return clipped(ops.einsum("oh,nhpc->nopc", rows, clipped(ops.einsum("pw,nhwc->nhpc", cols, x))))


def normalize_pixels(pixels, config: DataConfig, channels: int):
    """Pixels in [0, 255] -> (p / 255 - mean) / std, as numpy for numpy input and as the input's own kind of
    tensor otherwise (the original code's config keeps its exact (p - 127.5) / 127.5)."""
    import numpy as np

    mean, std = config.for_channels(channels)
    if set(mean) == {0.5} and set(std) == {0.5}:
        return (pixels - 127.5) / 127.5
    scale = np.asarray([1.0 / (255.0 * s) for s in std], "float32")
    shift = np.asarray([m / s for m, s in zip(mean, std)], "float32")
    if isinstance(pixels, np.ndarray):
        return pixels.astype("float32") * scale - shift
    return ops.cast(pixels, "float32") * ops.convert_to_tensor(scale) - ops.convert_to_tensor(shift)


class PreprocessingAPI:
    """What a `VisionTransformer` knows about its inputs and outputs: the data config its checkpoint was
    evaluated with (`data_config`), the range it takes, the preprocessing layer that produces it, and the
    names of its classes. Mixed into the model; needs `data_config`, `include_preprocessing`, `channels`,
    `base_image_size`, `classes` and `include_top`."""

    @property
    def input_range(self) -> Tuple[float, float]:
        """Pixel range the model takes: (0, 255) with `include_preprocessing`, else the range of its data
        config's normalisation ((-1, 1) for the original code's mean = std = 0.5)."""
        return (0.0, 255.0) if self.include_preprocessing else self.data_config.input_range(self.channels)

    def to_input_range(self, pixels):
        """Pixels in [0, 255], already at the model's size, mapped into `input_range` (what every CLI and
        recipe feeds the model). Use `preprocessor()` for images of another size."""
        return pixels if self.include_preprocessing else normalize_pixels(pixels, self.data_config, self.channels)

    def preprocessor(self, size: Optional[Sequence[int]] = None) -> ImagePreprocessing:
        """The layer that turns images in [0, 255] of any size and dtype into this model's input: resized and
        cropped per `data_config` to `size` (default `base_image_size`), normalised unless the model does that
        itself (`include_preprocessing`)."""
        return ImagePreprocessing(
            tuple(size or self.base_image_size),
            self.data_config,
            normalize=not self.include_preprocessing,
            name=f"{self.name}_preprocessing",
        )

    def set_class_names(self, names) -> None:
        """Records the names of the head's classes (in output order: `train.class_names` of the folder it was
        fine-tuned on) as the data config's labels, so `decode`, batch inference, `.keras` files, timm and
        `transformers` repositories and exports name them. A count other than the head's is refused."""
        import dataclasses

        from keras_vit.vit.labels import label_count

        if not self.include_top:
            raise ValueError(f"Model {self.name!r} has no classification head (include_top=False): no classes to name.")
        config = dataclasses.replace(self.data_config, labels=names if isinstance(names, str) else tuple(names))
        if config.for_head(self.classes).labels is None:
            raise ValueError(
                f"{label_count(config.labels)} class names for the {self.classes}-class head of {self.name!r}."
            )
        self.data_config = config

    def decode(self, predictions, top: int = 5) -> list:
        """`keras_vit.decode_predictions` with this model's label set (`data_config.labels`, else the shipped
        set with as many classes as the head)."""
        from keras_vit.vit.labels import decode_predictions

        if not self.include_top:
            raise ValueError(f"Model {self.name!r} has no classification head (include_top=False): nothing to decode.")
        return decode_predictions(predictions, top=top, labels=self.data_config.labels)
