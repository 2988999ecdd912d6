"""`jax.jit` without XLA's YNNPACK fusions on CPU, for the one-shot prediction and the training step.

On CPU, XLA hands matrix products and their neighbours to YNNPACK ("YNN fusions"). Measured for ViTs on 2 cores
(docs/benchmarks-history.md, "Cold start" and "Each backend at its own limit"), without them (`WITHOUT_YNN`):
- a program's first run skips YNNPACK building its runtime;
- steady forward passes are faster at batch 16 but slower at batch 1;
- the recipes' JAX training step is faster.
So the prediction CLI's program (run once), `predict`'s step (`keras_vit.vit.predict_function`: its first call is
what a user waits for, and its default batch is 32) and the JAX training step (large batches) compile without
them; eager `model(x)` keeps XLA's defaults, which serve repeated single-image calls best.

An XLA that does not know the option refuses it when compiling ("No such compile option"); the function then
compiles with the defaults (before anything runs, so donated buffers are untouched). Any other error is raised.
"""

from __future__ import annotations

from typing import Callable

# XLA debug options, given per program (not through the process-wide XLA_FLAGS)
WITHOUT_YNN = {"xla_cpu_experimental_ynn_fusion_type": ""}


def jit_without_ynn(function: Callable, **jit_keywords) -> Callable:
    """`jax.jit(function, **jit_keywords)`, compiled with `WITHOUT_YNN` on the CPU backend (with the defaults
    elsewhere, or where this XLA has no such option)."""
    import jax

    plain = jax.jit(function, **jit_keywords)
    if jax.default_backend() != "cpu":
        return plain
    tuned = jax.jit(function, compiler_options=WITHOUT_YNN, **jit_keywords)
    known = [True]

    def call(*args, **kwargs):
        if known[0]:
            try:
                return tuned(*args, **kwargs)
            except jax.errors.JaxRuntimeError as error:
                if "No such compile option" not in str(error):
                    raise
                known[0] = False
        return plain(*args, **kwargs)

    return call
