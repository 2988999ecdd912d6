"""On PyTorch a training step of a keras_vit model leaves no gradients behind (`keras_vit.vit.fit_memory`): after
`train_on_batch` and `fit` every parameter's `.grad` is None, and the weights, the optimizer's slots and the
reported losses equal those of Keras' own `train_step`, bit for bit."""

from conftest import run_on_backend

_CHECK = r"""
import json
import numpy as np, keras
import keras_vit
from keras_vit.vit.fit_memory import FitMemory

def run():
    keras.utils.set_random_seed(3)
    model = keras_vit.VisionTransformer(patch_size=4, hidden_size=8, mlp_dim=16, num_heads=2, num_layers=2,
                                        input_shape=(8, 8, 3), classes=3, classifier_activation=None)
    model.compile(optimizer=keras_vit.FusedAdamW(1e-2, weight_decay=0.05),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    x = np.random.default_rng(0).uniform(-1, 1, (8, 8, 8, 3)).astype("float32")
    y = np.arange(8) % 3
    losses = [float(model.train_on_batch(x[:4], y[:4]))]
    held = sum(v.value.grad is not None for v in model.trainable_variables)
    history = model.fit(x, y, batch_size=4, epochs=2, verbose=0, shuffle=False)
    held += sum(v.value.grad is not None for v in model.trainable_variables)
    arrays = [np.asarray(w) for w in model.get_weights()] + [np.asarray(v) for v in model.optimizer.variables]
    return losses + history.history["loss"], held, arrays

ours = run()
del FitMemory.train_step  # Keras' own train_step, which clears the gradients after the next forward pass
keras_own = run()
print(json.dumps({
    "losses": [ours[0], keras_own[0]],
    "held_gradients": [ours[1], keras_own[1]],
    "arrays_equal": all(np.array_equal(a, b) for a, b in zip(ours[2], keras_own[2])),
    "arrays": [len(ours[2]), len(keras_own[2])],
}))
"""


def test_a_torch_training_step_leaves_no_gradients_and_trains_as_keras_own():
    out = run_on_backend(_CHECK, "torch")
    assert out["held_gradients"][0] == 0, out
    assert out["held_gradients"][1] > 0, out  # Keras' own step holds them (what the change is for)
    assert out["losses"][0] == out["losses"][1], out
    assert out["arrays"][0] == out["arrays"][1] > 0 and out["arrays_equal"], out
