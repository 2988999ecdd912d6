"""Keras' own `model.quantize("int8")` on a ViT: which weights it takes, how close it stays to the original
Flax code's logits, and that a quantized model saves, reloads and refuses float checkpoints."""

import os

import keras
import numpy as np
import pytest

import keras_vit
from conftest import FLAX_FIXTURES

VIT_TINY = os.path.join(FLAX_FIXTURES, "vit_tiny")


def _flax_model():
    model = keras_vit.load_model(os.path.join(VIT_TINY, "weights.npz"), classifier_activation=None)
    return model, np.load(os.path.join(VIT_TINY, "input.npy")), np.load(os.path.join(VIT_TINY, "logits.npy"))


def test_int8_takes_every_projection_and_stays_near_the_flax_logits():
    model, x, flax_logits = _flax_model()
    floats = {k: np.asarray(v) for k, v in keras_vit.weights.official.weight_map(model).items()}
    model.quantize("int8")
    n = model.vit_config.num_layers
    block = "Transformer/encoderblock_{}/"
    want = {
        block.format(i) + part
        for i in range(n)
        for part in (
            "MultiHeadDotProductAttention_1/query",
            "MultiHeadDotProductAttention_1/key",
            "MultiHeadDotProductAttention_1/value",
            "MultiHeadDotProductAttention_1/out",
            "MlpBlock_3/Dense_0",
            "MlpBlock_3/Dense_1",
        )
    } | {"head"}
    assert model.quantized_layers() == {path: "int8" for path in want}
    # each int8 kernel is the checkpoint's float kernel within half a quantization step
    att = model.encoder.blocks[1].attention
    for layer, key in (
        (att.query, block.format(1) + "MultiHeadDotProductAttention_1/query/kernel"),
        (att.out, block.format(1) + "MultiHeadDotProductAttention_1/out/kernel"),
        (model.encoder.blocks[0].mlp.dense_1, block.format(0) + "MlpBlock_3/Dense_1/kernel"),
    ):
        q = np.asarray(layer._kernel)
        assert q.dtype == np.int8 and q.shape == floats[key].shape  # the official layout, in int8
        scale = np.asarray(layer.kernel_scale)
        scale = scale.reshape(scale.shape[-q.ndim :]) if scale.ndim > q.ndim else scale
        assert np.all(np.abs(q / scale - floats[key]) <= 0.5 / scale + 1e-7), key
    got = model.predict(x, verbose=0)
    err = np.abs(got - flax_logits).max()
    assert 0 < err <= 0.02 * np.abs(flax_logits).max(), err  # quantized (not exact), and close
    assert (got.argmax(-1) == flax_logits.argmax(-1)).all()


def test_quantized_model_saves_and_reloads_as_int8(tmp_path):
    model, x, _ = _flax_model()
    model.quantize("int8")
    before = model.predict(x, verbose=0)
    path = str(tmp_path / "int8.keras")
    model.save(path)
    again = keras.saving.load_model(path)
    assert isinstance(again, keras_vit.VisionTransformer)
    assert again.quantized_layers() == model.quantized_layers()
    assert np.array_equal(again.predict(x, verbose=0), before)


def test_quantize_with_a_filter_reloads_only_those_layers(tmp_path):
    model, x, _ = _flax_model()
    model.quantize("int8", filters="Dense_")
    assert set(model.quantized_layers()) == {
        f"Transformer/encoderblock_{i}/MlpBlock_3/Dense_{j}" for i in range(2) for j in range(2)
    }
    path = str(tmp_path / "mlp_int8.keras")
    model.save(path)
    again = keras.saving.load_model(path)
    assert again.quantized_layers() == model.quantized_layers()
    assert np.array_equal(again.predict(x, verbose=0), model.predict(x, verbose=0))


def test_official_checkpoints_refuse_a_quantized_model(tmp_path):
    model, _, _ = _flax_model()
    model.quantize("int8")
    kernel = np.asarray(model.encoder.blocks[0].attention.query._kernel).copy()
    with pytest.raises(ValueError, match=r"quantized \(int8\).*before model.quantize"):
        keras_vit.save_npz(model, str(tmp_path / "out.npz"))
    with pytest.raises(ValueError, match=r"quantized \(int8\)"):
        keras_vit.load_npz(model, os.path.join(VIT_TINY, "weights.npz"))
    assert not os.path.exists(tmp_path / "out.npz")
    assert np.array_equal(np.asarray(model.encoder.blocks[0].attention.query._kernel), kernel)
