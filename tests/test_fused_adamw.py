"""`keras_vit.FusedAdamW`: Keras' AdamW run by PyTorch's fused kernel on the PyTorch backend and by TensorFlow's
`ResourceApplyAdam` on TensorFlow. Its variables follow Keras' AdamW written out in float64 numpy (the decoupled
decay, epsilon added to the uncorrected root, the schedule, a variable left out of the decay), the kernel is what
ran, and clipping, accumulation, EMA and saving are Keras' own. On JAX, and under a TensorFlow distribution
strategy, it is Keras' AdamW."""

import pytest

from conftest import run_on_backend

_SCRIPT = """
import json, os, sys, tempfile
import numpy as np
import keras
import keras_vit

backend = keras.backend.backend()
rng = np.random.default_rng(0)
shapes = [(64, 32), (32,), (16, 8, 4), (8,)]
init = [rng.normal(size=s).astype("float32") for s in shapes]
# the last variable's gradients are so small that the root of v is below epsilon: where epsilon goes shows there
scales = [1.0, 1.0, 1.0, 1e-7]
grads = [[(rng.normal(size=s) * k).astype("float32") for s, k in zip(shapes, scales)] for _ in range(6)]
calls = [0]
if backend == "torch":
    import torch

    kernel = torch._fused_adamw_

    def counting(*args, **kwargs):
        calls[0] += 1
        return kernel(*args, **kwargs)

    torch._fused_adamw_ = counting
if backend == "tensorflow":
    import tensorflow as tf

    # two replicas for the strategy below, set before TensorFlow makes its devices
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    kernel = tf.raw_ops.ResourceApplyAdam

    def counting(**kwargs):
        calls[0] += 1
        return kernel(**kwargs)

    tf.raw_ops.ResourceApplyAdam = counting


def run(cls, compiled=False, **options):
    variables = [keras.Variable(a, name=f"v{i}") for i, a in enumerate(init)]
    schedule = keras.optimizers.schedules.CosineDecay(1e-2, 10)
    optimizer = cls(learning_rate=schedule, weight_decay=0.1, **options)
    optimizer.exclude_from_weight_decay(var_list=[variables[1]])
    apply = lambda g: optimizer.apply(g, variables)
    if compiled:  # TensorFlow: one XLA program for the update, as in a compiled training step
        optimizer.build(variables)
        apply = tf.function(apply, jit_compile=True)
    for g in grads:
        apply([keras.ops.convert_to_tensor(x) for x in g])
    return [keras.ops.convert_to_numpy(v.value).astype("float64") for v in variables], optimizer


# Keras' AdamW in float64: decay first (not for the excluded bias), then the step with both corrections folded in
w = [a.astype("float64") for a in init]
m = [np.zeros_like(a) for a in w]
v = [np.zeros_like(a) for a in w]
for t, g in enumerate(grads, start=1):
    lr = 1e-2 * 0.5 * (1 + np.cos(np.pi * min(t - 1, 10) / 10))
    for i in range(len(shapes)):
        if i != 1:
            w[i] = w[i] - w[i] * 0.1 * lr
        m[i] = 0.9 * m[i] + 0.1 * g[i]
        v[i] = 0.999 * v[i] + 0.001 * g[i] ** 2
        w[i] = w[i] - lr * np.sqrt(1 - 0.999**t) / (1 - 0.9**t) * m[i] / (np.sqrt(v[i]) + 1e-7)

diff = lambda a, b: max(float(np.abs(x - y).max()) for x, y in zip(a, b))
fused, optimizer = run(keras_vit.FusedAdamW)
plain, _ = run(keras.optimizers.AdamW)
out = dict(numpy=diff(fused, w), keras=diff(fused, plain), calls=calls[0], iterations=int(optimizer.iterations.numpy()))
options = dict(global_clipnorm=1.0, gradient_accumulation_steps=2, use_ema=True, ema_overwrite_frequency=None)
calls[0] = 0
out["options"] = diff(run(keras_vit.FusedAdamW, **options)[0], run(keras.optimizers.AdamW, **options)[0])
out["options_calls"] = calls[0]
calls[0] = 0
out["amsgrad"] = diff(run(keras_vit.FusedAdamW, amsgrad=True)[0], run(keras.optimizers.AdamW, amsgrad=True)[0])
out["amsgrad_calls"] = calls[0]
if backend == "tensorflow":
    calls[0] = 0
    out["xla"] = diff(run(keras_vit.FusedAdamW, compiled=True)[0], w)
    out["xla_traced_calls"] = calls[0]  # one trace (the kernel is called while tracing, then runs compiled)
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])

    def replicated(cls):  # each replica's gradient is half the step's: Keras' update sums them
        with strategy.scope():
            variables = [keras.Variable(a, name=f"v{i}") for i, a in enumerate(init)]
            optimizer = cls(learning_rate=keras.optimizers.schedules.CosineDecay(1e-2, 10), weight_decay=0.1)
            optimizer.exclude_from_weight_decay(var_list=[variables[1]])
            optimizer.build(variables)
        step = tf.function(lambda g: strategy.run(lambda: optimizer.apply([x / 2 for x in g], variables)))
        for g in grads:
            step([tf.constant(x) for x in g])
        return [v.value.numpy().astype("float64") for v in variables]

    calls[0] = 0
    out["replicas"] = diff(replicated(keras_vit.FusedAdamW), w)
    out["replicas_keras"] = diff(replicated(keras_vit.FusedAdamW), replicated(keras.optimizers.AdamW))
    out["replicas_calls"] = calls[0]

# saved with a compiled model and read back: the class, its settings and its slots
model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)])
model.compile(keras_vit.FusedAdamW(1e-3, weight_decay=0.05), "mse")
model.train_on_batch(rng.normal(size=(8, 4)).astype("float32"), rng.normal(size=(8, 3)).astype("float32"))
path = os.path.join(tempfile.mkdtemp(), "m.keras")
model.save(path)
back = keras.saving.load_model(path)
slots = diff([keras.ops.convert_to_numpy(x.value) for x in model.optimizer.variables],
             [keras.ops.convert_to_numpy(x.value) for x in back.optimizer.variables])
out.update(saved=type(back.optimizer).__name__, weight_decay=float(back.optimizer.weight_decay), slots=slots)
print(json.dumps(out))
"""


