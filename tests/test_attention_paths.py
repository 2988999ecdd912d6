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
