"""bf16 mixed precision training ("mixed_bfloat16": bf16 compute, float32 variables) on each backend, through Keras'
own `compile` / `train_on_batch`, as a user on a CPU with native bf16 products trains (BENCHMARKS.md).

- One SGD step at rate 1 moves each weight by minus its gradient. The bf16 step's move is within bf16's rounding of
  the float32 step's (relative L2 error per weight under 5 %), and not equal to it: the products did run in bf16.
- The variables and the optimizer's slots stay float32, and `keras_vit.FusedAdamW` still runs its backend's fused
  kernel (PyTorch, TensorFlow), with the same update as Keras' AdamW under the same policy.
- A few steps of `fit` lower the loss.
"""

import pytest
from conftest import run_on_backend

_CHECK = r"""
import json
import numpy as np, keras
import keras_vit

rng = np.random.default_rng(0)
x = rng.uniform(-1, 1, (8, 16, 16, 3)).astype("float32")
y = np.arange(8) % 4
x[np.arange(8), :, :, y % 3] += 1.5  # a class signal the model can learn in a few steps


def build(policy):
    keras.mixed_precision.set_global_policy(policy)
    try:
        keras.utils.set_random_seed(1)
        return keras_vit.VisionTransformer(patch_size=4, hidden_size=32, mlp_dim=64, num_heads=2, num_layers=2,
                                           input_shape=(16, 16, 3), classes=4, classifier_activation=None)
    finally:
        keras.mixed_precision.set_global_policy("float32")


loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
start = [w if np.any(w) else rng.normal(0, 0.05, w.shape).astype(w.dtype)  # the zero-initialised head too
         for w in build("float32").get_weights()]


def sgd_move(policy):
    model = build(policy)
    model.set_weights(start)
    model.compile(keras.optimizers.SGD(1.0), loss)
    model.train_on_batch(x, y)
    return [np.asarray(w, "float64") - np.asarray(s, "float64") for w, s in zip(model.get_weights(), start)]


full, half = sgd_move("float32"), sgd_move("mixed_bfloat16")
moved = [i for i, d in enumerate(full) if np.linalg.norm(d) > 1e-6]
errors = [float(np.linalg.norm(half[i] - full[i]) / np.linalg.norm(full[i])) for i in moved]


def adamw_model(optimizer):
    model = build("mixed_bfloat16")
    model.set_weights(start)
    model.compile(optimizer, loss)
    return model


# one step from the same weights: the same bf16 gradients, so the two updates differ by float32 rounding only
fused_model = adamw_model(keras_vit.FusedAdamW(3e-3, weight_decay=0.05))
keras_model = adamw_model(keras.optimizers.AdamW(3e-3, weight_decay=0.05))
losses = [float(fused_model.train_on_batch(x, y))]
keras_model.train_on_batch(x, y)
fused_vs_keras = max(float(np.max(np.abs(a - b))) for a, b in zip(fused_model.get_weights(), keras_model.get_weights()))
losses += [float(fused_model.train_on_batch(x, y)) for _ in range(7)]
slots = fused_model.optimizer._momentums + fused_model.optimizer._velocities
dtypes = {keras.backend.standardize_dtype(v.dtype) for v in fused_model.weights + slots}
print(json.dumps({
    "moved": len(moved), "errors": errors,
    "compute": fused_model.get_layer("Transformer").blocks[0].attention.compute_dtype,
    "dtypes": sorted(dtypes), "fused": fused_model.optimizer._fused, "losses": losses,
    "fused_vs_keras": fused_vs_keras, "total_error": float(
        np.sqrt(sum(np.sum((half[i] - full[i]) ** 2) for i in moved) / sum(np.sum(full[i] ** 2) for i in moved))),
}))
"""


@pytest.mark.parametrize("backend, kernel", [("torch", "torch"), ("tensorflow", "tensorflow"), ("jax", None)])
def test_bf16_mixed_precision_trains_as_float32_within_bf16_rounding(backend, kernel):
    out = run_on_backend(_CHECK, backend)
    assert out["compute"] == "bfloat16", out
    assert out["moved"] >= 20, out  # every kernel, bias, norm and embedding of the two blocks
    assert out["total_error"] < 0.05 and max(out["errors"]) < 0.1, out  # measured 0.022 and 0.054
    assert max(out["errors"]) > 1e-4, out  # the step did compute in bf16
    assert out["dtypes"] == ["float32"], out
    assert out["fused"] == kernel, out
    assert out["fused_vs_keras"] < 1e-5, out
    assert out["losses"][-1] < 0.6 * out["losses"][0], out  # measured 0.41-0.43
