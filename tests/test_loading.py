"""`keras_vit.load_model` and the `weights=` / `classes` rules, against the original Flax code's fixtures."""

import hashlib
import json
import os
import warnings

import keras
import numpy as np
import pytest

import keras_vit
from keras_vit.weights import official as checkpoints, releases
from conftest import FLAX_FIXTURES


def _fixture(name):
    d = os.path.join(FLAX_FIXTURES, name)
    return d, json.load(open(os.path.join(d, "config.json")))


def _logits(model, d):
    return model.predict(np.load(os.path.join(d, "input.npy")), verbose=0)


@pytest.mark.parametrize("name", ["vit_tiny", "vit_tiny_rep_gap", "hybrid_tiny"])
def test_load_model_reads_the_architecture_from_the_npz(name):
    d, c = _fixture(name)
    kwargs = dict(classifier_activation=None)
    if c["image_size"][0] != c["image_size"][1]:  # a non-square grid is the one thing a file cannot say
        with pytest.raises(ValueError, match="not a square grid; pass input_shape"):
            keras_vit.load_model(os.path.join(d, "weights.npz"))
        kwargs["input_shape"] = (*c["image_size"], 3)
    model = keras_vit.load_model(os.path.join(d, "weights.npz"), **kwargs)
    v = model.vit_config
    assert (v.patch_size, v.hidden_size, v.mlp_dim, v.num_heads, v.num_layers) == (
        c["patches"][0],
        c["hidden_size"],
        c["mlp_dim"],
        c["num_heads"],
        c["num_layers"],
    )
    assert v.resnet_layers == (tuple(c["resnet_num_layers"]) if c["resnet_num_layers"] else None)
    assert (model.classifier, model.representation_size, model.classes) == (
        c["classifier"],
        c["representation_size"],
        c["num_classes"],
    )
    assert model.image_size == tuple(c["image_size"]) and model.count_params() == c["num_params"]
    assert np.abs(_logits(model, d) - np.load(os.path.join(d, "logits.npy"))).max() <= 1e-5


def test_load_model_keras_weights_h5_and_overrides(tmp_path):
    d, _ = _fixture("hybrid_tiny")
    model = keras_vit.load_model(os.path.join(d, "weights.npz"), classifier_activation=None)
    model.save(tmp_path / "h.keras")
    model.save_weights(tmp_path / "h.weights.h5")
    again = keras_vit.load_model(str(tmp_path / "h.keras"))
    assert again.stem is not None and again.vit_config.resnet_layers == (1, 1)
    np.testing.assert_array_equal(_logits(again, d), _logits(model, d))
    # overrides rebuild and go through the official rules: a new head is zero-initialised, with a warning
    with pytest.warns(UserWarning, match="head has 5 classes, the model 7"):
        seven = keras_vit.load_model(str(tmp_path / "h.keras"), classes=7)
    assert seven.classes == 7 and not np.any(keras.ops.convert_to_numpy(seven.head.kernel))
    bigger = keras_vit.load_model(str(tmp_path / "h.keras"), input_shape=(96, 96, 3))
    assert bigger.grid_size == (12, 12) and bigger.stem is not None  # the (1, 1) stem's stride is 8
    with pytest.raises(ValueError, match="holds weights only: pass model="):
        keras_vit.load_model(str(tmp_path / "h.weights.h5"))
    with pytest.raises(ValueError, match="holds .*not 'ViT-B/16'"):
        keras_vit.load_model(os.path.join(d, "weights.npz"), model="ViT-B/16")


def test_weights_h5_with_a_model_name(tmp_path):
    model = keras_vit.ViT_Ti16(input_shape=(32, 32, 3), classes=3)
    model.head.kernel.assign(np.ones(model.head.kernel.shape, "float32"))
    model.save_weights(tmp_path / "ti.weights.h5")
    loaded = keras_vit.load_model(
        str(tmp_path / "ti.weights.h5"), model="ViT-Ti/16", input_shape=(32, 32, 3), classes=3
    )
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(loaded.head.kernel), 1.0)


