"""The tanh GELU's training form (`keras_vit.nn.mlp._gelu_tanh_keeping_input`): the same values as Keras'
tanh GELU, a gradient that matches the closed-form derivative in float64 numpy, the MLP block's gradients
unchanged, and (on JAX, where XLA reports its buffers) a compiled backward pass that keeps less."""

import pytest

from conftest import run_on_backend

_CHECK = r"""
import json
import numpy as np, keras
from keras import ops
from keras_vit.nn import mlp

backend = keras.backend.backend()
if backend == "jax":
    import jax

    def value_and_grad(f, x, w):
        y, vjp = jax.vjp(f, x)
        return np.asarray(y, "float32"), np.asarray(vjp(w)[0], "float32")
else:
    import tensorflow as tf

    def value_and_grad(f, x, w):
        x = tf.constant(x)
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = f(x)
        return np.asarray(ops.cast(y, "float32")), np.asarray(ops.cast(tape.gradient(y, x, w), "float32"))

out = {}
x = np.linspace(-8, 8, 2001).astype("float32")
ones = np.ones_like(x)
lean = lambda t: mlp.activate(t, "gelu_tanh", training=True)
y, d = value_and_grad(lean, x, ones)
y0, d0 = value_and_grad(lambda t: ops.gelu(t, approximate=True), x, ones)


def closed_form(x64):  # d/dx 0.5 x (1 + tanh u), u = c (x + 0.044715 x^3), in float64
    c = np.sqrt(2 / np.pi)
    t = np.tanh(c * (x64 + 0.044715 * x64 ** 3))
    return 0.5 * (1 + t) + 0.5 * x64 * (1 - t ** 2) * c * (1 + 3 * 0.044715 * x64 ** 2)


closed = closed_form(x.astype("float64"))
out["value_vs_keras"] = float(np.abs(y - y0).max())
out["grad_vs_closed_form"] = float(np.abs(d - closed).max())
out["keras_grad_vs_closed_form"] = float(np.abs(d0 - closed).max())
xb = ops.cast(x, "bfloat16")
at = closed_form(np.asarray(ops.cast(xb, "float32"), "float64"))
errors = [float(np.abs(value_and_grad(f, xb, ops.cast(ones, "bfloat16"))[1] - at).max())
          for f in (lean, lambda t: ops.gelu(t, approximate=True))]
out["bf16"] = [keras.backend.standardize_dtype(lean(xb).dtype), *errors]

block = mlp.MlpBlock(64)
rng = np.random.default_rng(0)
tokens = rng.standard_normal((2, 5, 16)).astype("float32")
block.build(tokens.shape)
w = rng.standard_normal((2, 5, 16)).astype("float32")
grads = [value_and_grad(lambda t: block(t, training=flag), tokens, w)[1] for flag in (True, False)]
out["block_grad_train_vs_infer"] = float(np.abs(grads[0] - grads[1]).max())

if backend == "jax":  # what XLA keeps for the backward pass of 4 Dense+GELU layers, in bytes
    kernels = [rng.standard_normal((256, 256)).astype("float32") / 16 for _ in range(4)]
    acts = rng.standard_normal((512, 256)).astype("float32")

    def temp(training):
        def loss(h):
            for k in kernels:
                h = mlp.activate(h @ k, "gelu_tanh", training=training)
            return h.sum()
        return jax.jit(jax.grad(loss)).lower(acts).compile().memory_analysis().temp_size_in_bytes

    out["temp_bytes"] = {"training": temp(True), "plain": temp(False), "one_activation": acts.nbytes}
print(json.dumps(out))
"""


@pytest.mark.parametrize("backend", ["tensorflow", "jax"])
def test_training_gelu_equals_keras_values_and_the_closed_form_gradient(backend):
    out = run_on_backend(_CHECK, backend)
    assert out["value_vs_keras"] == 0.0, out  # the forward pass is Keras' own tanh GELU
    assert out["grad_vs_closed_form"] <= 1e-5, out  # float32 rounding of a derivative of size <= 1.13
    assert out["keras_grad_vs_closed_form"] <= 1e-5, out
    dtype, ours, keras_own = out["bf16"]  # bfloat16 arithmetic: no worse than Keras' own gradient in it
    assert dtype == "bfloat16" and ours <= max(1.5 * keras_own, 0.02), out
    assert out["block_grad_train_vs_infer"] <= 1e-5, out
    if backend == "jax":
        t = out["temp_bytes"]  # at least one activation per layer fewer kept (the tanh's output)
        assert t["training"] <= t["plain"] - 3 * t["one_activation"], t


_EAGER = r"""
import json
import numpy as np, tensorflow as tf, keras
import keras_vit
from keras_vit.nn import mlp

x = np.linspace(-8, 8, 4001).astype("float32")
x64 = x.astype("float64")
reference = 0.5 * x64 * (1 + np.tanh(np.sqrt(2 / np.pi) * (x64 + 0.044715 * x64 ** 3)))
scale = np.maximum(1.0, np.abs(reference))
graph = tf.function(lambda t: mlp.gelu(t, approximate=True))
ops_in_graph = {op.type for op in graph.get_concrete_function(tf.TensorSpec([None], "float32")).graph.get_operations()}
out = {"eager_error": float((np.abs(mlp.gelu(tf.constant(x)).numpy() - reference) / scale).max()),
       "graph_error": float((np.abs(graph(tf.constant(x)).numpy() - reference) / scale).max()),
       "graph_has_keras_form": "Tanh" in ops_in_graph and "Sigmoid" not in ops_in_graph}
model = keras_vit.VisionTransformer(patch_size=4, hidden_size=32, mlp_dim=64, num_heads=4, num_layers=2,
                                    input_shape=(16, 16, 3), include_top=False)  # the pre-logits features
images = np.random.default_rng(0).uniform(-1, 1, (3, 16, 16, 3)).astype("float32")
eager, traced = model(images).numpy(), model.predict(images, verbose=0)
out["model_eager_vs_predict"] = float(np.abs(eager - traced).max() / np.abs(traced).max())
print(json.dumps(out))
"""


def test_eager_tensorflow_gelu_is_the_same_function():
    """TensorFlow's eager forward pass writes the tanh GELU as x sigmoid(2u) (fewer, cheaper ops); graphs keep
    Keras' form. Both agree with the float64 formula, and a model's eager and traced outputs agree."""
    out = run_on_backend(_EAGER, "tensorflow")
    assert out["eager_error"] <= 1e-6 and out["graph_error"] <= 2e-6, out
    assert out["graph_has_keras_form"], out
    assert out["model_eager_vs_predict"] <= 1e-5, out
