"""The function `predict` and `predict_on_batch` run, chosen for the first call's latency as well as the next.

Keras makes one prediction function per model. Two of its defaults cost the first prediction of a process more
than the whole load (ViT-B/16 on 2 cores, docs/benchmarks-history.md, "Cold start through the library"):

- TensorFlow traces the step into a `tf.function` graph: 1.3–1.9 s for a ViT-B/16, which no cache keeps
  across processes. The same step run eagerly goes through the encoder's compiled block function
  (`keras_vit.nn.block_graph`), so it costs no trace and, per batch, at most a few tens of milliseconds
  more than the graph. Here `predict` runs the step eagerly until the model has predicted
  `EAGER_PREDICT_BATCHES` batches in this process, about what one trace costs; a call that would pass that
  budget (and every call after it) uses Keras' traced graph. Datasets and generators, whose length is not
  known, take the graph at once, as do models compiled with `jit_compile=True` or `run_eagerly`, with
  `steps_per_execution` above 1, or under a distribution strategy: those keep Keras' behaviour.
  While the step is eager, in-memory NumPy arrays are sliced into batches here rather than through the
  `tf.data` pipeline Keras' TensorFlow `predict` builds for them on every call: for one ViT-B/16 image on 2
  cores that pipeline was 0.04 s of a 0.17 s `predict`, which now takes what the model's own call takes.
  Floating arrays are cast to `keras.config.floatx()`, as Keras' array adapter casts them.
- JAX compiles the step with XLA's defaults, whose YNNPACK fusions build their runtime on the first run of
  every program (0.3–0.4 s for a ViT-B/16, however warm the compilation cache). The step here is Keras' own,
  compiled without them (`keras_vit.utils.xla_options`; on a GPU, without XLA's Triton matrix products), as the
  recipes' training step and the prediction CLI are: on 2 cores steady calls are faster at batch 16 and up and
  about 9 % slower at batch 1. Under a Keras
  distribution, with `run_eagerly` or without `jit_compile`, Keras makes the function as before.

Outputs, callbacks, progress bars and inputs are Keras' throughout: only the step function differs.
"""

from __future__ import annotations

import math

import keras
import numpy as np

# batches a model predicts eagerly on TensorFlow before its graph is traced: the eager step's extra cost per
# batch (25-60 ms for ViT-Ti/16 to ViT-B/16 on 2 cores) times this is about one trace (1.3-2.3 s)
EAGER_PREDICT_BATCHES = 32


