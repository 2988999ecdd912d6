"""`remat=True`: each encoder block recomputed in the backward pass (`keras.remat`) gives the same loss and
gradients as keeping its activations, dropout and stochastic depth included, on TensorFlow and JAX."""

import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_vit
from conftest import ROOT

SPEC = dict(
    patch_size=4,
    hidden_size=32,
    mlp_dim=64,
    num_heads=4,
    num_layers=3,
    input_shape=(16, 16, 3),
    classes=5,
    classifier_activation=None,
)


def _model(remat: bool, rate: float):
    keras.utils.set_random_seed(1)  # the same seed-generator states in both models
    model = keras_vit.VisionTransformer(**SPEC, remat=remat, dropout_rate=rate, drop_path_rate=rate)
    rng = np.random.default_rng(0)
    for v in model.trainable_variables:
        v.assign((0.2 * rng.standard_normal(v.shape)).astype("float32"))
    return model


def _x():
    return np.random.default_rng(2).uniform(-1, 1, (4, 16, 16, 3)).astype("float32")


def _tf_loss_and_grads(model, jit: bool):
    def step(x):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(model(x, training=True) ** 2)
        return loss, tape.gradient(loss, model.trainable_variables)

    fn = tf.function(step, jit_compile=True) if jit else step
    loss, grads = fn(tf.constant(_x()))
    return float(loss), [g.numpy() for g in grads]


# without dropout: make test-slow (the 0.3 rows check the same gradients with dropout's masks too)
@pytest.mark.parametrize("rate", [pytest.param(0.0, marks=pytest.mark.slow), 0.3])
@pytest.mark.parametrize("jit", [False, True])
def test_remat_gives_the_same_gradients_on_tensorflow(rate, jit):
    kept, remat = _model(False, rate), _model(True, rate)
    loss0, grads0 = _tf_loss_and_grads(kept, jit)
    loss1, grads1 = _tf_loss_and_grads(remat, jit)
    assert loss0 == pytest.approx(loss1, rel=1e-6)
    assert max(np.abs(a - b).max() for a, b in zip(grads0, grads1)) <= 1e-5
    assert all(np.abs(g).max() > 0 for g in grads1[-4:])  # gradients do reach the last blocks and the head

    # the dropout seed states advanced exactly as without remat (a resumed run draws the same masks)
    def states(m):
        return [np.asarray(v) for v in m.non_trainable_variables if "seed" in v.path]

    assert all(np.array_equal(a, b) for a, b in zip(states(kept), states(remat)))


_JAX = """
import json, sys, numpy as np, jax, keras, keras_vit
spec = json.loads(sys.argv[1]); out = {}
for rate in (0.0, 0.3):
    results = []
    for remat in (False, True):
        keras.utils.set_random_seed(1)
        model = keras_vit.VisionTransformer(**spec, remat=remat, dropout_rate=rate, drop_path_rate=rate)
        rng = np.random.default_rng(0)
        for v in model.trainable_variables:
            v.assign((0.2 * rng.standard_normal(v.shape)).astype("float32"))
        x = np.random.default_rng(2).uniform(-1, 1, (4, 16, 16, 3)).astype("float32")
        ntv = [v.value for v in model.non_trainable_variables]
        loss = lambda tv: (model.stateless_call(tv, ntv, x, training=True)[0] ** 2).sum()
        value, grads = jax.jit(jax.value_and_grad(loss))([v.value for v in model.trainable_variables])
        results.append((float(value), [np.asarray(g) for g in grads]))
        jaxpr = str(jax.make_jaxpr(loss)([v.value for v in model.trainable_variables]))
        out[f"remat_calls_{rate}_{remat}"] = jaxpr.count("remat")
    (l0, g0), (l1, g1) = results
    out[str(rate)] = [l0, l1, max(float(np.abs(a - b).max()) for a, b in zip(g0, g1))]
print(json.dumps(out))
"""


# slow (~19 s, a JAX process): on CPU XLA drops remat's barriers, so the default suite keeps the TF legs, where
# the recomputation really runs
@pytest.mark.slow
def test_remat_gives_the_same_gradients_on_jax():
    spec = dict(SPEC, input_shape=list(SPEC["input_shape"]))
    done = subprocess.run(
        [sys.executable, "-c", _JAX, json.dumps(spec)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=dict(os.environ, KERAS_BACKEND="jax", PYTHONPATH=ROOT),
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    for rate in ("0.0", "0.3"):
        loss0, loss1, grad_diff = out[rate]
        assert loss0 == pytest.approx(loss1, rel=1e-6) and grad_diff <= 1e-5, (rate, out[rate])
        assert out[f"remat_calls_{rate}_False"] == 0 and out[f"remat_calls_{rate}_True"] == 3  # one per block


def test_remat_is_kept_by_the_config_and_saved_models(tmp_path):
    model = keras_vit.VisionTransformer(**SPEC, remat=True)
    assert model.get_config()["remat"] is True
    assert all(block.remat for block in model.encoder.blocks)
    path = str(tmp_path / "remat.keras")
    model.save(path)
    again = keras.saving.load_model(path)
    assert again.remat and all(block.remat for block in again.encoder.blocks)
    x = _x()
    assert np.array_equal(again.predict(x, verbose=0), model.predict(x, verbose=0))
    # attention maps (inspection) bypass the recomputation and still come out
    assert len(model.intermediates(x, attention=True)["attention"]) == 3
    with pytest.raises(ValueError, match="remat"):
        keras_vit.VisionTransformer(**SPEC, remat="yes")


def test_recipes_take_config_model_remat():
    from recipes import train
    from recipes.configs import demo

    config = demo.get_config("pretrain")
    assert config.model.remat is False
    config.model.remat = True
    model = train.build_model(config, 32, 10)
    assert model.remat and all(block.remat for block in model.encoder.blocks)
