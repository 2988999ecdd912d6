"""The model and its loaders under hostile input: each bad value gets a ValueError naming the field and
what would work; nothing is rounded or guessed; a failed load changes no weight."""

import numpy as np
import pytest

import keras_vit

TINY = dict(patch_size=4, hidden_size=16, mlp_dim=32, num_heads=2, num_layers=2, input_shape=(16, 16, 3))


@pytest.mark.parametrize(
    "field,value,message",
    [
        ("classes", 5.7, "classes must be a whole number, got 5.7"),
        ("classes", True, r"classes must be an integer >= 1 or None, got True \(bool\)"),
        ("classes", "10", r"classes must be an integer .* got '10' \(str\)"),
        ("num_layers", -1, "num_layers must be >= 1, got -1"),
        ("num_layers", 0, "num_layers must be >= 1, got 0"),
        ("hidden_size", 0, "hidden_size must be >= 1"),
        ("patch_size", 0, "patch_size must be >= 1"),
        ("patch_size", 2.5, "patch_size must be a whole number"),
        ("num_heads", 3, "hidden_size 16 must be divisible by num_heads 3"),
        ("representation_size", 16.9, "representation_size must be a whole number, got 16.9"),
        ("representation_size", True, r"representation_size must be an integer >= 1 or None, got True"),
        ("input_shape", "224", r"input_shape must be a tuple \(height, width, channels\).*got '224' \(str\)"),
        ("input_shape", 224, r"input_shape must be a tuple .*got 224 \(int\)"),
        ("input_shape", (16, 16), r"got \(16, 16\)"),
        ("input_shape", (16, 16.5, 3), r"input_shape\[1\] must be a whole number"),
        ("input_shape", (0, 16, 3), r"input_shape\[0\] must be >= 1"),
        ("dropout_rate", True, r"dropout_rate must be a number in \[0, 1\), got True \(bool\)"),
        ("drop_path_rate", -0.1, r"drop_path_rate must be a number in \[0, 1\)"),
        ("include_top", "yes", r"include_top must be True or False, got 'yes'"),
        ("include_preprocessing", 1, r"include_preprocessing must be True or False, got 1 \(int\)"),
        ("resnet_layers", (3, 0), r"resnet_layers\[1\] must be >= 1"),
        ("resnet_layers", "349", r"resnet_layers must be a non-empty list of integers"),
        ("resnet_width", 0, "resnet_width must be > 0"),
        ("classifier", "cls", "classifier='cls' is not one of 'token', 'gap'"),
    ],
)
def test_constructor_refuses_and_names_the_field(field, value, message):
    with pytest.raises(ValueError, match=message):
        keras_vit.VisionTransformer(**{**TINY, field: value})


def test_integral_floats_and_numpy_ints_are_accepted():
    model = keras_vit.VisionTransformer(
        **{**TINY, "hidden_size": np.int64(16), "num_layers": 2.0}, classes=3.0, include_top=np.True_
    )
    assert model.vit_config.num_layers == 2 and model.classes == 3 and isinstance(model.classes, int)


@pytest.fixture(scope="module")
def model():
    return keras_vit.VisionTransformer(**TINY, classes=3)


def test_predict_on_bad_batches(model):
    with pytest.raises(ValueError, match=r"must be \(batch, 16, 16, 3\).*got \(2, 3, 16, 16\) \(channels first"):
        model.predict(np.zeros((2, 3, 16, 16), "float32"), verbose=0)
    assert model.predict(np.zeros((0, 16, 16, 3), "float32"), verbose=0).shape == (0, 3)
    with pytest.raises(ValueError, match=r"channels first\?"):
        model.predict(np.zeros((0, 3, 16, 16), "float32"), verbose=0)
    with pytest.raises(ValueError, match=r"empty batch \(0, 16, 16, 3\)"):
        model.intermediates(np.zeros((0, 16, 16, 3), "float32"))


