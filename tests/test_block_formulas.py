"""The 2026 blocks in closed form: ViT-22B's parallel layers (timm's ParallelScalingBlock) written out with the
block's own sublayers, and the Differential Transformer's attention written out in numpy, each on a fixture timm
wrote (tests/fixtures/backbones), then through LoRA, int8, remat or ONNX. No torch needed."""

import os

import keras
import numpy as np

import keras_vit

from test_backbones import _load, _np, _timm


def test_parallel_layers_are_vit_22bs_sum_of_both_branches_on_one_norm(tmp_path):
    """x + LS(MSA(LN(x)) + MLP(LN(x))), written out with the block's own sublayers against its call; LoRA,
    int8, remat and timm's layout written back (tests/test_backbone_writers.py checks it tensor for tensor)."""
    model, x = _load("pwee")
    block = model.encoder.blocks[0]
    tokens = keras.random.normal((2, 7, 64), seed=0)
    h = block.layer_norm_0(tokens)
    want = tokens + block.layer_scale_0(block.attention(h) + block.mlp(h))
    np.testing.assert_allclose(_np(block(tokens)), _np(want), atol=1e-6)
    assert block.layer_norm_2 is None and block.layer_scale_2 is None
    logits = model.predict(x, verbose=0)
    model.enable_lora(4, ["query", "value", "Dense_0", "Dense_1"])
    np.testing.assert_allclose(model.predict(x, verbose=0), logits, atol=1e-6)
    remat, _ = _load("pwee", remat=True)
    np.testing.assert_allclose(remat.predict(x, verbose=0), logits, atol=1e-5)
    quantized, _ = _load("pwee")
    quantized.quantize("int8")
    assert np.abs(quantized.predict(x, verbose=0) - logits).max() < 0.1 * np.abs(logits).max()
    back = keras_vit.load_model(keras_vit.save_pretrained(remat, str(tmp_path / "repo")), classifier_activation=None)
    np.testing.assert_allclose(back.predict(x, verbose=0), logits, atol=1e-6)


def test_differential_attention_is_the_difference_of_two_softmax_maps_per_head(tmp_path):
    """The Differential Transformer's formula written out in numpy on one block's weights; LoRA, int8 and an
    ONNX export of the three-block fixture."""
    from hub_export import export
    from hub_export.formats import runtime_model

    model, x = _load("dwee")
    att = model.encoder.blocks[1].attention
    t = np.random.default_rng(0).normal(size=(1, 5, 64)).astype("float32")
    q, k, v = (
        np.einsum("btd,dhk->bthk", t, _np(getattr(att, n).kernel)) + _np(getattr(att, n).bias)
        for n in ("query", "key", "value")
    )
    s = np.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(16)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    init = 0.8 - 0.6 * np.exp(-0.3 * 1)  # block 1
    lam = np.exp(_np(att.lambda_q1) @ _np(att.lambda_k1)) - np.exp(_np(att.lambda_q2) @ _np(att.lambda_k2)) + init
    a = p[:, 0::2] - lam * p[:, 1::2]
    y = np.einsum("bhqk,bkhd->bqhd", a, v)
    y = y / np.sqrt((y**2).mean(-1, keepdims=True) + 1e-5) * _np(att.sub_norm.scale) * (1 - init)
    want = np.einsum("bthk,hkd->btd", y, _np(att.out.kernel)) + _np(att.out.bias)
    np.testing.assert_allclose(_np(att(t)), want, atol=1e-5)
    logits = model.predict(x, verbose=0)
    out = export(model, str(tmp_path / "onnx"), "classification", format="onnx")
    np.testing.assert_allclose(np.asarray(runtime_model(os.path.join(out, "model.onnx"))(x)), _timm("dwee"), atol=1e-4)
    model.enable_lora(4, ["query", "key", "value"])
    np.testing.assert_allclose(model.predict(x, verbose=0), logits, atol=1e-6)
    quantized, _ = _load("dwee")
    quantized.quantize("int8")
    assert np.abs(quantized.predict(x, verbose=0) - logits).max() < 0.1 * np.abs(logits).max()
