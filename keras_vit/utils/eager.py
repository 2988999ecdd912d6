"""Whether the backend runs ops one at a time: TensorFlow's eager mode.

There each op is dispatched from Python, so the number of ops and their kind show in the latency of a model
call; inside `tf.function` TensorFlow's graph optimiser fuses them instead. The tanh GELU writes its eager
computation with fewer and cheaper ops and keeps Keras' form in graphs, which TensorFlow's optimiser and the
exporters' converters know (docs/benchmarks-history.md, "Cold start").
"""

from __future__ import annotations

import sys

import keras


def tensorflow_eager() -> bool:
    """True on the TensorFlow backend outside any `tf.function` or Keras trace (TensorFlow is already imported
    there: it is the backend)."""
    return keras.backend.backend() == "tensorflow" and sys.modules["tensorflow"].executing_eagerly()
