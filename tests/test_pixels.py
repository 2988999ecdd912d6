"""One input contract for pixels: every host-side entry point refuses empty and channels-first images naming the
shape, and warns on floats inside [0, 1]; NaFlex batches refuse [0, 255]-unit statistics and impossible
coordinates."""

import warnings

import numpy as np
import pytest

import keras_vit
from keras_vit.analysis.images import preprocess_image

IMAGE = np.random.default_rng(0).uniform(0, 255, (20, 28, 3)).astype("float32")


def _entry_points():
    return {
        "naflex_batch": lambda x: keras_vit.naflex_batch([x], 4, 16),
        "preprocess_image": lambda x: preprocess_image(x, None, (8, 8)),
        "ImagePreprocessing": lambda x: keras_vit.ImagePreprocessing((8, 8))(x[None] if x.ndim == 3 else x),
    }


@pytest.mark.parametrize("name", ["naflex_batch", "preprocess_image"])
@pytest.mark.parametrize(
    "image, message",
    [
        (np.zeros((0, 5, 3), "float32"), "empty image of shape (0, 5, 3)"),
        (np.zeros((5, 0, 3), "float32"), "empty image of shape (5, 0, 3)"),
        (np.zeros((3, 20, 28), "float32"), "looks channels-first"),
        (np.zeros((20, 28), "float32"), "takes (H, W, C) images"),
        (np.full((4, 4, 3), np.nan, "float32"), "NaN or infinite"),
    ],
)
def test_bad_images_are_refused_naming_the_shape(name, image, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        _entry_points()[name](image)


@pytest.mark.parametrize("name", ["naflex_batch", "preprocess_image", "ImagePreprocessing"])
def test_unit_range_floats_warn_and_pixels_do_not(name):
    with pytest.warns(UserWarning, match=f"{name} takes pixels in \\[0, 255\\]; got floats in \\[0, 1\\]"):
        _entry_points()[name](IMAGE / 255.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _entry_points()[name](IMAGE)


def test_naflex_statistics_in_255_units_are_refused():
    with pytest.raises(ValueError, match=r"mean=\(127.5, 127.5, 127.5\) is in \[0, 255\] units"):
        keras_vit.naflex_batch([IMAGE], 4, 16, mean=(127.5,) * 3, std=(127.5,) * 3)


def test_hand_made_naflex_coordinates_are_checked():
    model = keras_vit.VisionTransformer(
        4,
        16,
        32,
        2,
        1,
        input_shape=(None, None, 3),
        classes=3,
        variant=dict(position_resampling=dict(grid=(2, 2)), prefix_position_embedding=False),
    )
    batch = keras_vit.naflex_batch([IMAGE], 4, 16)
    assert np.isfinite(keras_vit.naflex_forward(model, batch)).all()
    negative = dict(batch, patch_coord=batch["patch_coord"].copy())
    negative["patch_coord"][0, 0] = (-1, 0)
    with pytest.raises(ValueError, match=r"image 0: a valid patch at a negative \(row, column\)"):
        keras_vit.naflex_forward(model, negative)
    repeated = dict(batch, patch_coord=batch["patch_coord"].copy())
    repeated["patch_coord"][0, 1] = repeated["patch_coord"][0, 0]
    with pytest.raises(ValueError, match="two valid patches at the same"):
        keras_vit.naflex_forward(model, repeated)
