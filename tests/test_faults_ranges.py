"""Values of the wrong range or layout are named wherever they enter: direct calls, `intermediates`, the
preprocessor, `DataConfig`, position-embedding resizing."""

import os
import warnings

import numpy as np
import pytest

import keras_vit
from conftest import FIXTURES


def _tiny():
    return keras_vit.VisionTransformer(8, 32, 64, 4, 1, input_shape=(32, 32, 3), classes=3)


def _pixels(dtype="float32"):
    return np.random.default_rng(0).integers(0, 256, (2, 32, 32, 3)).astype(dtype)


def test_direct_calls_and_intermediates_warn_about_pixels_as_predict_does():
    with pytest.warns(UserWarning, match=r"model\(x\): .* takes values in \[-1, 1\]"):
        _tiny()(_pixels())
    with pytest.warns(UserWarning, match="intermediates: .*integer pixels"):
        _tiny().intermediates(_pixels("uint8"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _tiny()(np.random.default_rng(0).uniform(-1, 1, (2, 32, 32, 3)).astype("float32"))


def test_preprocessor_names_unit_floats_and_channels_first_batches():
    preprocessor = keras_vit.load_model(os.path.join(FIXTURES, "timm_hub", "plain")).preprocessor()
    with pytest.warns(UserWarning, match=r"pixels in \[0, 255\]; got floats in \[0, 1\]"):
        preprocessor(np.random.default_rng(0).uniform(0, 1, (2, 40, 40, 3)).astype("float32"))
    with pytest.raises(ValueError, match="looks channels-first"):
        preprocessor(np.zeros((2, 3, 50, 50), "float32"))


def test_data_config_in_255_units_is_refused():
    with pytest.raises(ValueError, match="must be in \\[0, 1\\] pixel units.*divide them by 255"):
        keras_vit.DataConfig(mean=(123.675, 116.28, 103.53), std=(58.395, 57.12, 57.375))
    keras_vit.DataConfig(mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225))


def test_resize_position_embeddings_refuses_a_negative_prefix():
    with pytest.raises(ValueError, match="num_prefix_tokens must be >= 0"):
        keras_vit.resize_position_embeddings(np.zeros((1, 17, 8)), (2, 2), num_prefix_tokens=-1)


def test_a_grayscale_batch_through_the_preprocessor_is_named_at_the_model_call():
    model = keras_vit.load_model(os.path.join(FIXTURES, "timm_hub", "plain"))
    gray = model.preprocessor()(np.zeros((1, 40, 40, 1), "uint8"))
    with pytest.raises(ValueError, match=r"images must be \(batch, 32, 32, 3\).*got \(1, 32, 32, 1\)"):
        model(gray)


def test_a_workdir_lock_that_is_a_directory_is_one_line_and_left_alone(tmp_path):
    from recipes.trainer import lock

    (tmp_path / lock.LOCK_NAME).mkdir()
    with pytest.raises(lock.WorkdirBusy, match="is not a lock file"):
        lock.acquire(str(tmp_path))
    assert (tmp_path / lock.LOCK_NAME).is_dir()


def test_a_class_folder_or_file_name_that_is_not_utf8_is_named(tmp_path):
    from recipes import folder

    root = os.fsencode(str(tmp_path))
    for cls in (b"cats", b"dogs\xff"):
        os.makedirs(os.path.join(root, cls))
        with open(os.path.join(root, cls, b"a.png"), "wb") as f:
            f.write(b"x")
    with pytest.raises(ValueError, match="not valid UTF-8"):
        folder.scan(str(tmp_path))


def test_preprocess_input_twice_warns():
    once = keras_vit.preprocess_input(_pixels())
    with pytest.warns(UserWarning, match="look preprocessed already"):
        keras_vit.preprocess_input(once)


def test_attention_rollout_refuses_non_finite_images():
    from keras_vit.analysis import inspect

    images = np.zeros((1, 32, 32, 3), "float32")
    images[0, 0, 0, 0] = np.nan
    with pytest.raises(ValueError, match="non-finite"):
        inspect.attention_rollout(_tiny(), images)