@pytest.mark.parametrize("content,message", [(b"", "it is empty"), (b"garbage" * 10, "not a zip archive")])
def test_empty_or_corrupt_keras_file_is_named(model, tmp_path, content, message):
    path = tmp_path / "model.keras"
    path.write_bytes(content)
    before = [w.copy() for w in model.get_weights()]
    for load in (
        lambda: keras_vit.load_model(path),
        lambda: keras_vit.load_weights(model, path),
        lambda: keras_vit.load_model(path, **TINY),
    ):
        with pytest.raises(ValueError, match=rf"model\.keras' is not a \.keras file: {message}"):
            load()
    for a, b in zip(before, model.get_weights()):
        np.testing.assert_array_equal(a, b)
    assert path.read_bytes() == content


def test_keras_file_of_a_transposed_grid_is_resized_not_copied(tmp_path):
    """A (8, 2)-grid .keras file into a (2, 8)-grid model: same token count, but the file knows its grid."""
    import scipy.ndimage

    tall = keras_vit.VisionTransformer(**{**TINY, "input_shape": (32, 8, 3)}, classes=3)
    posemb = np.random.default_rng(0).normal(size=(1, 17, 16)).astype("float32")
    tall.position_embedding.pos_embedding.assign(posemb)
    tall.save(tmp_path / "tall.keras")
    wide = keras_vit.load_model(tmp_path / "tall.keras", input_shape=(8, 32, 3))
    assert wide.grid_size == (2, 8)
    expected = scipy.ndimage.zoom(posemb[0, 1:].reshape(8, 2, 16), (2 / 8, 8 / 2, 1), order=1).reshape(16, 16)
    got = np.asarray(wide.position_embedding.pos_embedding)[0]
    np.testing.assert_allclose(got[1:], expected, atol=1e-6)
    also = keras_vit.load_weights(
        keras_vit.VisionTransformer(**{**TINY, "input_shape": (8, 32, 3)}, classes=3), str(tmp_path / "tall.keras")
    )
    np.testing.assert_allclose(np.asarray(also.position_embedding.pos_embedding)[0, 1:], expected, atol=1e-6)


def test_keras_load_weights_of_another_architecture_changes_no_weight(tmp_path):
    # Keras' own method on our class: a 2-block file into a 3-block model fails part-way inside Keras (on main
    # before this change it had assigned 18 of the model's variables when it raised)
    import keras

    small = keras_vit.VisionTransformer(**{**TINY, "num_layers": 2}, classes=3)
    big = keras_vit.VisionTransformer(**{**TINY, "num_layers": 3}, classes=3)
    path = str(tmp_path / "small.weights.h5")
    small.save_weights(path)
    before = [np.array(keras.ops.convert_to_numpy(v)) for v in big.weights]
    with pytest.raises(ValueError, match="could not be loaded"):
        big.load_weights(path)
    assert all(np.array_equal(a, keras.ops.convert_to_numpy(v)) for a, v in zip(before, big.weights))
    big_file = str(tmp_path / "big.weights.h5")
    big.save_weights(big_file)  # a file that fits still loads through the method
    other = keras_vit.VisionTransformer(**{**TINY, "num_layers": 3}, classes=3)
    other.load_weights(big_file)
    assert all(np.array_equal(a, keras.ops.convert_to_numpy(v)) for a, v in zip(before, other.weights))


def test_compute_output_spec_takes_arrays_as_keras_does_tensors():
    # on main before this change: TypeError inside PatchEmbedding.compute_output_shape
    import keras

    model = keras_vit.VisionTransformer(**TINY, classes=3)
    spec = model.compute_output_spec(np.zeros((2, 16, 16, 3), "float32"))
    assert tuple(spec.shape) == (2, 3)
    assert tuple(model.compute_output_spec(keras.KerasTensor((None, 16, 16, 3))).shape) == (None, 3)


def _weights(model):
    import keras

    return [np.array(keras.ops.convert_to_numpy(v)) for v in model.weights]


def _poison_npz(path):
    with np.load(path) as data:
        arrays = {k: data[k] for k in data.files}
    key = "Transformer/encoderblock_1/MlpBlock_3/Dense_0/kernel"
    arrays[key] = arrays[key].copy()
    arrays[key][0, 0] = np.nan
    np.savez(path, **arrays)
    return key


def _poison_h5(path):
    import h5py

    with h5py.File(path, "r+") as f:
        datasets = []
        f.visititems(
            lambda name, obj: datasets.append(obj) if isinstance(obj, h5py.Dataset) and obj.ndim == 2 else None
        )
        values = datasets[0][()]
        values.flat[0] = np.inf
        datasets[0][...] = values