def test_on_pytorch_the_fused_kernel_runs_keras_adamws_update():
    got = run_on_backend(_SCRIPT, "torch")
    assert got["numpy"] <= 2e-6 and got["keras"] <= 2e-6, got
    assert got["calls"] == 12 and got["iterations"] == 6, got  # 6 steps x (decayed, excluded) groups
    assert got["options"] <= 2e-6 and got["options_calls"] == 6, got  # 12 applies, accumulated in pairs
    assert got["amsgrad"] <= 2e-6 and got["amsgrad_calls"] == 0, got  # the kernel is not asked for amsgrad
    assert got["saved"] == "FusedAdamW" and got["weight_decay"] == pytest.approx(0.05) and got["slots"] == 0, got


def test_on_tensorflow_each_variable_is_one_resource_apply_adam():
    got = run_on_backend(_SCRIPT, "tensorflow")
    # TensorFlow's kernel takes 1 - beta_1 in float32 where Keras' update takes it in float64: rounding apart
    assert got["numpy"] <= 2e-6 and got["keras"] <= 2e-6, got
    assert got["calls"] == 24 and got["iterations"] == 6, got  # 6 steps x 4 variables
    assert got["options"] <= 2e-6 and got["options_calls"] == 12, got  # 6 applies, accumulated in pairs
    assert got["amsgrad"] <= 2e-6 and got["amsgrad_calls"] == 0, got
    assert got["xla"] <= 2e-6 and got["xla_traced_calls"] == 4, got
    # under a strategy Keras' update, with the decay the fused update would have made
    assert got["replicas"] <= 2e-6 and got["replicas_keras"] == 0 and got["replicas_calls"] == 0, got
    assert got["saved"] == "FusedAdamW" and got["weight_decay"] == pytest.approx(0.05) and got["slots"] == 0, got


def test_on_jax_it_is_keras_adamw():
    got = run_on_backend(_SCRIPT, "jax")
    assert got["numpy"] <= 2e-6 and got["keras"] == 0 and got["calls"] == 0, got
    assert got["options"] == 0 and got["amsgrad"] == 0 and got["saved"] == "FusedAdamW", got
