"""LoRA on `VisionTransformer`: the paper's adapter shapes, what trains, adapters saved and loaded alone, merging.

Expected values come from numpy (W + (alpha / r) A B on the flattened kernel, the LoRA paper's formula), from
the base model before adaptation, and from the adapted model itself for the round trips.
"""

import os

import keras
import numpy as np
import pytest

import keras_vit
from conftest import python_run
from keras_vit.weights import official

SPEC = dict(
    patch_size=8,
    hidden_size=32,
    mlp_dim=64,
    num_heads=4,
    num_layers=2,
    input_shape=(32, 32, 3),
    classes=5,
    classifier_activation=None,
)


def _base(seed: int = 0):
    model = keras_vit.VisionTransformer(**SPEC)
    rng = np.random.default_rng(seed)
    for v in model.weights:
        v.assign(
            (0.1 * rng.standard_normal(v.shape) + (1.0 if "scale" in v.path or "gamma" in v.path else 0.0)).astype(
                "float32"
            )
        )
    return model


def _images(n: int = 4):
    return np.random.default_rng(7).uniform(-1, 1, (n, 32, 32, 3)).astype("float32")


def _adapted(targets=None, rank: int = 4, alpha=None):
    """A base model with adapters whose B and head were moved off their initial values."""
    model = _base()
    model.enable_lora(rank, targets, alpha=alpha)
    rng = np.random.default_rng(3)
    for layer in model.lora_layers().values():
        layer.lora_kernel_b.assign((0.2 * rng.standard_normal(layer.lora_kernel_b.shape)).astype("float32"))
    model.head.bias.assign(rng.standard_normal(5).astype("float32"))
    return model


def test_adapters_have_the_papers_shapes_and_only_adapters_and_head_train():
    model = _base()
    model.enable_lora(4)
    layers = model.lora_layers()
    assert sorted(layers) == [f"encoderblock_{i}/{n}" for i in range(2) for n in ("query", "value")]
    for layer in layers.values():  # (D, r) and (r, heads * D/heads): 2 * D * r values per projection
        assert tuple(layer.lora_kernel_a.shape) == (32, 4) and tuple(layer.lora_kernel_b.shape) == (4, 32)
    trainable = {v.path.split("/")[-1] if "lora" in v.path else v.path for v in model.trainable_weights}
    assert trainable == {"lora_kernel_a", "lora_kernel_b", "head/kernel", "head/bias"}
    count = sum(int(np.prod(v.shape)) for v in model.trainable_weights)
    assert count == 2 * 2 * (2 * 32 * 4) + 32 * 5 + 5
    assert model.lora_rank == 4


def test_adapted_model_starts_equal_to_its_base():
    model = _base()
    x = _images()
    before = model.predict(x, verbose=0)  # traced before the adapters exist: must be retraced after
    model.enable_lora(8, ["query", "key", "value", "out", "Dense_0", "Dense_1"])
    np.testing.assert_allclose(model.predict(x, verbose=0), before, atol=1e-6)


def test_adapted_projection_is_the_papers_formula():
    model = _adapted(["query"], rank=3, alpha=6.0)
    layer = model.lora_layers()["encoderblock_0/query"]
    w = keras.ops.convert_to_numpy(layer._kernel).reshape(32, 32)
    a, b = (keras.ops.convert_to_numpy(v) for v in (layer.lora_kernel_a, layer.lora_kernel_b))
    expected = (w + (6.0 / 3) * a @ b).reshape(32, 4, 8)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(layer.kernel), expected, atol=1e-6)
    tokens = np.random.default_rng(1).standard_normal((2, 5, 32)).astype("float32")
    bias = keras.ops.convert_to_numpy(layer.bias)
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(layer(tokens)), np.einsum("btd,dhk->bthk", tokens, expected) + bias, atol=1e-5
    )