def _poison_timm(path):
    from safetensors.numpy import load_file, save_file

    tensors = load_file(path)
    tensors["blocks.0.attn.proj.weight"][0, 0] = np.nan
    save_file(tensors, path, metadata={"format": "pt"})
    return "out/kernel"


@pytest.mark.parametrize("kind", ["npz", "weights.h5", "safetensors"])
def test_a_checkpoint_holding_nan_or_inf_is_refused_and_changes_nothing(tmp_path, kind):
    # on main before this change each of these loaded without a word
    source = keras_vit.VisionTransformer(**TINY, classes=3)
    path = str(tmp_path / f"poisoned.{kind}")
    if kind == "npz":
        keras_vit.save_npz(source, path)
        named = _poison_npz(path)
    elif kind == "weights.h5":
        source.save_weights(path)
        _poison_h5(path)
        named = "array"
    else:
        keras_vit.save_safetensors(source, path, layout="timm")
        named = _poison_timm(path)
    model = keras_vit.VisionTransformer(**TINY, classes=3, gelu_approximate=kind != "safetensors")
    before = _weights(model)
    with pytest.raises(ValueError, match=rf"(?s){named}.*non-finite|non-finite.*{named}"):
        keras_vit.load_weights(model, path)
    assert all(np.array_equal(a, b) for a, b in zip(before, _weights(model)))


def test_transformers_config_without_its_sizes_is_named(tmp_path):
    # on main before this change: a bare KeyError('num_attention_heads')
    import json

    source = keras_vit.VisionTransformer(**TINY, classes=3)
    directory = tmp_path / "hf"
    keras_vit.save_safetensors(source, str(directory), layout="transformers")
    config = json.loads((directory / "config.json").read_text())
    del config["num_attention_heads"]
    (directory / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="config.json lacks num_attention_heads"):
        keras_vit.load_model(str(directory))


def test_bools_are_not_counts():
    # on main before this change intermediates(blocks=True) returned block 1 and top_k=True exported top-1
    from hub_export import serving
    from keras_vit.analysis import inspect

    model = keras_vit.VisionTransformer(**TINY, classes=3)
    with pytest.raises(ValueError, match=r"blocks \[True\]"):
        model.intermediates(np.zeros((1, 16, 16, 3), "float32"), blocks=True)
    with pytest.raises(ValueError, match="top_k must be an integer in \\[1, 3\\], got True"):
        serving.write(model, "unused", ["a", "b", "c"], top_k=True)
    for helper in (
        lambda: inspect.embedding_filter_components(model, n=-1),
        lambda: inspect.principal_components(np.ones((4, 3)), n=0),
    ):
        with pytest.raises(ValueError, match="n must be >= 1"):
            helper()


@pytest.mark.parametrize(
    "shape, message",
    [
        ((2, 32, 32, 3), r"images must be \(batch, 16, 16, 3\)"),
        ((2, 3, 16, 16), "channels first"),
        ((2, 16, 16, 1), r"images must be \(batch, 16, 16, 3\)"),
        ((16, 16, 3), "add a batch axis"),
    ],
)
def test_predict_and_predict_on_batch_check_their_input_like_a_call(shape, message):
    model = keras_vit.VisionTransformer(**TINY, classes=3)
    for entry in (model.predict, model.predict_on_batch):
        with pytest.raises(ValueError, match=message):
            entry(np.zeros(shape, "float32"))