def test_failed_keras_load_changes_no_weight(tmp_path):
    donor = keras_vit.VisionTransformer(8, 32, 64, 4, 3, input_shape=(32, 32, 3), classes=3)
    donor.save_weights(tmp_path / "three_blocks.weights.h5")
    target = keras_vit.VisionTransformer(8, 32, 64, 4, 2, input_shape=(32, 32, 3), classes=3)
    before = [np.array(v) for v in target.weights]
    # 16 arrays per block (2 LayerNorms, q/k/v/out, 2 MLP denses; kernel + bias each) + 8 outside the blocks
    with pytest.raises(ValueError, match="holds 56 arrays, model .* has 40 weights.*no weight was changed"):
        keras_vit.load_weights(target, str(tmp_path / "three_blocks.weights.h5"))
    donor.save(tmp_path / "three_blocks.keras")
    with pytest.raises(ValueError, match="no place for.*encoderblock_2"):
        keras_vit.load_weights(target, str(tmp_path / "three_blocks.keras"))
    for v, b in zip(target.weights, before):
        np.testing.assert_array_equal(np.array(v), b)


@pytest.fixture
def tiny_release(tmp_path, monkeypatch):
    """A release served from a file:// URL: the fixture's 5-class tiny ViT, registered under a table name."""
    monkeypatch.setenv("KERAS_VIT_CACHE_DIR", str(tmp_path / "cache"))
    d, _ = _fixture("vit_tiny_rep_gap")
    params = checkpoints.read_npz(os.path.join(d, "weights.npz"))
    model = keras_vit.VisionTransformer(
        8, 32, 64, 4, 2, input_shape=(32, 48, 3), classifier="gap", representation_size=16, classes=5
    )
    checkpoints.load_params(model, params)
    path = checkpoints.save_npz(model, str(tmp_path / "release.npz"))
    digest = hashlib.sha256(open(path, "rb").read()).hexdigest()
    # the model field names a table row (registration checks it); a full release name is taken as given
    release = releases.Release(
        "tiny-gap/pretrained", "ViT-Ti/16", "pretrained", (32, 48), 5, "file://" + path, digest, representation_size=16
    )
    releases.register_release(release)
    yield d, release
    releases._RELEASES.pop(release.name, None)


def _tiny(weights=None, **kw):
    """The tiny architecture, random or read from `weights` through `load_model` (the class reads no files)."""
    arguments = dict(
        patch_size=8,
        hidden_size=32,
        mlp_dim=64,
        num_heads=4,
        num_layers=2,
        input_shape=(32, 48, 3),
        classifier="gap",
        classifier_activation=None,
        **kw,
    )
    return keras_vit.VisionTransformer(**arguments) if weights is None else keras_vit.load_model(weights, **arguments)


def test_release_with_classes_unset_is_the_released_classifier(tiny_release):
    d, release = tiny_release
    model = _tiny(weights=release.name)
    assert (model.classes, model.representation_size) == (5, 16)
    assert np.abs(_logits(model, d) - np.load(os.path.join(d, "logits.npy"))).max() <= 1e-5


def test_release_with_other_classes_zeroes_the_head_and_warns(tiny_release):
    d, release = tiny_release
    with pytest.warns(UserWarning, match=r"head has 5 classes, the model 3.*zero-initialised"):
        model = _tiny(weights=release.name, classes=3)
    assert model.classes == 3 and model.representation_size is None
    assert not np.any(keras.ops.convert_to_numpy(model.head.kernel))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        same = _tiny(weights=release.name, classes=5, representation_size=16)  # the same head: no warning
    assert np.abs(_logits(same, d) - np.load(os.path.join(d, "logits.npy"))).max() <= 1e-5


