"""bench/machine.py: every CPU benchmark records the machine it ran on (model, kind, kernel-picking flags)."""

import ast
import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, ROOT)
from bench import machine  # noqa: E402

NOT_CPU_BENCHMARKS = {"gpu.py", "timm_parity.py"}  # the GPU script records its device; parity is not a timing


@pytest.mark.parametrize(
    "model, vendor, kind",
    [
        ("AMD EPYC 7B13 64-Core Processor", "AuthenticAMD", "AMD EPYC"),
        ("Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz", "GenuineIntel", "Intel Xeon"),
        ("Intel(R) Xeon(R) Processor", "GenuineIntel", "Intel Xeon"),
        ("AMD Ryzen 9 7950X", "AuthenticAMD", "AMD"),
        ("Neoverse-V2", "ARM", "Neoverse-V2"),
    ],
)
def test_kind_from_the_model_name(model, vendor, kind):
    assert machine.kind(model, vendor) == kind


def test_describe_reads_this_machine_and_the_header_says_it():
    record = machine.describe()
    with open("/proc/cpuinfo") as f:
        flags = set(next(line for line in f if line.startswith("flags")).split(":", 1)[1].split())
    assert record["flags"] == [f for f in machine.FLAGS if f in flags]
    assert record["cores"] == os.cpu_count() and record["memory_gib"] > 0
    assert "keras" in record["packages"]
    line = machine.header(record)
    assert line.startswith("# machine: " + record["kind"]) and record["cpu"] in line
    done = subprocess.run(
        [sys.executable, os.path.join(ROOT, "bench", "machine.py")], capture_output=True, text=True, check=True
    )
    first, second = done.stdout.splitlines()
    assert first.startswith("# machine: ") and json.loads(second)["cpu"] == record["cpu"]


def test_every_cpu_benchmark_prints_the_machine_first():
    folder = os.path.join(ROOT, "bench")
    missing = []
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".py") or name in NOT_CPU_BENCHMARKS:
            continue
        tree = ast.parse(open(os.path.join(folder, name)).read())
        mains = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "main"]
        if mains and "bench.machine" not in ast.unparse(mains[0]):
            missing.append(name)
    assert missing == []
