"""`keras_vit.vit.mlp_core.activated_dense` (the MLP's activation and second Dense while training on TF and JAX):
the values of the plain formula, gradients that match the framework's own differentiation of it and central
differences in float64 numpy for each activation, the MLP block's training gradients unchanged, the cases
that keep Keras' own path, and (on JAX, where XLA reports its buffers) a backward pass that keeps less."""

import numpy as np
import pytest

from conftest import run_on_backend

_CHECK = r"""
import json
import numpy as np, keras
from keras import ops
from keras_vit.vit import mlp
from keras_vit.vit.mlp_core import activated_dense

backend = keras.backend.backend()
if backend == "jax":
    import jax

    def grads(f, args, w):
        y, vjp = jax.vjp(f, *args)
        return np.asarray(y, "float64"), [np.asarray(g, "float64") for g in vjp(w)]
else:
    import tensorflow as tf

    def grads(f, args, w):
        args = [tf.constant(a) for a in args]
        with tf.GradientTape() as tape:
            tape.watch(args)
            y = f(*args)
        return np.asarray(y, "float64"), [np.asarray(g, "float64") for g in tape.gradient(y, args, w)]

rng = np.random.default_rng(0)
h = (2 * rng.standard_normal((2, 5, 12))).astype("float32")
kernel = rng.standard_normal((12, 6)).astype("float32") / 3
bias = rng.standard_normal((6,)).astype("float32")
w = rng.standard_normal((2, 5, 6)).astype("float32")

def act64(z, name):  # the three activations in float64 numpy (scipy-free erf through math.erf)
    import math
    if name == "gelu_tanh":
        return 0.5 * z * (1 + np.tanh(np.sqrt(2 / np.pi) * (z + 0.044715 * z ** 3)))
    if name == "gelu":
        return 0.5 * z * (1 + np.vectorize(math.erf)(z / np.sqrt(2)))
    return z / (1 + np.exp(-1.702 * z))

out = {}
for name in mlp.ACTIVATIONS:
    ours = grads(lambda a, k, b: activated_dense(a, k, b, name), (h, kernel, bias), w)
    plain = grads(lambda a, k, b: ops.matmul(mlp.activate(a, name), k) + b, (h, kernel, bias), w)
    reference = act64(h.astype("float64"), name) @ kernel + bias
    numeric = []
    for i in ((0, 1, 3), (1, 4, 11), (1, 2, 7)):
        up, down = h.astype("float64"), h.astype("float64")
        up[i] += 1e-6; down[i] -= 1e-6
        fd = ((w * (act64(up, name) @ kernel + bias)).sum() - (w * (act64(down, name) @ kernel + bias)).sum()) / 2e-6
        numeric.append([float(ours[1][0][i]), float(fd)])
    out[name] = {"value_vs_float64": float(np.abs(ours[0] - reference).max()),
                 "grads_vs_autodiff": [float(np.abs(a - b).max() / np.abs(b).max()) for a, b in zip(ours[1], plain[1])],
                 "d_h_vs_central_differences": numeric}

block = mlp.MlpBlock(24, activation="gelu")
tokens = rng.standard_normal((2, 5, 12)).astype("float32")
block.build(tokens.shape)
out["takes_core"] = block._keeps_activation_input(True)
weights = [v.value for v in block.trainable_variables]
block_grads = []
for training in (True, False):
    def f(t, *vs):
        y, _ = block.stateless_call(list(vs), [], t, training=training)
        return y
    upstream = np.ones((2, 5, 12), "float32")
    block_grads.append(grads(f, [tokens, *[np.asarray(v) for v in weights]], upstream)[1])
out["block_train_vs_infer"] = max(float(np.abs(a - b).max() / np.abs(b).max()) for a, b in zip(*block_grads))

if backend == "jax":  # what XLA keeps for the backward pass of 12 residual MLPs, in bytes
    d, m = 128, 512
    layers = [(rng.standard_normal((d, m)).astype("float32") / 11, rng.standard_normal((m, d)).astype("float32") / 22)
              for _ in range(12)]
    x0 = rng.standard_normal((256, d)).astype("float32")
    zero = np.zeros((d,), "float32")

    def temp(core):
        def loss(x, layers):
            for k0, k1 in layers:
                hidden = x @ k0
                x = x + (activated_dense(hidden, k1, zero, "gelu_tanh") if core
                         else mlp.activate(hidden, "gelu_tanh", training=True) @ k1)
            return x.sum()
        # the kernels' gradients too: without them the plain form need not keep act(h) either
        step = jax.jit(jax.grad(loss, argnums=(0, 1)))
        return step.lower(x0, layers).compile().memory_analysis().temp_size_in_bytes

    out["temp_bytes"] = {"core": temp(True), "plain": temp(False), "one_hidden": 256 * m * 4}
print(json.dumps(out))
"""