def test_head_trained_on_dropped_pre_logits_is_reset(tiny_release):
    d, release = tiny_release
    with pytest.warns(UserWarning, match="trained on its pre_logits"):
        model = _tiny(weights=release.name, classes=5)  # representation_size=None drops the tanh layer
    assert not np.any(keras.ops.convert_to_numpy(model.head.kernel))
    with pytest.raises(ValueError, match="reset_head=False"):
        keras_vit.load_npz(_tiny(classes=5), release.url[len("file://") :], reset_head=False, old_grid=(4, 6))


def test_default_classes_and_release_names():
    assert keras_vit.ViT_Ti16(input_shape=(32, 32, 3)).classes == 1000
    rel = releases.find_release("imagenet21k", "ViT-B/16")
    assert (rel.classes, rel.representation_size) == (21843, 768)
    assert releases.find_release("imagenet21k+imagenet2012", "ViT-L/16").representation_size is None


def test_source_params_reads_files_as_they_are(tmp_path):
    d, _ = _fixture("hybrid_tiny")
    path = os.path.join(d, "weights.npz")
    with np.load(path) as raw:  # numpy's own reader is the reference
        expected = {k: raw[k] for k in raw.files}
    params = keras_vit.weights.source_params(path)
    assert set(params) == set(expected)
    for key, value in expected.items():
        np.testing.assert_array_equal(params[key], value)
    model = keras_vit.load_model(path)
    model.save(tmp_path / "h.keras")
    from_keras = keras_vit.weights.source_params(str(tmp_path / "h.keras"))
    for key, value in expected.items():
        np.testing.assert_array_equal(from_keras[key], value.reshape(from_keras[key].shape))
    with pytest.raises(ValueError, match="needs a source"):
        keras_vit.weights.source_params(None)


def test_files_that_hold_no_vit_are_named(tmp_path):
    keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)]).save(tmp_path / "other.keras")
    with pytest.raises(ValueError, match="holds a Sequential, not a keras_vit.VisionTransformer"):
        keras_vit.load_model(str(tmp_path / "other.keras"))
    np.savez(tmp_path / "other.npz", weights=np.zeros(3, "float32"))
    with pytest.raises(ValueError, match="is not an official ViT checkpoint: it lacks embedding/kernel"):
        keras_vit.load_model(str(tmp_path / "other.npz"))
    with pytest.raises(ValueError, match="Unsupported weights file"):
        (tmp_path / "w.pt").write_bytes(b"x")
        keras_vit.load_model(str(tmp_path / "w.pt"))


def test_source_kinds_and_the_architecture_a_checkpoint_implies(tmp_path):
    # the expected sizes are the ones the source model was built with, not read back through the loader
    from keras_vit import weights

    source = keras_vit.VisionTransformer(8, 32, 64, 4, 2, input_shape=(32, 32, 3), classes=5, representation_size=16)
    paths = {
        "npz": str(tmp_path / "m.npz"),
        "keras": str(tmp_path / "m.keras"),
        "weights_h5": str(tmp_path / "m.weights.h5"),
    }
    keras_vit.save_npz(source, paths["npz"])
    source.save(paths["keras"])
    source.save_weights(paths["weights_h5"])
    assert {kind: weights.source_kind(p) for kind, p in paths.items()} == {k: k for k in paths}
    assert weights.source_kind(None) is None
    with pytest.raises(ValueError, match="weights must be None, a file path or a release name, got int"):
        weights.source_kind(3)
    for kind in ("npz", "keras"):
        arch = weights.read_checkpoint(paths[kind]).architecture()
        assert (
            arch["patch_size"],
            arch["hidden_size"],
            arch["mlp_dim"],
            arch["num_heads"],
            arch["num_layers"],
            arch["classes"],
            arch["representation_size"],
        ) == (8, 32, 64, 4, 2, 5, 16), kind
        assert tuple(arch["input_shape"]) == (32, 32, 3)
