"""A numpy array into a Keras variable, with fewer copies on TensorFlow when the array is the caller's to give.

`keras.Variable.assign` on TensorFlow converts the array to a tensor that Python holds, then copies that
tensor into the variable: two copies. Given the array itself, TensorFlow's `AssignVariableOp` converts it
inside the op with no tensor held in between, and the variable takes the converted buffer; where the array
is 64-byte aligned the conversion shares the array's memory, so the variable then keeps the array's memory.
That is right only for an array nobody uses afterwards (a loader's arrays, just read from a file): the caller
says so with `adopt=True` (docs/benchmarks-history.md, "Cold start"). Without `adopt`, and on other backends, under a `tf.distribute` strategy or
inside a trace, Keras' own `assign` runs. On JAX that can share a 64-byte-aligned array's memory too (a CPU
`device_put` does not copy such arrays), so there an array not adopted is copied first: without `adopt` the
variable never shares memory with the array, on any backend.

The same holds when a variable is made. `tf.Variable` fills its initial zeros (`Fill`, every page written),
then copies them into the variable (the filled tensor is still held), only for a loader to replace them: for
a ViT-B/16 that is 2 x 344 MB written for nothing. Within `variables_adopt_fresh_zeros()`, a variable whose
initial value is `fresh_zeros(...)` (a `numpy.zeros` block nobody else holds: the operating system hands out
its pages zeroed, and only when they are touched) is made without an initial value and then given that
block, which it keeps. It reads as zeros, like any other; the loader's arrays replace the block untouched.
"""

from __future__ import annotations

import contextlib
from typing import Iterator, Optional

import keras
import numpy as np


def aligned_empty(shape: tuple, dtype) -> np.ndarray:
    """`np.empty(shape, dtype)` starting on a 64-byte boundary: TensorFlow takes such an array's memory into a
    variable without a copy when a loader gives it away (`assign_array(..., adopt=True)`)."""
    return _aligned(np.empty, shape, dtype)


def _aligned(allocate, shape: tuple, dtype) -> np.ndarray:
    dtype = np.dtype(dtype)
    size = int(np.prod(shape)) * dtype.itemsize
    raw = allocate(size + 64, np.uint8)
    start = (-raw.ctypes.data) % 64
    return raw[start : start + size].view(dtype).reshape(shape)


class FreshZeros(np.ndarray):
    """The type of `fresh_zeros`' arrays: zeros made for one new variable, which may keep their memory."""


def fresh_zeros(shape: tuple, dtype: str) -> Optional[np.ndarray]:
    """64-byte-aligned zeros of `shape` for one new variable (see the module docstring), or None for a dtype
    numpy cannot name (bfloat16 before `ml_dtypes` is loaded): the caller then makes its zeros as before."""
    try:
        numpy_dtype = np.dtype(dtype)
    except TypeError:
        return None
    return _aligned(np.zeros, shape, numpy_dtype).view(FreshZeros)


@contextlib.contextmanager
def variables_adopt_fresh_zeros() -> Iterator[None]:
    """Within it, on TensorFlow, eagerly and outside any `tf.distribute` strategy, a variable whose initial value
    is `fresh_zeros(...)` keeps that memory instead of a filled and copied tensor. Elsewhere, and for any other
    initial value, variables are made as usual."""
    if keras.backend.backend() != "tensorflow":
        yield
        return
    import tensorflow as tf

    with tf.variable_creator_scope(_adopting_creator):
        yield


_PASSED_ON = ("name", "trainable", "aggregation", "synchronization", "caching_device", "constraint")


def _adopting_creator(next_creator, **kwargs):
    """A `tf.variable_creator_scope` creator: `FreshZeros` initial values are adopted, the rest passed on."""
    import tensorflow as tf
    from tensorflow.python.ops.resource_variable_ops import UninitializedVariable

    value = kwargs.get("initial_value")
    if not tf.executing_eagerly() or tf.distribute.has_strategy():
        return next_creator(**kwargs)
    if callable(value):
        with tf.init_scope():
            value = value()
    dtype = kwargs.get("dtype")
    if not isinstance(value, FreshZeros) or (dtype is not None and tf.as_dtype(dtype) != tf.as_dtype(value.dtype)):
        return next_creator(**dict(kwargs, initial_value=value))
    variable = UninitializedVariable(
        shape=value.shape,
        dtype=tf.as_dtype(value.dtype),
        **{k: kwargs[k] for k in _PASSED_ON if kwargs.get(k) is not None},
    )
    tf.raw_ops.AssignVariableOp(resource=variable.handle, value=value.view(np.ndarray), validate_shape=True)
    return variable


def assign_array(variable: keras.Variable, array: np.ndarray, *, adopt: bool = False) -> None:
    """`variable.assign(array)`, refusing an array of another shape (nothing changed).

    Args:
      variable: the Keras variable.
      array: its new value, the variable's shape.
      adopt: the array is used by nothing else afterwards: on TensorFlow the variable may keep its memory.
    """
    if tuple(array.shape) != tuple(variable.shape):
        raise ValueError(f"{variable.path}: array of shape {array.shape}, variable of shape {tuple(variable.shape)}.")
    if (
        adopt
        and keras.backend.backend() == "tensorflow"
        and array.dtype == np.dtype(keras.backend.standardize_dtype(variable.dtype))
    ):
        import tensorflow as tf
        from tensorflow.python.ops.resource_variable_ops import ResourceVariable, UninitializedVariable

        value = variable.value
        # a plain variable or one `variables_adopt_fresh_zeros` made; not a strategy's distributed variable
        if tf.executing_eagerly() and type(value) in (ResourceVariable, UninitializedVariable):
            tf.raw_ops.AssignVariableOp(resource=value.handle, value=array, validate_shape=True)
            return
    if not adopt and keras.backend.backend() == "jax":
        array = np.array(array, copy=True)
    variable.assign(array)
