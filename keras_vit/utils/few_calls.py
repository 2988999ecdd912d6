"""`jax.jit` for a program that runs once or a few times, such as a command-line prediction.

On CPU, XLA hands matrix products and their neighbours to YNNPACK ("YNN fusions"). Each such program builds
its YNNPACK runtime on its first run: for a ViT-B/16 forward pass at batch 1 on 2 cores, the first run took
0.38–0.48 s against 0.20–0.27 s for the next ones. Compiled without YNN fusions (`FEW_CALLS`), the first run
took 0.25–0.41 s (0.25–0.26 s in two of three processes). The steady calls then differ both ways: 6–10 %
slower at batch 1, 6–11 % faster at batch 16 (ViT-S/16 and ViT-B/16; BENCHMARKS.md, "Cold start"). One image classified from the command line gains 0.15–0.2 s; a server that
calls the same program thousands of times should compile it with the defaults (plain `jax.jit`).

An XLA that does not know the option refuses it when compiling ("No such compile option"). The function
then compiles with the defaults; any other error is raised.
"""

from __future__ import annotations

from typing import Callable

# XLA debug options for programs that run a few times (see the module docstring)
FEW_CALLS = {"xla_cpu_experimental_ynn_fusion_type": ""}


def jit_for_few_calls(function: Callable) -> Callable:
    """`jax.jit(function)`, compiled with `FEW_CALLS` on the CPU backend (with the defaults elsewhere, or
    where this XLA has no such option)."""
    import jax

    plain = jax.jit(function)
    if jax.default_backend() != "cpu":
        return plain
    tuned = jax.jit(function, compiler_options=FEW_CALLS)
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
