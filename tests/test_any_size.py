"""Any input size and any channel count (keras.applications' conventions), checked against fixed-size models
whose position embeddings were resized by scipy, and against timm's documented `in_chans` rule."""

import os

import keras
import numpy as np
import pytest

import keras_vit
from keras_vit.weights import official as checkpoints
from conftest import ROOT, python_run

T = dict(patch_size=4, hidden_size=16, mlp_dim=32, num_heads=2, num_layers=2, classifier_activation=None)


def _random(model, seed=0):
    rng = np.random.default_rng(seed)
    model.set_weights([(rng.normal(size=w.shape) * 0.3).astype("float32") for w in model.get_weights()])
    return model


def _x(h, w, c=3, seed=1):
    return np.random.default_rng(seed).uniform(-1, 1, (2, h, w, c)).astype("float32")


@pytest.mark.parametrize(
    "kw", [dict(), dict(classifier="gap"), dict(resnet_layers=(1,), resnet_width=0.5, patch_size=1)]
)
def test_any_size_model_equals_fixed_models_with_scipy_resized_weights(kw):
    dynamic = _random(
        keras_vit.VisionTransformer(**{**T, **kw}, input_shape=(None, None, 3), classes=3, position_grid=(4, 4))
    )
    assert dynamic.image_size == (None, None) and dynamic.grid_size == (4, 4) and dynamic.dynamic_size
    for h, w in ((16, 16), (24, 32), (8, 40)):
        fixed = keras_vit.VisionTransformer(**{**T, **kw}, input_shape=(h, w, 3), classes=3)
        checkpoints.load_params(fixed, checkpoints.model_params(dynamic), "dynamic", old_grid=(4, 4))  # scipy zoom
        x = _x(h, w)
        np.testing.assert_allclose(dynamic.predict(x, verbose=0), fixed.predict(x, verbose=0), atol=1e-5)


def test_any_size_saves_reloads_and_names_sizes_that_work(tmp_path):
    dynamic = _random(keras_vit.VisionTransformer(**T, input_shape=(None, None, 3), classes=3))
    assert dynamic.grid_size == (56, 56)  # default: the grid of a 224-pixel side
    dynamic.save(tmp_path / "any.keras")
    again = keras.models.load_model(tmp_path / "any.keras")
    assert isinstance(again, keras_vit.VisionTransformer) and again.get_config() == dynamic.get_config()
    x = _x(12, 20)
    np.testing.assert_allclose(again.predict(x, verbose=0), dynamic.predict(x, verbose=0), atol=1e-6)
    with pytest.raises(ValueError, match=r"height 18 is not a multiple of the effective patch size 4 \(try 16 or 20\)"):
        dynamic.predict(_x(18, 16), verbose=0)
    with pytest.raises(ValueError, match=r"width 10 is not a multiple .* 4"):
        dynamic(_x(16, 10))
    features = dynamic.intermediates(_x(8, 12), blocks=[1])
    assert features["blocks"][1].shape == (2, 1 + 2 * 3, 16)


def test_any_size_runs_under_jax_jit():
    code = (
        "import numpy as np, keras_vit, keras\n"
        "m = keras_vit.VisionTransformer(4, 16, 32, 2, 1, input_shape=(None, None, 3), classes=3,"
        " position_grid=(2, 2))\n"
        "for hw in ((8, 8), (12, 16)):\n"
        "    print(keras.backend.backend(), m.predict(np.zeros((1, *hw, 3), 'float32'), verbose=0).shape)\n"
    )
    done = python_run(["-c", code], cwd=ROOT, timeout=300, env=dict(os.environ, KERAS_BACKEND="jax", PYTHONPATH=ROOT))
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["jax", "(1,", "3)", "jax", "(1,", "3)"]


@pytest.mark.parametrize("channels", [1, 4])
def test_keras_applications_conventions_for_other_channel_counts(channels, tmp_path):
    model = keras_vit.VisionTransformer(**T, input_shape=(16, 16, channels), include_top=False, pooling="max")
    assert model.input_shape == (None, 16, 16, channels) and model.output_shape == (None, 16)
    model.save(tmp_path / "m.keras")
    assert keras.models.load_model(tmp_path / "m.keras").channels == channels
    upstream = keras.Input((16, 16, channels))
    shifted = keras.layers.Rescaling(1.0, offset=0.5)(upstream)
    on_tensor = keras_vit.VisionTransformer(**T, input_tensor=shifted, classes=2)
    assert on_tensor.channels == channels and on_tensor.output_shape == (None, 2)


def test_gray_model_from_rgb_weights_equals_rgb_model_on_replicated_gray(tmp_path):
    rgb = _random(keras_vit.VisionTransformer(**T, input_shape=(16, 16, 3), classes=3))
    checkpoints.save_npz(rgb, tmp_path / "rgb.npz")
    gray = keras_vit.load_model(str(tmp_path / "rgb.npz"), **T, input_shape=(16, 16, 1), classes=3)
    image = _x(16, 16, 1)
    np.testing.assert_allclose(
        gray.predict(image, verbose=0), rgb.predict(np.repeat(image, 3, axis=-1), verbose=0), atol=1e-5
    )


