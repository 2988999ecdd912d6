"""`keras_vit.nn.mlp_core.activated_dense` (the MLP's activation and second Dense while training on TF and JAX):
the values of the plain formula, gradients that match the framework's own differentiation of it and central
differences in float64 numpy for each activation, the MLP block's training gradients unchanged, the cases
that keep Keras' own path, and a compiled backward pass that keeps less (XLA's own buffer reports)."""

import numpy as np
import pytest

from conftest import run_on_backend

_CHECK = r"""
import json, sys
from tests.xla_report import dump_compiled_programs, preallocated_temp_bytes
dump_compiled_programs(sys.argv[1])  # XLA's buffer reports of the compiled steps, before TensorFlow starts
import numpy as np, keras
from keras import ops
from keras_vit.vit import mlp
from keras_vit.nn.mlp_core import activated_dense
from tests.vjp import backend, grads, jax, tf

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

# what XLA keeps for the backward pass of 12 residual MLPs, in bytes, with the kernels' gradients too (without
# them the plain form need not keep act(h) either)
d, m = 128, 512
layers = [(rng.standard_normal((d, m)).astype("float32") / 11, rng.standard_normal((m, d)).astype("float32") / 22)
          for _ in range(12)]
x0 = rng.standard_normal((256, d)).astype("float32")
zero = np.zeros((d,), "float32")

def loss(x, layers, core):
    for k0, k1 in layers:
        hidden = ops.matmul(x, k0)
        x = x + (activated_dense(hidden, k1, zero, "gelu_tanh") if core
                 else ops.matmul(mlp.activate(hidden, "gelu_tanh", training=True), k1))
    return ops.sum(x)

def temp(core):
    if backend == "jax":
        step = jax.jit(jax.grad(lambda x, layers: loss(x, layers, core), argnums=(0, 1)))
        return step.lower(x0, layers).compile().memory_analysis().temp_size_in_bytes
    name = "mlp_stack_core" if core else "mlp_stack_plain"
    kernels = [tf.Variable(k) for pair in layers for k in pair]

    def step(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            value = loss(x, list(zip(kernels[::2], kernels[1::2])), core)
        return tape.gradient(value, [x, *kernels])

    step.__name__ = name
    tf.function(step, jit_compile=True)(tf.constant(x0))
    return preallocated_temp_bytes(sys.argv[1], name)

out["temp_bytes"] = {"core": temp(True), "plain": temp(False), "one_hidden": 256 * m * 4}
print(json.dumps(out))
"""


@pytest.mark.parametrize("backend", ["tensorflow", "jax"])
def test_activated_dense_values_and_gradients(backend, tmp_path):
    out = run_on_backend(_CHECK, backend, str(tmp_path))
    for name in ("gelu_tanh", "gelu", "quick_gelu"):
        r = out[name]
        assert r["value_vs_float64"] <= 1e-5, (name, r)
        assert max(r["grads_vs_autodiff"]) <= 1e-5, (name, r)  # d_h, d_kernel, d_bias: float32 rounding
        for ours, numeric in r["d_h_vs_central_differences"]:
            assert ours == pytest.approx(numeric, rel=1e-4, abs=1e-4), (name, r)
    assert out["takes_core"] is True
    assert out["block_train_vs_infer"] <= 1e-5, out  # the MLP block's training gradients are unchanged
    # XLA's temporaries: the plain form keeps h and act(h) of each of the 12 layers (24 hidden tensors; JAX
    # measured 24), the core h only, plus the backward pass's working set (JAX measured 15)
    t = out["temp_bytes"]
    assert t["core"] <= t["plain"] - 6 * t["one_hidden"], t


def test_keras_own_path_where_the_core_does_not_apply():
    """Inference, dropout while training, and LoRA or int8 on `Dense_1`: the block then calls its `Dense_1` as
    Keras does (the core would skip the adapter or the int8 kernel). Training and inference agree in value."""
    import keras

    from keras_vit.nn.mlp import MlpBlock

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


def test_an_unknown_activation_is_refused_by_name():
    from keras_vit.nn.mlp_core import activated_dense, value_and_slope

    h, kernel, bias = np.ones((2, 4), "float32"), np.ones((4, 3), "float32"), np.zeros((3,), "float32")
    with pytest.raises(ValueError, match="Unknown activation 'relu'"):
        activated_dense(h, kernel, bias, "relu")
    with pytest.raises(ValueError, match="Unknown activation 'relu'"):
        value_and_slope(h, "relu")
