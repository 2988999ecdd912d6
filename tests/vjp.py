"""Values and vector-Jacobian products on this process's backend, for the subprocess scripts that check the training
cores' custom gradients against each framework's own differentiation (`jax.vjp` or a `tf.GradientTape`)."""

import importlib

import keras
import numpy as np

backend = keras.backend.backend()
jax = importlib.import_module("jax") if backend == "jax" else None  # the framework the scripts use directly
tf = importlib.import_module("tensorflow") if backend == "tensorflow" else None


def grads(f, args, w):
    """(f(*args), the gradients of sum(w * f(*args)) with respect to each of `args`), all as float64 numpy."""
    if backend == "jax":
        y, vjp = jax.vjp(f, *args)
        return np.asarray(y, "float64"), [np.asarray(g, "float64") for g in vjp(w)]
    args = [tf.constant(a) for a in args]
    with tf.GradientTape() as tape:
        tape.watch(args)
        y = f(*args)
    return np.asarray(y, "float64"), [np.asarray(g, "float64") for g in tape.gradient(y, args, w)]