@pytest.mark.parametrize("backend", ["tensorflow", "jax"])
def test_activated_dense_values_and_gradients(backend):
    out = run_on_backend(_CHECK, backend)
    for name in ("gelu_tanh", "gelu", "quick_gelu"):
        r = out[name]
        assert r["value_vs_float64"] <= 1e-5, (name, r)
        assert max(r["grads_vs_autodiff"]) <= 1e-5, (name, r)  # d_h, d_kernel, d_bias: float32 rounding
        for ours, numeric in r["d_h_vs_central_differences"]:
            assert ours == pytest.approx(numeric, rel=1e-4, abs=1e-4), (name, r)
    assert out["takes_core"] is True
    assert out["block_train_vs_infer"] <= 1e-5, out  # the MLP block's training gradients are unchanged
    if backend == "jax":
        # plain keeps h and act(h) of each of the 12 layers (24 hidden tensors; measured 24), the core h only
        # plus the backward pass's working set (measured 15)
        t = out["temp_bytes"]
        assert t["core"] <= t["plain"] - 6 * t["one_hidden"], t


def test_keras_own_path_where_the_core_does_not_apply():
    """Inference, dropout while training, and LoRA or int8 on `Dense_1`: the block then calls its `Dense_1` as
    Keras does (the core would skip the adapter or the int8 kernel). Training and inference agree in value."""
    import keras

    from keras_vit.vit.mlp import MlpBlock

    def block(**kwargs):
        b = MlpBlock(16, **kwargs)
        b.build((1, 3, 8))
        return b

    assert block()._keeps_activation_input(True)
    assert not block()._keeps_activation_input(False)
    assert not block(dropout_rate=0.1)._keeps_activation_input(True)
    lora = block()
    lora.dense_1.enable_lora(2)
    assert not lora._keeps_activation_input(True)
    quantized = block()
    quantized.dense_1.quantize("int8")
    assert not quantized._keeps_activation_input(True)
    x = np.random.default_rng(1).standard_normal((1, 3, 8)).astype("float32")
    b = block()
    assert np.allclose(keras.ops.convert_to_numpy(b(x, training=True)), keras.ops.convert_to_numpy(b(x)), atol=1e-6)


@pytest.mark.parametrize("activation", ["gelu_tanh", "gelu", "quick_gelu"])
def test_a_model_trains_with_the_same_gradients_through_its_variables(activation):
    """A whole (tiny) model on this process's backend, differentiated through its real variables in a compiled
    step: the training call (which takes the core on TF and JAX) gives every variable the gradient of the
    inference call (Keras' own Dense and activation), and the same loss."""
    import keras

    import keras_vit

    model = keras_vit.VisionTransformer(patch_size=4, hidden_size=16, mlp_dim=32, num_heads=2, num_layers=2,
                                        input_shape=(16, 16, 3), classes=5, classifier_activation=None,
                                        activation=activation)
    rng = np.random.default_rng(3)
    model.set_weights([rng.normal(0, 0.3, w.shape).astype(w.dtype) for w in model.get_weights()])
    x = rng.uniform(-1, 1, (2, 16, 16, 3)).astype("float32")
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        @tf.function(jit_compile=True)
        def step(training):
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(tf.sin(model(x, training=training)))
            return loss, tape.gradient(loss, model.trainable_variables)

        (loss_t, grads_t), (loss_i, grads_i) = step(True), step(False)
    elif backend == "jax":
        import jax

        def loss(values, training):
            y, _ = model.stateless_call(values, [v.value for v in model.non_trainable_variables], x,
                                        training=training)
            return jax.numpy.sum(jax.numpy.sin(y))

        values = [v.value for v in model.trainable_variables]
        (loss_t, grads_t), (loss_i, grads_i) = (jax.jit(jax.value_and_grad(loss), static_argnums=1)(values, t)
                                                for t in (True, False))
    else:
        pytest.skip("PyTorch keeps Keras' own path")
    assert model.encoder.blocks[0].mlp._keeps_activation_input(True)
    assert abs(float(loss_t) - float(loss_i)) <= 1e-5
    for variable, g_t, g_i in zip(model.trainable_variables, grads_t, grads_i):
        g_t, g_i = np.asarray(g_t), np.asarray(g_i)
        assert np.abs(g_i).max() > 0, variable.path
        assert np.abs(g_t - g_i).max() <= 1e-5 * max(1.0, np.abs(g_i).max()), variable.path
