"""`jax.jit` with XLA options chosen per platform, for the one-shot prediction, `predict`'s step and the training
step: what was measured faster for ViTs than XLA's defaults.

- CPU (`WITHOUT_YNN`): XLA hands matrix products and their neighbours to YNNPACK ("YNN fusions"). Measured on 2
  cores (docs/benchmarks-history.md, "Cold start" and "Each backend at its own limit"), without them a program's
  first run skips YNNPACK building its runtime, steady forward passes are faster at batch 16 but slower at batch 1,
  and the recipes' JAX training step is faster. So the prediction CLI's program (run once), `predict`'s step
  (`keras_vit.vit.predict_function`: its first call is what a user waits for, and its default batch is 32) and
  the JAX training step (large batches) compile without them; eager `model(x)` keeps XLA's defaults, which serve
  repeated single-image calls best.
- GPU (`WITHOUT_TRITON_GEMM`): XLA's GPU compiler writes some matrix products (those fused with their neighbours)
  as its own Triton kernels; without them every product is a cuBLAS call. Measured on one H200 (ViT-B/16,
  bfloat16; docs/benchmarks-history.md, "GPU: XLA's Triton matrix products"): training 1.06-1.07x faster,
  inference 1.11-1.14x.
- Other platforms (TPU): XLA's defaults.

The options are given per program (not through the process-wide XLA_FLAGS, which would reach the user's own
programs). An XLA that does not know an option refuses it when compiling ("No such compile option"); the
function then compiles with the defaults (before anything runs, so donated buffers are untouched). Any other error
is raised.
"""

from __future__ import annotations

from typing import Callable, Optional

WITHOUT_YNN = {"xla_cpu_experimental_ynn_fusion_type": ""}
WITHOUT_TRITON_GEMM = {"xla_gpu_enable_triton_gemm": False}


def options(platform: str) -> Optional[dict]:
    """The compile options `tuned_jit` gives programs on `platform` (`jax.default_backend()`), or None."""
    return {"cpu": WITHOUT_YNN, "gpu": WITHOUT_TRITON_GEMM}.get(platform)


def tuned_jit(function: Callable, **jit_keywords) -> Callable:
    """`jax.jit(function, **jit_keywords)`, compiled with `options(jax.default_backend())` (with the defaults
    where there are none, or where this XLA has no such option)."""
    import jax

    plain = jax.jit(function, **jit_keywords)
    chosen = options(jax.default_backend())
    if not chosen:
        return plain
    tuned = jax.jit(function, compiler_options=chosen, **jit_keywords)
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
