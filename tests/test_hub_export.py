"""TF Hub modules, checked with the tools their users use: tf.saved_model, TFSMLayer, hub.load, hub.KerasLayer."""

import json
import os
import signal
import subprocess
import sys
import time
import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

import hub_export
import keras_vit
from conftest import python_run, FLAX_FIXTURES, ROOT, call_main
from hub_export.__main__ import main

warnings.filterwarnings("ignore", message="pkg_resources is deprecated")
import tensorflow_hub as hub  # noqa: E402  test dependencies: a broken install must fail, not skip
import tf_keras  # noqa: E402

TINY = dict(patch_size=8, hidden_size=32, mlp_dim=64, num_heads=4, num_layers=2, input_shape=(32, 32, 3))
FIXTURE = os.path.join(FLAX_FIXTURES, "vit_tiny")


@pytest.fixture(scope="module")
def flax_model():
    """The Flax reference ViT loaded from its official-layout .npz (logits known from the original code)."""
    return keras_vit.load_model(os.path.join(FIXTURE, "weights.npz"), **TINY, classes=5, classifier_activation=None)


@pytest.fixture(scope="module")
def modules(flax_model, tmp_path_factory):
    root = tmp_path_factory.mktemp("hub")
    return {
        v: hub_export.export(flax_model, str(root / v), v, source="vit_tiny/weights.npz") for v in hub_export.VARIANTS
    }


def _images(n, seed=0):
    return np.random.default_rng(seed).uniform(0, 1, (n, 32, 32, 3)).astype("float32")


def _keras_outputs(model, variant, images01):
    name = "head" if variant == "classification" else "pooling"
    sub = keras.Model(model.inputs, model.get_layer(name).output)
    return sub.predict(images01 * 2 - 1, verbose=0)


@pytest.mark.parametrize("variant", ["feature_vector", "classification"])
@pytest.mark.parametrize("batch", [1, 5])
def test_all_loaders_match_keras(flax_model, modules, variant, batch):
    path, x = modules[variant], _images(batch, seed=batch)
    expected = _keras_outputs(flax_model, variant, x)
    assert expected.shape == (batch, 32 if variant == "feature_vector" else 5)
    loaded = tf.saved_model.load(path)
    outs = {
        "signature": loaded.signatures["serving_default"](images=tf.constant(x))["outputs"].numpy(),
        "__call__": loaded(x, training=False).numpy(),
        "TFSMLayer": keras.layers.TFSMLayer(path, call_endpoint="serving_default")(tf.constant(x))["outputs"],
        "hub.load": hub.load(path)(x, training=False).numpy(),
    }
    layer = hub.KerasLayer(path)
    tk = tf_keras.Sequential([tf_keras.layers.InputLayer(input_shape=(32, 32, 3)), layer])
    outs["hub.KerasLayer"] = tk.predict(x, verbose=0)
    for who, out in outs.items():
        assert np.abs(np.asarray(out) - expected).max() <= 1e-5, who


def test_classification_module_reproduces_flax_logits(modules):
    x = np.load(os.path.join(FIXTURE, "input.npy"))  # in [-1, 1]; the module takes [0, 1]
    logits = tf.saved_model.load(modules["classification"])((x + 1) / 2, training=False).numpy()
    assert np.abs(logits - np.load(os.path.join(FIXTURE, "logits.npy"))).max() <= 1e-5


def test_reloaded_module_training_gradients_equal_inference_gradients(modules):
    """The `training=True` signature, reloaded, differentiates like the `training=False` one (the tiny model
    has no dropout): the custom gradients the training path takes (`keras_vit.nn.mlp`'s tanh GELU) survive
    the SavedModel. The bound is absolute below 1: the key biases' gradients are 0 in exact arithmetic."""
    loaded = tf.saved_model.load(modules["classification"])
    x = tf.constant(_images(3, seed=7))

    def grads(training):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(loaded(x, training=training) ** 2)
        return tape.gradient(loss, loaded.trainable_variables)

    pairs = list(zip(grads(True), grads(False)))
    assert pairs and all(a is not None for a, _ in pairs)
    for a, b in pairs:
        assert np.abs(a.numpy() - b.numpy()).max() <= 1e-5 * max(1.0, np.abs(b.numpy()).max())


def _photos():
    import skimage.data

    out = []
    for name in ("astronaut", "coffee", "chelsea", "rocket"):
        img = tf.image.resize(getattr(skimage.data, name)()[..., :3], (32, 32)).numpy() / 255.0
        out.append(img)
    return np.stack(out).astype("float32"), np.array([0, 1, 2, 1])


@pytest.mark.parametrize("trainable", [True, False])
def test_hub_keras_layer_fine_tunes(modules, trainable):
    images, labels = _photos()
    layer = hub.KerasLayer(modules["feature_vector"], trainable=trainable)
    model = tf_keras.Sequential([tf_keras.layers.InputLayer(input_shape=(32, 32, 3)), layer, tf_keras.layers.Dense(3)])
    model.compile(tf_keras.optimizers.SGD(0.05), tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    before = [v.numpy().copy() for v in layer.variables]
    assert (len(layer.trainable_variables) > 0) == trainable
    first = model.evaluate(images, labels, verbose=0)
    model.fit(images, labels, epochs=8, batch_size=4, verbose=0)
    assert model.evaluate(images, labels, verbose=0) < first
    changed = [not np.array_equal(b, v.numpy()) for b, v in zip(before, layer.variables)]
    assert any(changed) == trainable


def test_card_and_metadata(modules):
    meta = json.load(open(os.path.join(modules["feature_vector"], "metadata.json")))
    assert meta["variant"] == "feature_vector" and meta["output_dim"] == 32 and meta["image_size"] == [32, 32]
    card = open(os.path.join(modules["classification"], "README.md")).read()
    for needle in ("[0, 1]", "hub.KerasLayer", "Licence", "vit_tiny/weights.npz", "[batch, 5]"):
        assert needle in card


def _cli(*args, timeout=300):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=ROOT)
    return python_run(["-m", "hub_export", *args], cwd=ROOT, env=env, timeout=timeout)


