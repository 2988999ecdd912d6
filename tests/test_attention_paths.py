"""The fused attention path (keras.ops.dot_product_attention) equals the einsum path the inspection tools use."""

import numpy as np
import pytest

import keras_vit
from keras_vit.nn.attention import MultiHeadDotProductAttention


@pytest.mark.parametrize("classifier", ["token", "gap"])
def test_fused_equals_einsum_and_probabilities_still_come_out(classifier, monkeypatch):
    model = keras_vit.VisionTransformer(
        4, 32, 64, 4, 2, input_shape=(32, 32, 3), classes=3, classifier=classifier, classifier_activation=None
    )
    rng = np.random.default_rng(0)
    model.set_weights([(rng.normal(size=w.shape) * 0.3).astype("float32") for w in model.get_weights()])
    x = rng.uniform(-1, 1, (2, 32, 32, 3)).astype("float32")
    monkeypatch.setattr(MultiHeadDotProductAttention, "FUSED", False)
    einsum = np.asarray(model(x))
    monkeypatch.setattr(MultiHeadDotProductAttention, "FUSED", True)
    np.testing.assert_allclose(np.asarray(model(x)), einsum, atol=1e-5)
    taps = model.intermediates(x, attention=True)  # asks for probabilities: the einsum path
    assert taps["attention"][0].shape == (2, 4, 64 + (classifier == "token"), 64 + (classifier == "token"))
    np.testing.assert_allclose(np.asarray(taps["attention"][0]).sum(-1), 1.0, atol=1e-5)
    np.testing.assert_allclose(np.asarray(taps["logits"]), einsum, atol=1e-5)


_PATHS_SCRIPT = r"""
import json, numpy as np, keras, keras_vit
from keras import ops
import keras_vit.nn.attention as attention
calls = []
real = ops.dot_product_attention
def counting(*args, **kwargs):
    calls.append(1)
    return real(*args, **kwargs)
attention.ops.dot_product_attention = counting
model = keras_vit.VisionTransformer(4, 32, 64, 4, 2, input_shape=(32, 32, 3), classes=3, classifier_activation=None)
x = np.random.default_rng(0).uniform(-1, 1, (2, 32, 32, 3)).astype("float32")
counts = {}
for name, call in [("infer", lambda: model(x)), ("train", lambda: model(x, training=True)),
                   ("probabilities", lambda: model.intermediates(x, attention=True))]:
    calls.clear(); call(); counts[name] = len(calls)
print(json.dumps(counts))
"""


@pytest.mark.parametrize("backend", ["torch", "jax"])
def test_default_path_per_backend_in_float32(backend):
    """On PyTorch and JAX, float32 inference goes through `dot_product_attention` by default (PyTorch's flash
    kernel; its tensors' dtypes are torch.dtype, not strings), and on PyTorch training too (JAX trains through
    attention_core); asking for the probabilities takes the einsum path."""
    from conftest import run_on_backend

    counts = run_on_backend(_PATHS_SCRIPT, backend)
    blocks = 2  # num_layers above; on JAX one trace of the jitted block function serves both
    assert counts["infer"] == (blocks if backend == "torch" else 1)
    assert counts["train"] == (blocks if backend == "torch" else 0)
    assert counts["probabilities"] == 0