@pytest.mark.parametrize("channels", [2, 4, 7])
def test_more_channels_follow_timms_rule(channels, tmp_path):
    rgb = _random(keras_vit.VisionTransformer(**T, input_shape=(16, 16, 3), classes=3))
    checkpoints.save_npz(rgb, tmp_path / "rgb.npz")
    model = keras_vit.load_model(tmp_path / "rgb.npz", input_shape=(16, 16, channels))
    kernel = np.asarray(rgb.patch_embedding.kernel)
    # timm adapt_input_conv: repeat RGB ceil(C/3) times along the input axis, keep C, multiply by 3/C
    expected = np.concatenate([kernel] * (-(-channels // 3)), axis=2)[:, :, :channels] * (3 / channels)
    np.testing.assert_allclose(np.asarray(model.patch_embedding.kernel), expected, rtol=1e-6)
    hybrid = _random(
        keras_vit.VisionTransformer(
            **{**T, "patch_size": 1}, resnet_layers=(1,), resnet_width=0.5, input_shape=(16, 16, 3), classes=3
        )
    )
    checkpoints.save_npz(hybrid, tmp_path / "hybrid.npz")
    one = keras_vit.load_model(tmp_path / "hybrid.npz", input_shape=(16, 16, 1))
    np.testing.assert_allclose(
        np.asarray(one.stem.conv_root.kernel),
        np.asarray(hybrid.stem.conv_root.kernel).sum(axis=2, keepdims=True),
        rtol=1e-6,
    )


def test_any_size_gray_savedmodel_runs_at_two_sizes(tmp_path):
    import tensorflow as tf

    from hub_export.export import export

    model = _random(keras_vit.VisionTransformer(**T, input_shape=(None, None, 1), classes=3, position_grid=(4, 4)))
    loaded = tf.saved_model.load(export(model, tmp_path / "module", "classification"))
    for h, w in ((16, 16), (12, 20)):
        pixels = np.random.default_rng(h).uniform(0, 1, (2, h, w, 1)).astype("float32")  # the module's [0, 1]
        served = loaded.signatures["serving_default"](images=tf.constant(pixels))["outputs"].numpy()
        np.testing.assert_allclose(served, model.predict(pixels * 2 - 1, verbose=0), atol=1e-5)


def test_every_constructor_takes_the_keywords_of_the_class():
    """The keras.applications-style constructors accept every VisionTransformer keyword that is not a size."""
    import inspect

    own = set(inspect.signature(keras_vit.VisionTransformer.__init__).parameters) - {
        "self",
        "kwargs",
        "patch_size",
        "hidden_size",
        "mlp_dim",
        "num_heads",
        "num_layers",
        "resnet_layers",
        "resnet_width",
        "dtype",
        "trainable",
    }
    for name in keras_vit.applications.__dict__:
        if name.startswith(("ViT_", "R50_", "R26_", "R_ViT")):
            assert own <= set(inspect.signature(getattr(keras_vit, name)).parameters), name
    gray = keras_vit.ViT_Ti16(input_shape=(32, 32, 1), include_top=False, pooling="max")
    assert gray.output_shape == (None, 192) and gray.channels == 1
    hybrid = keras_vit.R_ViT_Ti16(input_shape=(None, None, 4), classes=2, gelu_approximate=False)
    assert hybrid.predict(np.zeros((1, 64, 96, 4), "float32"), verbose=0).shape == (1, 2)


def test_inspection_and_cli_defaults_follow_an_any_size_models_input(tmp_path):
    from PIL import Image

    from keras_vit.analysis import inspect

    model = _random(keras_vit.VisionTransformer(**T, input_shape=(None, None, 3), classes=3, position_grid=(4, 4)))
    assert model.base_image_size == (16, 16)
    for h, w in ((16, 16), (12, 20)):
        x = np.clip(_x(h, w), -1, 1)
        assert inspect.attention_rollout(model, x).shape == (2, h, w)
        assert inspect.attention_rollout(model, x, upsample=False).shape == (2, h // 4, w // 4)
        assert inspect.mean_attention_distance(model, x).shape == (2, 2)
    model.save(tmp_path / "any.keras")
    Image.fromarray(np.full((40, 30, 3), 128, "uint8")).save(tmp_path / "img.png")
    assert (
        inspect.main(
            [f"--weights={tmp_path / 'any.keras'}", f"--image={tmp_path / 'img.png'}", f"--out={tmp_path / 'figs'}"]
        )
        == 0
    )
    assert len(os.listdir(tmp_path / "figs")) == 4
