"""`keras_vit.utils.xla_cpu.jit_without_ynn`: the same values as `jax.jit`, compiled without XLA's YNNPACK
fusions on CPU, and compiled with the defaults where XLA does not know the option (any other error is
raised). Run in a JAX subprocess."""

from conftest import run_on_backend

_SCRIPT = """
import json
import numpy as np
import jax, jax.numpy as jnp
from keras_vit.utils import xla_cpu

def f(a, b):
    return jnp.tanh(a @ b) @ b.T

rng = np.random.default_rng(0)
a, b = rng.normal(size=(64, 256)).astype("float32"), rng.normal(size=(256, 128)).astype("float32") / 16
want = np.tanh(a.astype("float64") @ b) @ b.T.astype("float64")
tuned = xla_cpu.jit_without_ynn(f)
error = float(np.abs(np.asarray(tuned(a, b)) - want).max())
plain_text = jax.jit(f).lower(a, b).compile().as_text()
tuned_text = jax.jit(f).lower(a, b).compile(compiler_options=xla_cpu.WITHOUT_YNN).as_text()

xla_cpu.WITHOUT_YNN = {"xla_no_such_option_in_any_xla": ""}  # an XLA that lacks the option
fallback = xla_cpu.jit_without_ynn(f)
fallback_error = float(np.abs(np.asarray(fallback(a, b)) - want).max())

def broken(a):
    raise jax.errors.JaxRuntimeError("INTERNAL: something else")

xla_cpu.WITHOUT_YNN = {}
try:
    xla_cpu.jit_without_ynn(broken)(a)
    other = "no error"
except jax.errors.JaxRuntimeError as e:
    other = str(e)
print(json.dumps(dict(error=error, fallback_error=fallback_error, other=other, cpu=jax.default_backend() == "cpu",
                      plain_ynn="ynn_fusion" in plain_text, tuned_ynn="ynn_fusion" in tuned_text)))
"""


def test_values_equal_float64_numpy_with_and_without_the_option_and_other_errors_are_raised():
    got = run_on_backend(_SCRIPT, "jax")
    assert got["error"] <= 1e-4 and got["fallback_error"] <= 1e-4, got
    assert got["other"] == "INTERNAL: something else", got
    assert got["cpu"] and not got["tuned_ynn"], got  # the option takes the YNNPACK fusions out