def test_cli_and_bad_input(tmp_path):
    weights = os.path.join(FIXTURE, "weights.npz")
    wrong = _cli("--model=ViT-Ti/16", f"--weights={weights}", "--variant=classification", f"--out={tmp_path / 'm'}")
    assert wrong.returncode == 2 and "not 'ViT-Ti/16'" in wrong.stderr  # the file is a tiny custom ViT
    assert not (tmp_path / "m").exists()
    for args, message in [
        (("--variant=logits",), "Unknown --variant 'logits'"),
        ((f"--weights={tmp_path / 'nope.npz'}",), "does not exist"),
        (("--image_size=36",), "not divisible by the effective patch size 8"),
    ]:
        base = {
            "--weights": weights,
            "--image_size": "32",
            "--variant": "feature_vector",
            "--out": str(tmp_path / "bad"),
        }
        for a in args:
            k, v = a.split("=", 1)
            base[k] = v
        status, stderr = call_main(main, *[f"{k}={v}" for k, v in base.items()])
        assert status != 0 and message in stderr, stderr[-1500:]
        assert not (tmp_path / "bad").exists()


@pytest.mark.slow  # the export CLI: test_cli_and_bad_input keeps it in the default suite
def test_cli_keras_file_existing_target_and_overwrite(tmp_path):
    model = keras_vit.VisionTransformer(**TINY, classes=3, classifier_activation=None)
    src = str(tmp_path / "m.keras")
    model.save(src)
    out = tmp_path / "module"
    args = (f"--weights={src}", "--image_size=32", f"--out={out}")
    first = _cli(*args)
    assert first.returncode == 0, first.stderr[-2000:]
    again = _cli(*args)
    assert again.returncode != 0 and "already exists; pass --overwrite" in again.stderr
    assert _cli(*args, "--overwrite").returncode == 0
    assert (out / "saved_model.pb").exists()
    assert not [n for n in os.listdir(tmp_path) if n.startswith((".tmp-", ".old-"))]


@pytest.mark.slow  # atomic replacement: tests/test_atomic.py and the writers' fault tests keep it in the default suite
def test_sigkill_mid_export_leaves_previous_module(tmp_path):
    model = keras_vit.VisionTransformer(**TINY, classes=3, classifier_activation=None)
    src = str(tmp_path / "m.keras")
    model.save(src)
    out = tmp_path / "module"
    args = [f"--weights={src}", "--image_size=32", f"--out={out}"]
    assert _cli(*args).returncode == 0
    stamp = (out / "saved_model.pb").read_bytes()
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=ROOT)
    for trigger in ("writing", "later"):  # kill while the new module is half-written, then at a later moment
        proc = subprocess.Popen(
            [sys.executable, "-m", "hub_export", *args, "--overwrite"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        start = time.time()
        while time.time() - start < 120 and proc.poll() is None:
            writing = any(n.startswith(".tmp-module") for n in os.listdir(tmp_path))
            if (trigger == "writing" and writing) or (trigger == "later" and time.time() - start > 6):
                break
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        orphans = [n for n in os.listdir(tmp_path) if n.startswith(".tmp-module")]
        assert trigger != "writing" or orphans, "the kill came too late to leave a half-written module"
        assert (out / "saved_model.pb").exists() and (out / "saved_model.pb").read_bytes() == stamp
        tf.saved_model.load(str(out))  # still a complete module
    assert _cli(*args, "--overwrite").returncode == 0
    assert sorted(os.listdir(tmp_path)) == ["m.keras", "module"], "the killed exports' temporaries were left"


@pytest.mark.slow  # ~40 s; the plain-ViT CLI test stays in the default suite; `make test-slow`
def test_cli_hybrid_keras_file_stays_hybrid_and_overwrite_replaces_only_exports(tmp_path):
    hybrid = keras_vit.VisionTransformer(
        1, 32, 64, 2, 1, resnet_layers=(1, 1), resnet_width=0.5, input_shape=(64, 64, 3), classes=3
    )
    hybrid.save(tmp_path / "h.keras")
    done = _cli(f"--weights={tmp_path / 'h.keras'}", f"--out={tmp_path / 'module'}")
    assert done.returncode == 0, done.stderr[-2000:]
    meta = json.load(open(tmp_path / "module" / "metadata.json"))
    assert meta["architecture"]["resnet_layers"] == [1, 1] and meta["image_size"] == [64, 64]
    x = np.random.default_rng(0).uniform(0, 1, (2, 64, 64, 3)).astype("float32")
    np.testing.assert_allclose(
        tf.saved_model.load(str(tmp_path / "module"))(x, training=False).numpy(),
        hybrid.feature_model().predict(x * 2 - 1, verbose=0),
        atol=1e-5,
    )
    # --overwrite replaces an earlier export, never an unrelated directory or a file
    (tmp_path / "photos").mkdir()
    (tmp_path / "photos" / "cat.jpg").write_bytes(b"precious")
    (tmp_path / "notes.txt").write_text("precious")
    for target in ("photos", "notes.txt"):
        refused = _cli(f"--weights={tmp_path / 'h.keras'}", f"--out={tmp_path / target}", "--overwrite")
        assert refused.returncode == 2 and "not an earlier output of ours" in refused.stderr
    assert (tmp_path / "photos" / "cat.jpg").read_bytes() == b"precious"
    assert (tmp_path / "notes.txt").read_text() == "precious"