def test_merged_model_equals_the_adapted_one_and_has_no_adapters(tmp_path):
    model = _adapted(["query", "value", "out", "Dense_1"])
    x = _images()
    adapted = model.predict(x, verbose=0)
    assert np.abs(adapted - _base().predict(x, verbose=0)).max() > 1e-2  # the adapters do something
    merged = model.merge_lora()
    assert not merged.lora_layers() and not any("lora" in v.path for v in merged.weights)
    np.testing.assert_allclose(merged.predict(x, verbose=0), adapted, atol=1e-5)
    assert model.lora_layers()  # the adapted model is unchanged
    # writers merge too: the official .npz of the adapted model is the merged model's
    a, b = official.model_params(model), official.model_params(merged)
    assert sorted(a) == sorted(b) and all(np.array_equal(a[k], b[k]) for k in a)
    # and Keras' own save stores merged kernels: the file reloads as a plain model with the adapted outputs
    path = str(tmp_path / "adapted.keras")
    model.save(path)
    np.testing.assert_allclose(keras.models.load_model(path).predict(x, verbose=0), adapted, atol=1e-5)


def test_adapters_alone_reproduce_the_fine_tuned_outputs_on_a_fresh_base(tmp_path):
    model = _base()
    model.enable_lora(4, ["query", "value", "Dense_0"])
    model.compile(optimizer=keras.optimizers.SGD(0.5), loss=keras.losses.SparseCategoricalCrossentropy(True))
    x, y = _images(8), np.arange(8) % 5
    model.fit(x, y, epochs=3, batch_size=4, verbose=0)
    tuned = model.predict(x, verbose=0)
    assert np.abs(tuned - _base().predict(x, verbose=0)).max() > 1e-3
    path = keras_vit.save_lora_weights(model, str(tmp_path / "adapters.lora.h5"))
    assert os.path.getsize(path) < 64 * 1024
    fresh = _base()  # the same pretrained base, no adapters yet
    keras_vit.load_lora_weights(fresh, path)
    assert sorted(fresh.lora_layers()) == sorted(model.lora_layers())
    np.testing.assert_allclose(fresh.predict(x, verbose=0), tuned, atol=1e-5)


def _weights(model):
    return [keras.ops.convert_to_numpy(v).copy() for v in model.weights]


def test_adapters_on_another_base_are_refused_and_change_nothing(tmp_path):
    path = keras_vit.save_lora_weights(_adapted(), str(tmp_path / "a.lora.h5"))
    other = _base(seed=1)
    before = _weights(other)
    with pytest.raises(ValueError, match="another base model"):
        keras_vit.load_lora_weights(other, path)
    assert not other.lora_layers()
    assert all(np.array_equal(a, b) for a, b in zip(before, _weights(other)))


@pytest.mark.parametrize("case", ["rank", "targets", "nan", "suffix", "missing", "classes"])
def test_bad_lora_files_are_refused_naming_the_problem(tmp_path, case):
    path = keras_vit.save_lora_weights(_adapted(), str(tmp_path / "a.lora.h5"))
    target = _base()
    if case == "rank":
        target.enable_lora(2)
        match = "rank 4"
    elif case == "targets":
        target.enable_lora(4, ["query"])
        match = "rank 4 on"
    elif case == "nan":
        import h5py

        with h5py.File(path, "r+") as f:
            data = f["encoderblock_1/value/lora_kernel_a"]
            data[0, 0] = np.nan
        match = "encoderblock_1/value/lora_kernel_a holds NaN"
    elif case == "suffix":
        path, match = str(tmp_path / "a.h5"), "must end with '.lora.h5'"
    elif case == "missing":
        path, match = str(tmp_path / "none.lora.h5"), "does not exist"
    else:
        target = keras_vit.VisionTransformer(**{**SPEC, "classes": 3})
        match = "head/(kernel|bias) has shape"
    before = _weights(target)
    with pytest.raises((ValueError, FileNotFoundError), match=match):
        keras_vit.load_lora_weights(target, path)
    assert all(np.array_equal(a, b) for a, b in zip(before, _weights(target)))


def test_lora_arguments_and_states_are_checked():
    model = _base()
    with pytest.raises(ValueError, match="'mlp' is not one"):
        model.enable_lora(4, ["query", "mlp"])
    with pytest.raises(ValueError, match="rank"):
        model.enable_lora(0)
    with pytest.raises(ValueError, match="rank"):
        model.enable_lora(True)
    with pytest.raises(ValueError, match="no LoRA adapters"):
        model.merge_lora()
    model.enable_lora(2)
    with pytest.raises(ValueError, match="already enabled"):
        model.enable_lora(2)
    with pytest.raises(ValueError, match="merge"):
        model.quantize("int8")
    quantized = _base()
    quantized.quantize("int8")
    with pytest.raises(ValueError, match="quantized"):
        quantized.enable_lora(2)


