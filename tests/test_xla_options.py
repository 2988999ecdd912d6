"""`keras_vit.utils.xla_options.tuned_jit`: the same values as `jax.jit`, compiled without XLA's YNNPACK
fusions on CPU, and compiled with the defaults where XLA does not know the option (any other error is raised);
the GPU option is one XLA knows by that name. Run in a JAX subprocess."""

from conftest import run_on_backend

_SCRIPT = """
import json
import numpy as np
import jax, jax.numpy as jnp
from keras_vit.utils import xla_options

def f(a, b):
    return jnp.tanh(a @ b) @ b.T

rng = np.random.default_rng(0)
a, b = rng.normal(size=(64, 256)).astype("float32"), rng.normal(size=(256, 128)).astype("float32") / 16
want = np.tanh(a.astype("float64") @ b) @ b.T.astype("float64")
tuned = xla_options.tuned_jit(f)
error = float(np.abs(np.asarray(tuned(a, b)) - want).max())
plain_text = jax.jit(f).lower(a, b).compile().as_text()
tuned_text = jax.jit(f).lower(a, b).compile(compiler_options=xla_options.WITHOUT_YNN).as_text()
# the GPU option is one of XLA's debug options (shared by its compilers: a misspelt one is refused here too)
try:
    jax.jit(f).lower(a, b).compile(compiler_options=xla_options.options("gpu"))
    gpu_option = "known"
except jax.errors.JaxRuntimeError as e:
    gpu_option = str(e)

xla_options.WITHOUT_YNN = {"xla_no_such_option_in_any_xla": ""}  # an XLA that lacks the option
fallback = xla_options.tuned_jit(f)
fallback_error = float(np.abs(np.asarray(fallback(a, b)) - want).max())

def broken(a):
    raise jax.errors.JaxRuntimeError("INTERNAL: something else")

xla_options.WITHOUT_YNN = {}
try:
    xla_options.tuned_jit(broken)(a)
    other = "no error"
except jax.errors.JaxRuntimeError as e:
    other = str(e)
print(json.dumps(dict(gpu_option=gpu_option, tpu=xla_options.options("tpu"), error=error, fallback_error=fallback_error, other=other, cpu=jax.default_backend() == "cpu",
                      plain_ynn="ynn_fusion" in plain_text, tuned_ynn="ynn_fusion" in tuned_text)))
"""


def test_values_equal_float64_numpy_with_and_without_the_option_and_other_errors_are_raised():
    got = run_on_backend(_SCRIPT, "jax")
    assert got["error"] <= 1e-4 and got["fallback_error"] <= 1e-4, got
    assert got["other"] == "INTERNAL: something else", got
    assert got["cpu"] and not got["tuned_ynn"], got  # the option takes the YNNPACK fusions out
    assert got["gpu_option"] == "known" and got["tpu"] is None, got