def test_pixels_of_the_wrong_range_warn_once_naming_the_preprocessing():
    import warnings

    model = keras_vit.VisionTransformer(**TINY, classes=3)
    raw = keras_vit.VisionTransformer(**TINY, classes=3, include_preprocessing=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.predict(np.zeros((1, 16, 16, 3), "float32"), verbose=0)  # in range: nothing
        raw.predict(np.full((1, 16, 16, 3), 100.0, "float32"), verbose=0)  # in range: nothing
        for _ in range(2):
            model.predict(np.full((1, 16, 16, 3), 200, "uint8"), verbose=0)
            raw.predict_on_batch(np.full((1, 16, 16, 3), 0.5, "float32"))
    said = [str(w.message) for w in caught if "takes values" in str(w.message)]
    assert len(said) == 2, said
    assert "integer pixels" in said[0] and "model.preprocessor()" in said[0]
    assert "[0, 255]" in said[1] and "include_preprocessing" in said[1]


def test_a_dtype_policy_map_reaches_every_sublayer_and_saves(tmp_path):
    import keras

    policies = keras.dtype_policies.DTypePolicyMap(default_policy="float32")
    policies["Transformer/encoderblock_0/.*"] = keras.dtype_policies.DTypePolicy("bfloat16")
    model = keras_vit.VisionTransformer(**TINY, classes=3, dtype=policies)
    inside = [
        layer for layer in model._flatten_layers() if (layer.path or "").startswith("Transformer/encoderblock_0/")
    ]
    assert inside and {layer.compute_dtype for layer in inside} == {"bfloat16"}
    assert {
        layer.compute_dtype
        for layer in model._flatten_layers()
        if (layer.path or "").startswith("Transformer/encoderblock_1/")
    } == {"float32"}
    x = np.random.default_rng(0).uniform(-1, 1, (2, 16, 16, 3)).astype("float32")
    out = model.predict(x, verbose=0)
    model.save(tmp_path / "m.keras")
    reloaded = keras.models.load_model(tmp_path / "m.keras")
    assert reloaded.encoder.blocks[0].mlp.dense_0.compute_dtype == "bfloat16"
    np.testing.assert_array_equal(reloaded.predict(x, verbose=0), out)
    float_model = keras_vit.VisionTransformer(**TINY, classes=3)
    float_model.set_weights(model.get_weights())
    np.testing.assert_allclose(float_model.predict(x, verbose=0), out, atol=0.05)  # bf16 in one block


def test_compute_output_spec_takes_arrays_on_every_layer():
    model = keras_vit.VisionTransformer(**TINY, classes=3)
    images = np.zeros((2, 16, 16, 3), "float32")
    tokens = np.zeros((2, 17, 16), "float32")
    cases = [
        (model, images, (2, 3)),
        (model.patch_embedding, images, (2, 16, 16)),
        (model.class_token, np.zeros((2, 16, 16), "float32"), (2, 17, 16)),
        (model.position_embedding, tokens, (2, 17, 16)),
        (model.encoder, tokens, (2, 17, 16)),
        (model.encoder.blocks[0], tokens, (2, 17, 16)),
        (model.token_pooling, tokens, (2, 16)),
        (model.preprocessor(), np.zeros((2, 40, 30, 3), "uint8"), (2, 16, 16, 3)),
    ]
    for layer, x, shape in cases:
        assert tuple(layer.compute_output_spec(x).shape) == shape, layer.name
    hybrid = keras_vit.VisionTransformer(
        patch_size=1,
        hidden_size=16,
        mlp_dim=16,
        num_heads=2,
        num_layers=1,
        resnet_layers=(1,),
        resnet_width=0.5,
        input_shape=(32, 32, 3),
    )
    assert tuple(hybrid.stem.compute_output_spec(np.zeros((1, 32, 32, 3), "float32")).shape)[:3] == (
        1,
        8,
        8,
    )  # root: stride 4


def test_feature_and_logits_models_check_their_input_like_the_model():
    """`feature_model` / `logits_model` predict with the source model's input check: a wrong size, NCHW or an
    unbatched image is named, not a graph error; saved and reloaded they still run."""

    model = keras_vit.VisionTransformer(
        patch_size=8, hidden_size=32, mlp_dim=64, num_heads=2, num_layers=1, input_shape=(32, 32, 3), classes=3
    )
    for derived in (model.feature_model("sequence"), model.logits_model()):
        assert derived.predict(np.zeros((2, 32, 32, 3), "float32"), verbose=0).shape[0] == 2
        for bad, message in (
            (np.zeros((2, 48, 48, 3), "float32"), r"images must be \(batch, 32, 32, 3\)"),
            (np.zeros((2, 3, 32, 32), "float32"), "channels first"),
            (np.zeros((32, 32, 3), "float32"), "add a batch axis"),
        ):
            with pytest.raises(ValueError, match=message):
                derived.predict(bad, verbose=0)
        with pytest.raises(ValueError, match="images must be"):
            derived.predict_on_batch(np.zeros((1, 40, 40, 3), "float32"))
