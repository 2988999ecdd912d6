"""What a benchmark ran on: the CPU model and its kind, the instruction-set flags that change which kernels the
frameworks pick, cores, memory, the library versions and the date, recorded with each result.

The same script gives different ratios on different CPU kinds (on the AMD EPYC kind timm's fp32 path is slow;
on the Intel Xeon kind with AMX it is not), so a figure without its machine cannot be compared. Every CPU script in
`bench/` prints `header()` as its first line and puts `describe()` under "machine" in the JSON it prints.

    .venv/bin/python bench/machine.py        # the header, then the record as JSON
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import platform
import time

# the flags that decide the kernels: AVX2 / AVX-512 GEMMs, bf16 and int8 dot products, AMX tiles
FLAGS = ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8")
PACKAGES = ("keras", "tensorflow", "jax", "jaxlib", "torch", "timm", "numpy")


def _cpuinfo() -> dict:
    """{field: value} of the first processor in /proc/cpuinfo ({} where there is none)."""
    fields = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if not line.strip():
                    break
                key, _, value = line.partition(":")
                fields[key.strip()] = value.strip()
    except OSError:
        pass
    return fields


def kind(model: str, vendor: str = "") -> str:
    """ "Intel Xeon", "AMD EPYC", ... from the CPU's model name (and vendor id): the label BENCHMARKS.md's rows use."""
    text = f"{vendor} {model}".lower()
    for needle, label in (("epyc", "AMD EPYC"), ("xeon", "Intel Xeon"), ("amd", "AMD"), ("intel", "Intel")):
        if needle in text:
            return label
    return model or platform.machine()


def _memory_gib() -> float:
    try:
        with open("/proc/meminfo") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("MemTotal:")) / 2**20
    except (OSError, StopIteration):
        return float("nan")


def _version(package: str):
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def describe() -> dict:
    """The machine and software a result was measured on (no framework is imported)."""
    info = _cpuinfo()
    model = info.get("model name") or platform.processor() or platform.machine()
    present = set(info.get("flags", "").split())
    return {
        "cpu": model,
        "kind": kind(model, info.get("vendor_id", "")),
        "flags": [f for f in FLAGS if f in present],
        "cores": os.cpu_count(),
        "memory_gib": round(_memory_gib(), 1),
        "python": platform.python_version(),
        "packages": {p: v for p in PACKAGES if (v := _version(p))},
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
        "load": round(os.getloadavg()[0], 2),
    }


def header(record: dict | None = None) -> str:
    """One comment line for a results table: `# machine: Intel Xeon (Intel(R) Xeon(R) ...), 2 cores, ...`."""
    r = record or describe()
    packages = ", ".join(f"{k} {v}" for k, v in r["packages"].items())
    return (
        f"# machine: {r['kind']} ({r['cpu']}), {r['cores']} cores, {r['memory_gib']} GiB, "
        f"flags {' '.join(r['flags']) or 'none of ' + '/'.join(FLAGS[:3])}; {packages}; python {r['python']}; "
        f"{r['date']}, load {r['load']}"
    )


if __name__ == "__main__":
    record = describe()
    print(header(record))
    print(json.dumps(record))
