"""The checkpoint's preprocessing (`DataConfig`, `ImagePreprocessing`, `model.preprocessor()`) against
references computed independently: PIL's resize with torchvision's integer rules written out here, numpy's
normalisation, TensorFlow's own resize for the original code's evaluation, and (slow) timm's `create_transform`."""

import importlib.util
import json
import math
import os
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf
from PIL import Image
from skimage import data

import keras_vit
from keras_vit.analysis.images import preprocess_image
from keras_vit.vit.data_config import IMAGENET_MEAN, IMAGENET_STD

from conftest import ROOT, python_run

SIZE = 224
# the three configs: AugReg in timm ([-1, 1], crop 0.9), ImageNet mean/std at crop 0.875, crop 1.0
CONFIGS = {
    "augreg": dict(crop_pct=0.9, crop_mode="center", interpolation="bicubic", antialias=True),
    "imagenet_0.875": dict(
        mean=IMAGENET_MEAN,
        std=IMAGENET_STD,
        crop_pct=0.875,
        crop_mode="center",
        interpolation="bicubic",
        antialias=True,
    ),
    "crop_1.0": dict(crop_pct=1.0, crop_mode="center", interpolation="bicubic", antialias=True),
}


def _photos() -> dict:
    """scikit-image's photos at several sizes and both orientations (a tall one made by transposing)."""
    return {
        "astronaut": data.astronaut(),
        "chelsea": data.chelsea(),
        "coffee": data.coffee(),
        "rocket": data.rocket(),
        "rocket_tall": np.ascontiguousarray(data.rocket().transpose(1, 0, 2)),
    }


def _pil_reference(image: np.ndarray, config: dict) -> np.ndarray:
    """torchvision's eval transform, written out: shorter side to floor(224 / crop_pct) with PIL's bicubic, the
    longer side int(short * long / short_in), centre crop at round((have - want) / 2); pixels in [0, 255]."""
    h, w = image.shape[:2]
    short = math.floor(SIZE / config["crop_pct"])
    nh, nw = (short, int(short * w / h)) if h <= w else (int(short * h / w), short)
    resized = np.asarray(Image.fromarray(image).resize((nw, nh), Image.BICUBIC), "float64")
    top, left = int(round((nh - SIZE) / 2.0)), int(round((nw - SIZE) / 2.0))
    return resized[top : top + SIZE, left : left + SIZE]


def _layer(config: dict, normalize: bool = False):
    return keras_vit.ImagePreprocessing((SIZE, SIZE), config, normalize=normalize)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_resize_and_crop_match_pil_with_torchvision_rules(name):
    config, worst, means = CONFIGS[name], 0.0, []
    for photo, image in _photos().items():
        ours = np.asarray(_layer(config)(image))[0]
        want = _pil_reference(image, config)
        assert ours.shape == want.shape == (SIZE, SIZE, 3), photo
        worst, means = max(worst, float(np.abs(ours - want).max())), means + [float(np.abs(ours - want).mean())]
    # PIL rounds to 8 bits after each pass; measured under Pillow 13: max 1.04, mean 0.31 levels of 255
    assert worst <= 1.2 and max(means) <= 0.5, (worst, means)


@pytest.mark.parametrize("crop_mode,crop_pct", [("squash", 1.0), ("squash", 0.9)])
def test_squashed_portraits_match_the_installed_pil(crop_mode, crop_pct):
    """Portraits squashed to a square shrink their height most: Pillow 13 resizes rows first there."""
    import importlib.util
    import sys

    sys.path.insert(0, os.path.join(ROOT, "tools"))
    reference = importlib.import_module("make_pillow12_reference")
    config = dict(crop_pct=crop_pct, crop_mode=crop_mode, interpolation="bicubic", antialias=True)
    for photo, image in reference.photos().items():
        want = reference.resize_crop(image, crop_mode, crop_pct).astype("float64")
        assert np.abs(np.asarray(_layer(config)(image))[0] - want).max() <= 1.2, photo


