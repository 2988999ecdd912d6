"""`predict`'s step per backend (keras_vit/vit/predict_function.py): eager on TensorFlow until the model has predicted
`EAGER_PREDICT_BATCHES` batches, then Keras' traced graph for good; on JAX Keras' step compiled without YNNPACK's
fusions, with the weights left where they are. Outputs are checked against the model's own eager call, and the
cases that keep Keras' function (datasets, `jit_compile=True`, `steps_per_execution`) are checked to keep it."""

import pytest

from tests.conftest import run_on_backend

_TENSORFLOW = r"""
import json
import numpy as np, tensorflow as tf, keras, keras_vit
from keras_vit.vit.predict_function import EAGER_PREDICT_BATCHES

def tiny():
    keras.utils.set_random_seed(0)
    return keras_vit.VisionTransformer(8, 16, 32, 2, 2, input_shape=(32, 48, 3), classes=5)

def kind(model):
    f = model.predict_function
    return "eager" if getattr(f, "eager", False) else "graph" if isinstance(f, tf.types.experimental.PolymorphicFunction) else "other"

x = np.random.default_rng(0).uniform(-1, 1, (5, 32, 48, 3)).astype("float32")
out = {}
model = tiny()
reference = np.asarray(model(x, training=False))
first = model.predict(x, batch_size=2, verbose=0)  # 3 batches
out["first"] = [kind(model), float(np.abs(first - reference).max()), model._eager_predict_batches]
out["on_batch"] = [float(np.abs(model.predict_on_batch(x) - reference).max()), kind(model)]
for _ in range(EAGER_PREDICT_BATCHES - 4 - 1):  # up to one batch short of the budget
    model.predict(x[:1], verbose=0)
out["last_eager"] = [kind(model), model._eager_predict_batches]
model.predict(x, batch_size=2, verbose=0)  # 3 more: past the budget, so the graph
graph = model.predict(x, batch_size=2, verbose=0)
out["past_budget"] = [kind(model), float(np.abs(graph - reference).max())]
model.predict(x[:1], verbose=0)
out["stays_graph"] = kind(model)

big = tiny()
big.predict(np.repeat(x, 7, axis=0), batch_size=1, verbose=0)  # 35 batches in one call
out["big_call"] = kind(big)

data = tiny()
data.predict(tf.data.Dataset.from_tensor_slices(x).batch(2), verbose=0)
out["dataset"] = kind(data)

for name, options in {"jit": {"jit_compile": True}, "steps": {"steps_per_execution": 2}}.items():
    compiled = tiny()
    compiled.compile(optimizer="sgd", loss="mse", **options)
    y = compiled.predict(x, batch_size=2, verbose=0)
    out[name] = [kind(compiled), float(np.abs(y - reference).max())]

eager = tiny()
eager.compile(optimizer="sgd", loss="mse", run_eagerly=True)
eager.predict(x, batch_size=2, verbose=0)
out["run_eagerly"] = [kind(eager), eager.run_eagerly]

features = tiny().feature_model()
features.predict(x, verbose=0)
out["feature_model"] = kind(features)
print(json.dumps(out))
"""


def test_tensorflow_predicts_eagerly_until_the_trace_pays():
    out = run_on_backend(_TENSORFLOW, "tensorflow")
    assert out["first"][0] == "eager" and out["first"][1] < 1e-6 and out["first"][2] == 3
    assert out["on_batch"][0] < 1e-6 and out["on_batch"][1] == "eager"
    assert out["last_eager"] == ["eager", 31]
    assert out["past_budget"][0] == "graph" and out["past_budget"][1] < 1e-4
    assert out["stays_graph"] == "graph"
    assert out["big_call"] == "graph"
    assert out["dataset"] == "graph"
    for name in ("jit", "steps"):  # Keras' own function, and the same outputs
        assert out[name][0] != "eager" and out[name][1] < 1e-4, (name, out[name])
    assert out["run_eagerly"] == ["other", True]  # the user's eager mode is Keras', not the budget's
    assert out["feature_model"] == "eager"


_JAX = r"""
import json
import numpy as np, keras, keras_vit
import keras_vit.utils.xla_options as xla_options

made = []
original = xla_options.tuned_jit
def recording(function, **keywords):
    made.append(keywords)
    return original(function, **keywords)
xla_options.tuned_jit = recording

keras.utils.set_random_seed(0)
model = keras_vit.VisionTransformer(8, 16, 32, 2, 2, input_shape=(32, 48, 3), classes=5)
x = np.random.default_rng(0).uniform(-1, 1, (5, 32, 48, 3)).astype("float32")
before = [np.array(v.value) for v in model.weights]
reference = np.asarray(model(x, training=False))
first = model.predict(x, batch_size=2, verbose=0)
second = model.predict(x, batch_size=4, verbose=0)
after = [np.array(v.value) for v in model.weights]
out = {
    "compiled": len(made), "donated": [k.get("donate_argnums") for k in made],
    "first": float(np.abs(first - reference).max()), "second": float(np.abs(second - reference).max()),
    "weights_kept": all(np.array_equal(a, b) for a, b in zip(before, after)),
    "on_batch": float(np.abs(model.predict_on_batch(x) - reference).max()),
}
eager = keras_vit.VisionTransformer(8, 16, 32, 2, 2, input_shape=(32, 48, 3), classes=5)
eager.compile(optimizer="sgd", loss="mse", run_eagerly=True)
eager.predict(x, verbose=0)
out["compiled_after_run_eagerly"] = len(made)
print(json.dumps(out))
"""


