"""`keras_vit.nn.attention_core.recomputed_attention` on TensorFlow, which every training call takes (the
probabilities recomputed in the backward pass): a model's training gradients equal those of its inference call
(TensorFlow's own differentiation of the plain formula), eagerly and compiled by XLA, by default and with
`remat="attention"` (kept as a spelling of the default); the compiled backward pass of stacked attention keeps
fewer temporaries than the plain formula's (XLA's own buffer report); the mode survives a save and reload;
other values are refused."""

import pytest
from conftest import run_on_backend

import keras_vit

_CHECK = r"""
import json, os, sys
os.environ["XLA_FLAGS"] = "--xla_dump_to=" + sys.argv[1]
import numpy as np, tensorflow as tf, keras
import keras_vit
from keras_vit.nn.attention_core import attention, recomputed_attention
from tests.xla_report import preallocated_temp_bytes

rng = np.random.default_rng(0)
x = tf.constant(rng.standard_normal((8, 64, 4, 16)).astype("float32"))

def stacked(core):  # gradient of 4 attention layers in a row
    def grad_of_stack(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = x
            for _ in range(4):
                y = core(y, y, y)
            loss = tf.reduce_sum(y)
        return tape.gradient(loss, x)
    return grad_of_stack

out = {}
for name, core in (("recomputed", recomputed_attention), ("plain", attention)):
    fn = stacked(core)
    fn.__name__ = "stack_" + name
    out[name + "_grad"] = tf.function(fn, jit_compile=True)(x).numpy()
temps = {name: preallocated_temp_bytes(sys.argv[1], "stack_" + name) for name in ("recomputed", "plain")}
out["temp_bytes"] = dict(temps, probabilities=8 * 4 * 64 * 64 * 4)
# both float32 gradients against the plain formula's in float64: the recomputed one as close as TensorFlow's own
exact = tf.function(stacked(attention))(tf.cast(x, "float64")).numpy()
for name in ("recomputed", "plain"):
    out["stack_grads_" + name] = float(np.abs(out.pop(name + "_grad") - exact).max() / np.abs(exact).max())

def build(remat):
    model = keras_vit.VisionTransformer(patch_size=4, hidden_size=32, mlp_dim=64, num_heads=4, num_layers=2,
                                        input_shape=(16, 16, 3), classes=5, classifier_activation=None, remat=remat)
    model.get_layer("head").kernel.assign(np.random.default_rng(1).standard_normal((32, 5)).astype("float32"))
    return model  # (a zero head would stop every gradient)

images = tf.constant(rng.uniform(-1, 1, (2, 16, 16, 3)).astype("float32"))
plain, model = build(False), build("attention")
model.set_weights(plain.get_weights())

def grads(model, training=True):
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(model(images, training=training) ** 2)
    return tape.gradient(loss, model.trainable_variables)

# the reference: the inference call, whose attention is the plain einsum formula differentiated by TensorFlow
expected = [g.numpy() for g in grads(plain, training=False)]
for label, fn, m in (("eager", grads, model), ("xla", tf.function(grads, jit_compile=True), model),
                     ("default_xla", tf.function(grads, jit_compile=True), plain)):
    rel, key_bias = [], []  # the key bias's gradient is 0 in exact arithmetic: only its size is checked
    for var, a, b in zip(m.trainable_variables, fn(m), expected):
        a = a.numpy()
        if var.path.endswith("key/bias"):
            key_bias.append(float(max(np.abs(a).max(), np.abs(b).max())))
        else:
            rel.append(float(np.abs(a - b).max() / np.abs(b).max()))
    out["model_grads_" + label] = [max(rel), max(key_bias)]
path = os.path.join(sys.argv[1], "attention.keras")
model.save(path)
out["reloaded_remat"] = keras.saving.load_model(path).remat
print(json.dumps(out))
"""


def test_recomputed_attention_on_tensorflow(tmp_path):
    out = run_on_backend(_CHECK, "tensorflow", str(tmp_path))
    # four stacked layers amplify float32's rounding to ~2e-5 of the float64 gradient on either path
    assert out["stack_grads_recomputed"] <= 1.1 * out["stack_grads_plain"] + 1e-6, out
    assert out["stack_grads_recomputed"] <= 5e-5, out
    t = out["temp_bytes"]  # both reports found, and at least two layers' probabilities fewer kept
    assert t.get("plain", 0) > 0 and t.get("recomputed", 0) > 0, t
    assert t["recomputed"] <= t["plain"] - 2 * t["probabilities"], t
    for label in ("eager", "xla", "default_xla"):
        rel, key_bias = out["model_grads_" + label]
        assert rel <= 1e-5 and key_bias <= 1e-4, out
    assert out["reloaded_remat"] == "attention", out


@pytest.mark.parametrize("value", ["block", 2, None])
def test_remat_refuses_other_values(value):
    with pytest.raises(ValueError, match="remat must be one of"):
        keras_vit.VisionTransformer(
            patch_size=4,
            hidden_size=32,
            mlp_dim=64,
            num_heads=4,
            num_layers=1,
            input_shape=(16, 16, 3),
            classes=5,
            remat=value,
        )