def test_pass_order_pillow12_matches_references_made_under_pillow_12():
    """tests/fixtures/pillow12 (tools/make_pillow12_reference.py): evaluations made under Pillow <= 12 ask for
    the older order (columns always first) and get it within the same bound."""
    import sys

    sys.path.insert(0, os.path.join(ROOT, "tools"))
    from make_pillow12_reference import photos

    refs = np.load(os.path.join(ROOT, "tests", "fixtures", "pillow12", "resized.npz"))
    assert str(refs["pillow"]).startswith("12.")
    worst = {}
    for key in refs.files:
        if key == "pillow":
            continue
        name, case = key.split("/")
        mode, pct = case.rsplit("_", 1)
        config = dict(
            crop_pct=float(pct), crop_mode=mode, interpolation="bicubic", antialias=True, pass_order="pillow12"
        )
        worst[key] = float(np.abs(np.asarray(_layer(config)(photos()[name]))[0] - refs[key]).max())
    assert max(worst.values()) <= 1.2, worst


def test_normalisation_equals_numpy():
    config, image = CONFIGS["imagenet_0.875"], data.chelsea()
    resized = np.asarray(_layer(config)(image))[0]
    want = (resized / 255.0 - np.asarray(IMAGENET_MEAN)) / np.asarray(IMAGENET_STD)
    np.testing.assert_allclose(np.asarray(_layer(config, normalize=True)(image))[0], want, atol=1e-5)


def test_original_evaluation_equals_tensorflow_resize():
    """Our releases: square resize, bilinear without antialiasing (tf.image.resize), [-1, 1]."""
    model = keras_vit.VisionTransformer(patch_size=16, hidden_size=8, mlp_dim=8, num_heads=2, num_layers=1)
    for image in _photos().values():
        want = tf.image.resize(image.astype("float32"), (SIZE, SIZE), method="bilinear").numpy() / 127.5 - 1
        np.testing.assert_allclose(np.asarray(model.preprocessor()(image))[0], want, atol=2e-4)


def test_numpy_reference_function_agrees_with_the_layer():
    for config in (*CONFIGS.values(), {}, dict(interpolation="nearest")):
        for image in (data.chelsea(), data.rocket().astype("float32")):
            layer = np.asarray(_layer(config, normalize=True)(image))[0]
            reference = preprocess_image(image, config, (SIZE, SIZE))
            # the uint8 path goes through PIL (8-bit passes): up to ~1.1 levels of 255, scaled by 1 / (255 std)
            tolerance = 1.2 / 255 / min(keras_vit.DataConfig.from_dict(config).std) if image.dtype == np.uint8 else 1e-4
            assert np.abs(layer - reference).max() <= tolerance, config


def test_any_size_in_a_tensorflow_graph_equals_eager():
    layer = _layer(CONFIGS["imagenet_0.875"], normalize=True)
    graph = tf.function(layer, input_signature=[tf.TensorSpec([None, None, None, 3], tf.uint8)])
    for image in _photos().values():
        np.testing.assert_allclose(graph(image[None]).numpy(), np.asarray(layer(image)), atol=1e-5)


