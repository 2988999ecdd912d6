"""Whether the TensorFlow engine compiles its training step with XLA: `config.jit_compile`.

True or False is the user's choice and is kept. None, the default, chooses:
- XLA everywhere, except in the next case. On every CPU measured, XLA runs a ViT's float32 step faster than
  TensorFlow's own kernels: it fuses the element-wise work around the matrix products. On accelerators XLA is
  TensorFlow's compiler.
- Without XLA for bfloat16 mixed precision on a CPU-only machine whose CPU multiplies bf16 natively (AVX512-BF16 or
  AMX-BF16). There TensorFlow's oneDNN kernels run the products in bf16. XLA's CPU backend gains nothing from bf16
  at a ViT's shapes: its bf16 step is slower than its float32 one on both kinds measured. ViT-S/16, batch 16, on 2
  cores of an AMD EPYC with AVX512-BF16: 14.4 img/s without XLA, 10.7 with it, 10.9 for XLA's float32 step
  (docs/benchmarks-history.md, "AMD EPYC with AVX-512"; the Intel kind's XLA rows in "bf16 mixed precision on the
  Intel kind's AMX").
- A CPU without those instructions keeps XLA in bf16 too: oneDNN would emulate bf16 there, and that was not
  measured.

Multi-replica strategies turn XLA off regardless (`recipes.trainer.tf_step`).
"""

from __future__ import annotations

from typing import FrozenSet, Optional, Sequence, Tuple

BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})  # /proc/cpuinfo's names for native bf16 dot products


def cpu_flags(cpuinfo: str = "/proc/cpuinfo") -> FrozenSet[str]:
    """The first processor's instruction-set flags; empty where the file cannot be read (not Linux)."""
    try:
        with open(cpuinfo) as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "flags":
                    return frozenset(value.split())
    except OSError:
        pass
    return frozenset()


def use_xla(
    jit_compile: Optional[bool], precision: str, device_types: Sequence[str], flags: FrozenSet[str]
) -> Tuple[bool, str]:
    """(compile with XLA?, why) for `config.jit_compile`, `config.precision`, the logical devices' types
    ("CPU", "GPU", "TPU") and the CPU's flags."""
    if jit_compile is not None:
        return bool(jit_compile), f"config.jit_compile={bool(jit_compile)}"
    if precision == "bfloat16" and set(device_types) <= {"CPU"} and flags & BF16_FLAGS:
        native = ", ".join(sorted(flags & BF16_FLAGS))
        return False, (
            f"bfloat16 on a CPU with {native}: TensorFlow's oneDNN kernels multiply in bf16, XLA's CPU backend "
            "does not (--config.jit_compile=True keeps XLA)"
        )
    return True, "XLA (--config.jit_compile=False runs TensorFlow's own kernels)"