_JAX = """
import numpy as np, keras, keras_vit
spec = dict(patch_size=8, hidden_size=32, mlp_dim=64, num_heads=4, num_layers=2, input_shape=(32, 32, 3),
            classes=5, classifier_activation=None)
model = keras_vit.VisionTransformer(**spec)
x, y = np.random.default_rng(0).uniform(-1, 1, (8, 32, 32, 3)).astype("float32"), np.arange(8) % 5
base = model.predict(x, verbose=0)
frozen = {v.path: keras.ops.convert_to_numpy(v).copy() for v in model.weights}
model.enable_lora(4)
model.compile(optimizer=keras.optimizers.SGD(0.5), loss=keras.losses.SparseCategoricalCrossentropy(True))
model.fit(x, y, epochs=2, batch_size=4, verbose=0)
tuned = model.predict(x, verbose=0)
assert np.abs(tuned - base).max() > 1e-3
changed = [v.path for v in model.weights
           if v.path not in frozen or not np.array_equal(keras.ops.convert_to_numpy(v), frozen[v.path])]
assert all("lora" in p or p.startswith("head") for p in changed), changed
np.testing.assert_allclose(model.merge_lora().predict(x, verbose=0), tuned, atol=1e-5)
print(keras.backend.backend(), len(changed))
"""


# PyTorch's leg is in make test-slow (as test_backbones')
@pytest.mark.parametrize("backend", ["jax", pytest.param("torch", marks=pytest.mark.slow)])
def test_lora_trains_adapters_only_on_other_backends(backend):
    import importlib.util

    if importlib.util.find_spec(backend) is None:
        pytest.skip(f"{backend} is not installed")
    env = dict(os.environ, KERAS_BACKEND=backend, CUDA_VISIBLE_DEVICES="")
    done = python_run(["-c", _JAX], env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split()[-2] == backend


def test_exports_of_an_adapted_model_carry_the_adapters(tmp_path):
    import hub_export
    from hub_export import formats

    model = _adapted(["query", "value", "Dense_0"])
    x = _images()
    out = hub_export.export(model, str(tmp_path / "onnx"), "classification", format="onnx")
    logits = formats.runtime_model(hub_export.exported_file(out))(x)  # onnxruntime
    np.testing.assert_allclose(logits, model.predict(x, verbose=0), atol=1e-4)
    assert model.lora_layers()  # exporting merged a copy; the adapted model keeps its adapters


def test_fine_tuning_optimizer_is_the_papers_sgd():
    optimizer = keras_vit.fine_tuning_optimizer(total_steps=100, learning_rate=0.03)
    assert optimizer.momentum == 0.9 and optimizer.global_clipnorm == 1.0 and not optimizer.weight_decay
    schedule = optimizer._learning_rate
    for step in (0, 5, 10, 40, 77, 100):  # linear warmup over 10 steps, then 0.5 * (1 + cos(pi * t)) to zero
        expected = 0.03 * step / 10 if step < 10 else 0.015 * (1 + np.cos(np.pi * (step - 10) / 90))
        assert float(schedule(step)) == pytest.approx(expected, abs=1e-7)
    for kwargs, message in (
        (dict(total_steps=0), "total_steps"),
        (dict(total_steps=10, learning_rate=-1.0), "learning_rate"),
        (dict(total_steps=10, warmup_steps=10), "must be below"),
    ):
        with pytest.raises(ValueError, match=message):
            keras_vit.fine_tuning_optimizer(**kwargs)


def test_the_model_class_writes_no_lora_files_and_says_which_function_does(tmp_path):
    model = keras_vit.VisionTransformer(8, 32, 64, 4, 1, input_shape=(16, 16, 3), classes=2)
    with pytest.raises(AttributeError, match=r"keras_vit.save_lora_weights\(model, path\)"):
        model.save_lora_weights(str(tmp_path / "a.lora.h5"))
    with pytest.raises(AttributeError, match=r"keras_vit.load_lora_weights\(model, path\)"):
        model.load_lora_weights(str(tmp_path / "a.lora.h5"))
    assert not any(tmp_path.iterdir())