def test_jax_backend_gives_the_tensorflow_output(tmp_path):
    if importlib.util.find_spec("jax") is None:
        pytest.skip("jax is not installed")
    image = data.coffee()
    np.save(tmp_path / "x.npy", image)
    code = (
        "import sys, json, numpy as np, keras, keras_vit\n"
        "layer = keras_vit.ImagePreprocessing((224, 224), json.loads(sys.argv[1]))\n"
        "np.save(sys.argv[3], keras.ops.convert_to_numpy(layer(np.load(sys.argv[2]))))\n"
        "print(keras.backend.backend())"
    )
    env = dict(os.environ, KERAS_BACKEND="jax")
    config = CONFIGS["imagenet_0.875"]
    done = python_run(
        ["-c", code, json.dumps(config), str(tmp_path / "x.npy"), str(tmp_path / "y.npy")], env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "jax"
    np.testing.assert_allclose(
        np.load(tmp_path / "y.npy"), np.asarray(_layer(config, normalize=True)(image)), atol=1e-4
    )


def test_data_config_travels_with_the_model(tmp_path):
    config = CONFIGS["imagenet_0.875"]
    model = keras_vit.VisionTransformer(
        patch_size=8,
        hidden_size=16,
        mlp_dim=16,
        num_heads=2,
        num_layers=1,
        input_shape=(32, 32, 3),
        classes=1000,
        include_preprocessing=True,
        data_config=config,
    )
    assert model.input_range == (0.0, 255.0)
    model.save(tmp_path / "m.keras")
    for reloaded in (keras.models.load_model(tmp_path / "m.keras"), keras_vit.load_model(tmp_path / "m.keras")):
        assert reloaded.data_config == model.data_config
        assert reloaded.describe()["data_config"]["crop_pct"] == 0.875
    # inside the model, [0, 255] pixels are normalised by the config's mean and std: equal to a model without
    # include_preprocessing fed numpy-normalised pixels
    plain = keras_vit.VisionTransformer.from_config({**model.get_config(), "include_preprocessing": False})
    plain.set_weights(model.get_weights())
    x = np.random.default_rng(0).uniform(0, 255, (2, 32, 32, 3)).astype("float32")
    normalised = (x / 255.0 - np.asarray(IMAGENET_MEAN)) / np.asarray(IMAGENET_STD)
    np.testing.assert_allclose(model.predict(x, verbose=0), plain.predict(normalised, verbose=0), atol=1e-5)
    assert plain.input_range == pytest.approx(((0 - 0.485) / 0.229, (1 - 0.406) / 0.225))
    np.testing.assert_allclose(plain.to_input_range(x), normalised, atol=1e-5)


def test_sources_bring_their_own_data_config(tmp_path):
    fixtures = os.path.join(ROOT, "tests", "fixtures", "torch_reference")
    timm_model = keras_vit.load_model(os.path.join(fixtures, "timm_vit.safetensors"), num_heads=2)
    assert (timm_model.data_config.crop_pct, timm_model.data_config.interpolation) == (0.9, "bicubic")
    hf = tmp_path / "hf"
    hf.mkdir()
    for name in ("config.json", "model.safetensors"):
        (hf / name).write_bytes(open(os.path.join(fixtures, "hf_vit", name), "rb").read())
    assert keras_vit.load_model(str(hf)).data_config.antialias  # transformers' processor defaults
    (hf / "preprocessor_config.json").write_text(
        json.dumps(
            {
                "image_processor_type": "ViTImageProcessor",
                "image_mean": list(IMAGENET_MEAN),
                "image_std": list(IMAGENET_STD),
                "resample": 3,
            }
        )
    )
    hf_model = keras_vit.load_model(str(hf))
    assert hf_model.data_config.mean == IMAGENET_MEAN and hf_model.data_config.interpolation == "bicubic"
    from keras_vit.weights.load import data_config

    assert data_config("ViT-B_16/imagenet21k").labels == "imagenet21k"
    assert data_config("augreg_in21k_ft_in1k", "ViT-B/16").labels == "imagenet1k"
    assert data_config("ViT-B_16/imagenet21k").crop_mode == "squash"


@pytest.mark.parametrize(
    "bad, field",
    [
        (dict(crop_pct=0), "crop_pct"),
        (dict(crop_pct=True), "crop_pct"),
        (dict(std=[0.5, 0, 0.5]), "std"),
        (dict(mean="0.5"), "mean"),
        (dict(crop_mode="border"), "crop_mode"),
        (dict(interpolation="lanczos"), "interpolation"),
        (dict(crop_size=224), "unknown fields"),
        (dict(antialias=1), "antialias"),
    ],
)
def test_bad_data_configs_are_refused_naming_the_field(bad, field):
    with pytest.raises(ValueError, match=field):
        keras_vit.VisionTransformer(
            patch_size=8, hidden_size=8, mlp_dim=8, num_heads=2, num_layers=1, input_shape=(16, 16, 3), data_config=bad
        )


def test_a_mean_per_rgb_channel_is_refused_for_a_gray_model():
    with pytest.raises(ValueError, match="1-channel"):
        keras_vit.VisionTransformer(
            patch_size=8,
            hidden_size=8,
            mlp_dim=8,
            num_heads=2,
            num_layers=1,
            input_shape=(16, 16, 1),
            data_config=dict(mean=IMAGENET_MEAN),
        )


def test_decode_uses_the_models_label_set():
    model = keras_vit.VisionTransformer(
        patch_size=8, hidden_size=8, mlp_dim=8, num_heads=2, num_layers=1, input_shape=(16, 16, 3), classes=1000
    )
    scores = np.zeros((1, 1000), "float32")
    scores[0, 207] = 1.0
    assert model.decode(scores, top=1)[0][0][:2] == ("n02099601", "golden retriever")
    # a head of another size than its label set keeps no labels (timm drops its label_names so too)
    other = keras_vit.VisionTransformer.from_config({**model.get_config(), "data_config": {"labels": "imagenet21k"}})
    assert other.data_config.labels is None
    with pytest.raises(ValueError, match="21843"):
        keras_vit.decode_predictions(scores, labels="imagenet21k")
    headless = keras_vit.VisionTransformer(
        patch_size=8, hidden_size=8, mlp_dim=8, num_heads=2, num_layers=1, input_shape=(16, 16, 3), include_top=False
    )
    with pytest.raises(ValueError, match="no classification head"):
        headless.decode(scores)


@pytest.mark.slow
def test_parity_with_timms_create_transform(tmp_path):
    """timm's own eval transform (PIL + torchvision) on the same photos, for the three configs. Needs a Python
    with timm, torch and the real torchvision: this one, or KERAS_VIT_TORCH_PYTHON."""
    python = os.environ.get("KERAS_VIT_TORCH_PYTHON", sys.executable)
    photos = _photos()
    np.savez(tmp_path / "photos.npz", **photos)
    done = subprocess.run(
        [
            python,
            os.path.join(ROOT, "tools", "timm_transforms.py"),
            str(tmp_path / "photos.npz"),
            json.dumps(CONFIGS),
            str(tmp_path / "timm.npz"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode == 3:
        pytest.skip(done.stderr.strip()[-300:])
    assert done.returncode == 0, done.stderr[-3000:]
    theirs, worst = np.load(tmp_path / "timm.npz"), {}
    for name, config in CONFIGS.items():
        for photo, image in photos.items():
            ours = np.asarray(_layer(config, normalize=True)(image))[0]
            std = np.asarray(keras_vit.DataConfig.from_dict(config).std)
            diff = np.abs(ours - theirs[f"{name}/{photo}"]) * std * 255.0  # back to [0, 255] units
            worst[f"{name}/{photo}"] = (float(diff.max()), float(diff.mean()))
    print(json.dumps(worst, indent=1))
    assert max(m for m, _ in worst.values()) <= 6.0 and max(a for _, a in worst.values()) <= 0.5, worst


def test_saved_model_export_takes_pixels_of_any_size_through_the_checkpoints_preprocessing(tmp_path):
    from hub_export import export

    model = keras_vit.VisionTransformer(
        patch_size=8,
        hidden_size=16,
        mlp_dim=16,
        num_heads=2,
        num_layers=1,
        input_shape=(32, 32, 3),
        classes=3,
        classifier_activation=None,
        data_config=CONFIGS["imagenet_0.875"],
    )
    out = export(model, str(tmp_path / "sm"), "classification", format="saved_model")
    loaded = tf.saved_model.load(os.path.join(out, "saved_model"))
    photo = data.coffee().astype("float32")  # 400 x 600, pixels in [0, 255]
    want = model.predict(np.asarray(model.preprocessor()(photo)), verbose=0)
    np.testing.assert_allclose(loaded.serve_pixels(tf.constant(photo[None])).numpy(), want, atol=1e-4)
    x = np.asarray(model.preprocessor()(photo))  # the default signature still takes the model's own input
    got = loaded.signatures["serving_default"](images=tf.constant(x))
    np.testing.assert_allclose(next(iter(got.values())).numpy(), want, atol=1e-4)
