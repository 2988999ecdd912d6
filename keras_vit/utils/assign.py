"""A numpy array into a Keras variable, with fewer copies on TensorFlow when the array is the caller's to give.

`keras.Variable.assign` on TensorFlow converts the array to a tensor that Python holds, then copies that
tensor into the variable: two copies. Given the array itself, TensorFlow's `AssignVariableOp` converts it
inside the op with no tensor held in between, and the variable takes the converted buffer; where the array
is 64-byte aligned the conversion shares the array's memory, so the variable then keeps the array's memory.
That is right only for an array nobody uses afterwards (a loader's arrays, just read from a file): the caller
says so with `adopt=True`. A ViT-B/16's 86 M weights went in in 0.13–0.17 s instead of 0.22–0.24 s on 2 cores
(BENCHMARKS.md, "Cold start"). Without `adopt`, and on other backends, under a `tf.distribute` strategy or
inside a trace, Keras' own `assign` runs. On JAX that can share a 64-byte-aligned array's memory too (a CPU
`device_put` does not copy such arrays), so there an array not adopted is copied first: without `adopt` the
variable never shares memory with the array, on any backend.
"""

from __future__ import annotations

import keras
import numpy as np


def assign_array(variable: keras.Variable, array: np.ndarray, *, adopt: bool = False) -> None:
    """`variable.assign(array)`, refusing an array of another shape (nothing changed).

    Args:
      variable: the Keras variable.
      array: its new value, the variable's shape.
      adopt: the array is used by nothing else afterwards: on TensorFlow the variable may keep its memory.
    """
    if tuple(array.shape) != tuple(variable.shape):
        raise ValueError(f"{variable.path}: array of shape {array.shape}, variable of shape {tuple(variable.shape)}.")
    if adopt and keras.backend.backend() == "tensorflow" and array.dtype == np.dtype(
            keras.backend.standardize_dtype(variable.dtype)):
        import tensorflow as tf
        from tensorflow.python.ops.resource_variable_ops import ResourceVariable

        value = variable.value
        if tf.executing_eagerly() and type(value) is ResourceVariable:  # not a strategy's distributed variable
            tf.raw_ops.AssignVariableOp(resource=value.handle, value=array, validate_shape=True)
            return
    if not adopt and keras.backend.backend() == "jax":
        array = np.array(array, copy=True)
    variable.assign(array)
