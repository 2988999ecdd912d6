"""keras_vit's LayerNorm: on JAX its one-pass statistics give numpy's two-pass LayerNorm (values and gradient),
the original Flax code's logits stay within 1e-5, and anything it does not cover (other axes, no centre or
scale) is Keras' own computation."""

import keras
import numpy as np

from conftest import FLAX_FIXTURES, run_on_backend
from keras_vit.nn.layer_norm import LayerNorm

_ON_JAX = r"""
import json, os, sys
import numpy as np, keras, jax, jax.numpy as jnp
import keras_vit
from keras_vit.nn.layer_norm import LayerNorm

def reference(x, gamma, beta, eps):  # numpy, two-pass, float64
    x = x.astype("float64")
    mean = x.mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(((x - mean) ** 2).mean(-1, keepdims=True) + eps) * gamma + beta

rng = np.random.default_rng(0)
out = {}
# a residual stream's scale: offset mean, spread, one channel of "massive activations"
x = (3.0 + 2.0 * rng.standard_normal((2, 5, 7, 48))).astype("float32")
x[..., 3] = 300.0
gamma, beta = 1 + 0.1 * rng.standard_normal(48), 0.1 * rng.standard_normal(48)
layer = LayerNorm(epsilon=1e-6)
layer.build(x.shape)
layer.set_weights([gamma.astype("float32"), beta.astype("float32")])
out["value"] = float(np.abs(np.asarray(layer(x)) - reference(x, gamma, beta, 1e-6)).max())

w = rng.standard_normal(x.shape).astype("float32")  # d/dx sum(w * LN(x)), against central differences in float64
def loss(x64):
    return (w * reference(x64, gamma, beta, 1e-6)).sum()
grad = np.asarray(jax.grad(lambda t: jnp.sum(w * layer(t)))(jnp.asarray(x)))
x64, i = x.astype("float64"), (1, 2, 3, 5)
step = np.zeros_like(x64); step[i] = 1e-4
out["grad"] = [float(grad[i]), float((loss(x64 + step) - loss(x64 - step)) / 2e-4)]
keras_grad = jax.grad(lambda t: jnp.sum(w * keras.layers.LayerNormalization.call(layer, t)))(jnp.asarray(x))
out["grad_vs_keras"] = float(np.abs(grad - np.asarray(keras_grad)).max())

half = LayerNorm(epsilon=1e-6, dtype="mixed_bfloat16")
half.build(x.shape)
half.set_weights([gamma.astype("float32"), beta.astype("float32")])
y = half(jnp.asarray(x, "bfloat16"))
out["bf16"] = [str(y.dtype), float(np.abs(np.asarray(y, "float32") - reference(x, gamma, beta, 1e-6)).max())]

out["flax"] = {}
for name in ("vit_tiny", "vit_tiny_rep_gap", "hybrid_tiny"):
    d = os.path.join(sys.argv[1], name)
    config = json.load(open(os.path.join(d, "config.json")))
    model = keras_vit.load_model(os.path.join(d, "weights.npz"), classifier_activation=None,
                                 input_shape=(*config["image_size"], 3))
    logits = model.predict(np.load(os.path.join(d, "input.npy")), verbose=0)
    out["flax"][name] = float(np.abs(logits - np.load(os.path.join(d, "logits.npy"))).max())
print(json.dumps(out))
"""


def test_jax_one_pass_statistics_match_numpy_and_the_flax_reference():
    out = run_on_backend(_ON_JAX, "jax", FLAX_FIXTURES)
    assert out["value"] <= 2e-5, out  # outputs are O(1) after normalisation
    analytic, numeric = out["grad"]
    assert abs(analytic - numeric) <= 1e-3 * max(1.0, abs(numeric)), out
    assert out["grad_vs_keras"] <= 1e-4, out
    assert out["bf16"][0] == "bfloat16" and out["bf16"][1] <= 0.05, out
    assert max(out["flax"].values()) <= 1e-5, out  # the original Flax code's logits, as on TensorFlow


def test_other_axes_and_no_centre_are_keras_own_computation():
    rng = np.random.default_rng(1)
    x = (1 + rng.standard_normal((2, 3, 8))).astype("float32")
    for kwargs in (dict(axis=1), dict(center=False), dict(axis=(-2, -1))):
        ours, theirs = LayerNorm(**kwargs), keras.layers.LayerNormalization(**kwargs)
        ours.build(x.shape)
        theirs.build(x.shape)
        theirs.set_weights(ours.get_weights())
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(ours(x)), keras.ops.convert_to_numpy(theirs(x)))
    assert LayerNorm(axis=1).plain(x) is False and LayerNorm().plain(x) is True


def test_a_model_saves_and_reloads_with_the_layer(tmp_path):
    import keras_vit

    model = keras_vit.VisionTransformer(
        patch_size=8, hidden_size=32, mlp_dim=64, num_heads=4, num_layers=1, input_shape=(16, 16, 3), classes=3
    )
    assert isinstance(model.get_layer("Transformer").encoder_norm, LayerNorm)
    model.save(tmp_path / "m.keras")
    again = keras.saving.load_model(tmp_path / "m.keras")
    assert isinstance(again.get_layer("Transformer").encoder_norm, LayerNorm)
    x = np.random.default_rng(2).uniform(-1, 1, (1, 16, 16, 3)).astype("float32")
    np.testing.assert_allclose(again.predict(x, verbose=0), model.predict(x, verbose=0), atol=1e-6)
