"""Reads XLA's own buffer report (`XLA_FLAGS=--xla_dump_to=DIR`) for the memory tests' subprocess scripts."""

import glob
import os
import re

_UNITS = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}


def dump_compiled_programs(directory: str) -> None:
    """On TensorFlow, have XLA write its reports of every program it compiles to `directory`; call it before
    TensorFlow is imported (JAX's scripts read the compiled program's `memory_analysis` instead)."""
    if os.environ.get("KERAS_BACKEND") == "tensorflow":
        os.environ["XLA_FLAGS"] = "--xla_dump_to=" + directory


def preallocated_temp_bytes(directory: str, name: str) -> float:
    """The preallocated temporary buffer, in bytes, of the compiled function whose dump names contain `name`
    (0.0 when XLA allocated none)."""
    (report,) = glob.glob(os.path.join(directory, f"*{name}*memory-usage-report.txt"))
    match = re.search(r"size ([0-9.]+)(B|KiB|MiB|GiB), preallocated-temp", open(report).read())
    return float(match.group(1)) * _UNITS[match.group(2)] if match else 0.0