def test_jax_predict_step_compiles_without_ynn_and_keeps_the_weights():
    pytest.importorskip("jax")
    out = run_on_backend(_JAX, "jax")
    assert out["compiled"] == 1 and out["donated"] == [None]  # one function for both calls, nothing donated
    assert out["first"] < 1e-5 and out["second"] < 1e-5 and out["on_batch"] < 1e-5
    assert out["weights_kept"]
    assert out["compiled_after_run_eagerly"] == 1  # run_eagerly keeps Keras' own (uncompiled) step


_TENSORFLOW_ARRAYS = r"""
import contextlib, io, json
import numpy as np, keras, keras_vit
from keras_vit.vit.predict_function import PredictFunction

class Recorder(keras.callbacks.Callback):
    def __init__(self, stop_after=None):
        super().__init__()
        self.events, self.stop_after = [], stop_after
    def on_predict_begin(self, logs=None):
        self.events.append("begin")
    def on_predict_batch_begin(self, batch, logs=None):
        self.events.append(f"batch_begin {batch}")
    def on_predict_batch_end(self, batch, logs=None):
        self.events.append(f"batch_end {batch} {tuple(logs['outputs'].shape)}")
        if batch == self.stop_after:
            self.model.stop_predicting = True
    def on_predict_end(self, logs=None):
        self.events.append("end")

def run(model, x, **keywords):
    recorder, shown = Recorder(keywords.pop("stop_after", None)), io.StringIO()
    with contextlib.redirect_stdout(shown):
        y = model.predict(x, batch_size=2, callbacks=[recorder], **keywords)
    return y, recorder.events, shown.getvalue()

keras.utils.set_random_seed(0)
ours = keras_vit.VisionTransformer(8, 16, 32, 2, 2, input_shape=(32, 48, 3), classes=5)
plain = keras.Model(ours.inputs, ours.outputs)  # Keras' own predict (its tf.data pipeline), the same weights
seen = []
step = ours.predict_step
ours.predict_step = lambda data: seen.append([type(data[0]).__name__, str(data[0].dtype)]) or step(data)
x = np.random.default_rng(0).uniform(-1, 1, (5, 32, 48, 3))  # float64: Keras casts it to floatx
out = {}
for name, keywords in {"quiet": dict(verbose=0), "bar": dict(verbose=1), "stopped": dict(verbose=0, stop_after=0)}.items():
    y, events, shown = run(ours, x, **keywords)
    y_plain, events_plain, shown_plain = run(plain, x, **keywords)
    out[name] = [float(np.abs(y - y_plain).max()), list(y.shape), events == events_plain, events,
                 "3/3" in shown, "3/3" in shown_plain]
out["seen"] = seen

a, b = keras.Input((3,), name="a"), keras.Input((4,), name="b")
class Two(PredictFunction, keras.Model):
    pass
outputs = {"sum": keras.layers.Dense(2)(keras.layers.Concatenate()([a, b])), "a": a * 2.0}
two, plain_two = Two({"a": a, "b": b}, outputs), keras.Model({"a": a, "b": b}, outputs)
inputs = {"a": np.arange(15.0).reshape(5, 3).astype("float32"), "b": np.ones((5, 4), "float32")}
mine, theirs = two.predict(inputs, batch_size=2, verbose=0), plain_two.predict(inputs, batch_size=2, verbose=0)
out["dict"] = [sorted(mine), float(max(np.abs(mine[k] - theirs[k]).max() for k in theirs)), list(mine["sum"].shape),
               getattr(two.predict_function, "eager", False)]
print(json.dumps(out))
"""


def test_tensorflow_eager_predict_slices_arrays_as_keras_does():
    """While the step is eager, arrays are sliced into batches without Keras' tf.data pipeline: the outputs,
    callback calls, progress bar and `stop_predicting` are those of Keras' own `predict` on a plain `keras.Model`
    with the same weights; float64 arrays reach the step as float32 NumPy batches, as Keras' adapter casts them."""
    out = run_on_backend(_TENSORFLOW_ARRAYS, "tensorflow")
    for name in ("quiet", "bar"):
        assert out[name][0] < 1e-6 and out[name][1] == [5, 5] and out[name][2], (name, out[name])
    assert out["quiet"][3] == [
        "begin",
        "batch_begin 0",
        "batch_end 0 (2, 5)",
        "batch_begin 1",
        "batch_end 1 (2, 5)",
        "batch_begin 2",
        "batch_end 2 (1, 5)",
        "end",
    ]
    assert out["bar"][4] and out["bar"][5]  # both print Keras' progress bar to its last step
    assert out["stopped"][1] == [2, 5] and out["stopped"][2]  # one batch, then stopped, as Keras stops
    assert out["seen"] and all(kind == ["ndarray", "float32"] for kind in out["seen"])
    assert out["dict"][0] == ["a", "sum"] and out["dict"][1] < 1e-6 and out["dict"][2] == [5, 2] and out["dict"][3]


def test_only_numeric_arrays_of_one_length_are_sliced_here():
    """Strings, objects, lists of numbers, mismatched lengths and empty arrays go to Keras' own pipeline."""
    import numpy as np

    from keras_vit.vit.predict_function import _arrays

    assert _arrays(np.zeros((2, 3)))
    assert _arrays({"a": np.zeros((2, 3)), "b": np.zeros((2,), "int32"), "c": np.zeros((2,), bool)})
    assert not _arrays(np.array(["a", "b"]))
    assert not _arrays(np.array([{}, {}], dtype=object))
    assert not _arrays([np.zeros((2, 3)), np.zeros((3, 3))])
    assert not _arrays(np.zeros((0, 3)))
    assert not _arrays([1, 2])