class PredictFunction:
    """Mixin for a `keras.Model`: `predict`'s step chosen per backend as the module docstring says."""

    def predict(self, x, batch_size=None, verbose="auto", steps=None, callbacks=None):
        batches = _batches(x, batch_size, steps)
        if keras.backend.backend() == "tensorflow" and steps is None and _arrays(x):
            self._upcoming_batches = batches
            if getattr(self.make_predict_function(), "eager", False):
                return self._predict_arrays(x, batch_size or 32, batches, verbose, callbacks)
        self._upcoming_batches = batches  # again: `make_predict_function` takes it, and Keras' predict asks once more
        return super().predict(x, batch_size=batch_size, verbose=verbose, steps=steps, callbacks=callbacks)

    def _predict_arrays(self, x, batch_size: int, batches: int, verbose, callbacks):
        """Keras' `predict` loop (callbacks, progress bar, `stop_predicting`, outputs concatenated as NumPy) over
        batches sliced from in-memory arrays, each given to the eager step as Keras' pipeline would give it."""
        if not isinstance(callbacks, keras.callbacks.CallbackList):
            callbacks = keras.callbacks.CallbackList(
                callbacks, add_progbar=verbose != 0, verbose=verbose, epochs=1, steps=batches, model=self
            )
        floatx = keras.config.floatx()

        def batch_of(array, step):
            part = array[step * batch_size : (step + 1) * batch_size]
            return part.astype(floatx) if part.dtype.kind == "f" and part.dtype != floatx else part

        self.stop_predicting = False
        callbacks.on_predict_begin()
        outputs = []
        for step in range(batches):
            callbacks.on_predict_batch_begin(step)
            batch_outputs = self.predict_function([(keras.tree.map_structure(lambda a: batch_of(a, step), x),)])
            outputs.append(batch_outputs)
            callbacks.on_predict_batch_end(step, {"outputs": batch_outputs})
            if self.stop_predicting:
                break
        callbacks.on_predict_end()
        return keras.tree.map_structure(
            lambda *parts: np.concatenate([keras.ops.convert_to_numpy(part) for part in parts]), *outputs
        )

    def predict_on_batch(self, x):
        self._upcoming_batches = 1
        return super().predict_on_batch(x)

    def make_predict_function(self, force: bool = False):
        backend = keras.backend.backend()
        if backend == "tensorflow":
            return self._tensorflow_predict_function(force)
        if backend == "jax":
            return self._jax_predict_function(force)
        return super().make_predict_function(force)

    def _tensorflow_predict_function(self, force: bool):
        import tensorflow as tf

        batches, self._upcoming_batches = getattr(self, "_upcoming_batches", None), None
        spent = getattr(self, "_eager_predict_batches", 0)
        current = getattr(self, "predict_function", None)
        eager = (
            batches is not None
            and spent + batches <= EAGER_PREDICT_BATCHES
            and not getattr(current, "traced", False)
            and not self.run_eagerly
            and self.jit_compile is not True
            and self.steps_per_execution == 1
            and self.distribute_strategy is tf.distribute.get_strategy()
            and not tf.distribute.has_strategy()
        )
        if eager:
            self._eager_predict_batches = spent + batches
            if force or not getattr(current, "eager", False):
                self.run_eagerly = True  # Keras' own function, made without `tf.function`
                try:
                    made = super().make_predict_function(force=True) or self.predict_function
                finally:
                    self.run_eagerly = False
                made.eager = True
                self.predict_function = made
            return self.predict_function
        made = super().make_predict_function(force=force or getattr(current, "eager", False))
        made = made or self.predict_function
        if not self.run_eagerly:
            made.traced = True  # the trace is paid (or will be on its first call): no going back to eager
        return made

    def _jax_predict_function(self, force: bool):
        self._upcoming_batches = None
        if getattr(self, "predict_function", None) is not None and not force:
            return self.predict_function
        make = getattr(self, "_make_function", None)
        if make is None or self.run_eagerly or not self.jit_compile or keras.distribution.distribution() is not None:
            return super().make_predict_function(force)
        from keras_vit.utils.xla_options import tuned_jit

        # Keras' JAX step hands the state back; here the weights are the compiled program's arguments but not its
        # results (a program that returns them donates and re-creates all of them, and its first run faults their
        # pages in again). Non-trainable values (a hybrid's batch statistics) still come back from it.
        forward = tuned_jit(self.predict_step)

        def predict_step(state, data):
            outputs, non_trainable_variables = forward(state, data)
            return outputs, (state[0], non_trainable_variables)

        self.predict_function = make(predict_step, concatenate_outputs=True)
        return self.predict_function


def _arrays(x) -> bool:
    """Whether `x` is numeric NumPy arrays only (one, or a list, tuple or dict of them) with one shared, non-zero
    length. Strings and objects are left to Keras' pipeline, which converts them."""
    leaves = keras.tree.flatten(x)
    if not leaves or not all(
        isinstance(leaf, np.ndarray) and leaf.ndim and leaf.dtype.kind in "biuf" for leaf in leaves
    ):
        return False
    return len({leaf.shape[0] for leaf in leaves}) == 1 and leaves[0].shape[0] > 0


def _batches(x, batch_size, steps):
    """How many batches `predict(x, batch_size, steps)` runs, or None where that is not known before it runs
    (datasets, generators, `PyDataset`)."""
    if steps is not None:
        return int(steps)
    first = x
    while isinstance(first, (list, tuple)) and first:
        first = first[0]
    if isinstance(first, dict) and first:
        first = next(iter(first.values()))
    shape = getattr(first, "shape", None)
    if not shape or shape[0] is None:
        return None
    return max(1, math.ceil(int(shape[0]) / (batch_size or 32)))
