"""`keras_vit.nn.attention_core` on JAX (TensorFlow: test_attention_core_tf): the values of softmax attention,
gradients that match an independent autodiff of the plain formula and central differences in float64 numpy,
a model whose training gradients are those of the plain path, and a compiled backward pass that keeps no
probabilities."""

from conftest import run_on_backend

_CHECK = r"""
import json
import numpy as np, jax, jax.numpy as jnp, keras
import keras_vit
from keras_vit.nn.attention_core import attention_core

rng = np.random.default_rng(0)
q, k, v = (rng.standard_normal((2, 7, 3, 4)).astype("float32") for _ in range(3))
w = rng.standard_normal((2, 7, 3, 4)).astype("float32")

def plain(q, k, v):  # the formula, differentiated by JAX itself
    p = jax.nn.softmax(jnp.einsum("bqhd,bkhd->bhqk", q, k), axis=-1)
    return jnp.einsum("bhqk,bkhd->bqhd", p, v)

def reference64(q, k, v):  # float64 numpy
    s = np.einsum("bqhd,bkhd->bhqk", q, k)
    e = np.exp(s - s.max(-1, keepdims=True))
    return np.einsum("bhqk,bkhd->bqhd", e / e.sum(-1, keepdims=True), v)

out = {"value": float(np.abs(np.asarray(attention_core(q, k, v)) - reference64(q, k, v)).max())}
ours = jax.grad(lambda *a: jnp.sum(w * attention_core(*a)), argnums=(0, 1, 2))(q, k, v)
theirs = jax.grad(lambda *a: jnp.sum(w * plain(*a)), argnums=(0, 1, 2))(q, k, v)
out["grad_vs_autodiff"] = max(float(np.abs(np.asarray(a) - np.asarray(b)).max()) for a, b in zip(ours, theirs))
numeric = []
for arg, i in ((0, (1, 2, 0, 3)), (1, (0, 5, 2, 1)), (2, (1, 0, 1, 2))):
    args = [a.astype("float64") for a in (q, k, v)]
    step = np.zeros_like(args[arg]); step[i] = 1e-5
    up = [a + step if j == arg else a for j, a in enumerate(args)]
    down = [a - step if j == arg else a for j, a in enumerate(args)]
    fd = ((w * reference64(*up)).sum() - (w * reference64(*down)).sum()) / 2e-5
    numeric.append([float(np.asarray(ours[arg])[i]), float(fd)])
out["grad_vs_central_differences"] = numeric
half = [jnp.asarray(a, "bfloat16") for a in (q, k, v)]
gh = jax.grad(lambda *a: jnp.sum(w * attention_core(*a).astype("float32")), argnums=(0, 1, 2))(*half)
out["bf16"] = [str(attention_core(*half).dtype), str(gh[0].dtype),
               max(float(np.abs(np.asarray(a, "float32") - np.asarray(b)).max()) for a, b in zip(gh, theirs))]

# XLA's temporaries for the backward pass of 4 attention layers in a row, against the plain formula
x = rng.standard_normal((8, 64, 4, 16)).astype("float32")
def stacked(core):
    def loss(x):
        for _ in range(4):
            x = core(x, x, x)
        return x.sum()
    return jax.jit(jax.grad(loss)).lower(x).compile().memory_analysis().temp_size_in_bytes
out["temp_bytes"] = {"core": stacked(attention_core), "plain": stacked(plain), "probabilities": 8 * 4 * 64 * 64 * 4}

# a model: the training path's gradients are the plain path's
model = keras_vit.VisionTransformer(patch_size=4, hidden_size=32, mlp_dim=64, num_heads=4, num_layers=2,
                                    input_shape=(16, 16, 3), classes=5, classifier_activation=None)
images = rng.uniform(-1, 1, (2, 16, 16, 3)).astype("float32")
model.get_layer("head").kernel.assign(rng.standard_normal((32, 5)).astype("float32"))  # zeros would stop every gradient
tv, ntv = [x.value for x in model.trainable_variables], [x.value for x in model.non_trainable_variables]
def grads(training):
    return jax.grad(lambda t: jnp.sum(model.stateless_call(t, ntv, images, training=training)[0] ** 2))(tv)
keras_vit.MultiHeadDotProductAttention.FUSED = False
# relative to each variable's largest gradient; the key bias's is 0 in exact arithmetic (softmax ignores a
# shift shared by a row), so only its size is checked
rel, key_bias = [], []
for var, a, b in zip(model.trainable_variables, grads(True), grads(False)):
    a, b = np.asarray(a), np.asarray(b)
    if var.path.endswith("key/bias"):
        key_bias.append(float(max(np.abs(a).max(), np.abs(b).max())))
    else:
        rel.append(float(np.abs(a - b).max() / np.abs(b).max()))
out["model_grads"], out["key_bias_grads"] = max(rel), max(key_bias)
print(json.dumps(out))
"""


def test_attention_core_on_jax():
    out = run_on_backend(_CHECK, "jax")
    assert out["value"] <= 1e-5, out
    assert out["grad_vs_autodiff"] <= 1e-5, out
    for analytic, numeric in out["grad_vs_central_differences"]:
        assert abs(analytic - numeric) <= 1e-4 * max(1.0, abs(numeric)), out
    assert out["bf16"][:2] == ["bfloat16", "bfloat16"] and out["bf16"][2] <= 0.1, out
    t = out["temp_bytes"]  # at least three layers' probabilities fewer kept
    assert t["core"] <= t["plain"] - 3 * t["probabilities"], t
    assert out["model_grads"] <= 1e-5 and out["key_bias_grads"] <= 1e-4, out
