"""Cold start: from `python` to the first prediction of a ViT-B/16 on one 224 px image, loading a timm
`.safetensors` file, for timm and for keras_vit on each backend. A fresh process per row, rows interleaved over
`--rounds`; each row prints import, build + load and first-call seconds, and the median of the three calls
after the first ("next call": steady latency).

    .venv/bin/python bench/cold_start.py --rounds 3 [--torch-python /path/to/python-with-torch-and-timm]

Rows: timm (eager, `torch.no_grad`); keras_vit on each backend with `model.predict` and with the call
`python -m keras_vit.predict` makes ("CLI call": `keras_vit.analysis.predict._outputs`, a direct call
on TensorFlow, one jitted stateless call on JAX, `predict` on PyTorch); on JAX also a direct call `model(x)`. JAX rows run with
the persistent compilation cache `import keras_vit` turns on by default, in a directory a previous process
filled ("warm cache", what a user's second run gets), in one emptied before each run ("empty cache") and
turned off (`KERAS_VIT_COMPILATION_CACHE=0`, "no cache"); with `--random-init`, rows that build the model with random initial values before loading (what
keras_vit did before it skipped them). The checkpoint is a randomly initialised timm `vit_base_patch16_224`
written once with torch (`--torch-python`); the PyTorch-backend rows run in that Python too, when it has Keras.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STUB = os.path.join(ROOT, "tools", "torchvision_stub")

_MAKE = """
import sys; sys.path.insert(0, {stub!r})
import timm, torch
from safetensors.torch import save_file
model = timm.create_model("vit_base_patch16_224", pretrained=False)
save_file({{k: v.contiguous() for k, v in model.state_dict().items()}}, {path!r})
"""

_NEXT = """
def _next(call, n=3):  # the median of the calls after the first (steady latency)
    times = []
    for _ in range(n):
        t = time.perf_counter(); call(); times.append(time.perf_counter() - t)
    return sorted(times)[n // 2]
"""

_TIMM = """
import time; t0 = time.perf_counter()
{next}import sys; sys.path.insert(0, {stub!r})
import numpy as np, torch, timm
t1 = time.perf_counter()
model = timm.create_model("vit_base_patch16_224", pretrained=True,
                          pretrained_cfg_overlay=dict(file={path!r})).eval()
t2 = time.perf_counter()
def call():
    with torch.no_grad():
        model(torch.from_numpy(np.zeros((1, 3, 224, 224), "float32"))).numpy()
call()
t3 = time.perf_counter()
print({{"import": t1 - t0, "build_load": t2 - t1, "first_call": t3 - t2, "next_call": _next(call)}})
"""

_KERAS = """
import time; t0 = time.perf_counter()
{next}import contextlib, os, sys; sys.path.insert(0, {root!r})
import numpy as np, keras_vit
t1 = time.perf_counter()
if {random_init}:  # what load_model did before: random initial values, then the checkpoint's
    import keras_vit.weights.load as load
    load.weights_follow = lambda *a, **k: contextlib.nullcontext()
model = keras_vit.load_model({path!r})
t2 = time.perf_counter()
x = np.zeros((1, 224, 224, 3), "float32")
def call():
    if {call!r} == "predict":
        model.predict(x, verbose=0)
    elif {call!r} == "classify":
        from keras_vit.analysis.predict import _outputs
        _outputs(model, x)
    else:
        np.asarray(model(x))
call()
t3 = time.perf_counter()
print({{"import": t1 - t0, "build_load": t2 - t1, "first_call": t3 - t2, "next_call": _next(call)}})
"""


def _rows(path: str, torch_python: str, cache: str, random_init: bool) -> dict:
    """{row: (command, environment, directory emptied before each run or None)}."""
    rows = {"timm": ([torch_python, "-c", _TIMM.format(stub=STUB, path=path, next=_NEXT)], {}, None)}
    empty, warm = os.path.join(cache, "empty"), os.path.join(cache, "warm")
    torch_keras = (
        subprocess.run(
            [torch_python, "-c", "import keras"], capture_output=True, env=dict(os.environ, KERAS_BACKEND="torch")
        ).returncode
        == 0
    )
    off = {"KERAS_VIT_COMPILATION_CACHE": "0"}
    for backend in ("tensorflow", "jax", "torch"):
        cases = [("predict", "predict", False, {}, None), ("CLI call", "classify", False, {}, None)]
        if backend == "jax":  # the default cache: kept warm, emptied before each run, turned off
            at = {"warm": {"KERAS_VIT_CACHE_DIR": warm}, "empty": {"KERAS_VIT_CACHE_DIR": empty}}
            cases = [
                ("predict, warm cache", "predict", False, at["warm"], None),
                ("predict, empty cache", "predict", False, at["empty"], empty),
                ("predict, no cache", "predict", False, off, None),
                ("CLI call, warm cache", "classify", False, at["warm"], None),
                ("CLI call, empty cache", "classify", False, at["empty"], empty),
                ("model(x), warm cache", "call", False, at["warm"], None),
            ]
        if random_init:
            cases.append(("predict, random init", "predict", True, off, None))
        if backend == "torch" and not torch_keras:
            print(f"no PyTorch-backend rows: {torch_python} has no Keras", file=sys.stderr)
            continue
        python = torch_python if backend == "torch" else sys.executable
        for label, call, random, env, emptied in cases:
            code = _KERAS.format(root=ROOT, path=path, call=call, random_init=random, next=_NEXT)
            rows[f"keras_vit {backend} {label}"] = ([python, "-c", code], {"KERAS_BACKEND": backend, **env}, emptied)
    return rows


def _run(command, env) -> dict:
    done = subprocess.run(
        command, capture_output=True, text=True, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", **env), timeout=600
    )
    if done.returncode:
        raise RuntimeError(done.stderr[-2000:])
    return eval(done.stdout.strip().splitlines()[-1])  # noqa: S307 (our own child's dict literal)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--torch-python", default=os.environ.get("KERAS_VIT_TORCH_PYTHON", sys.executable))
    parser.add_argument("--file", default="/tmp/keras_vit_bench/vit_base_patch16_224.safetensors")
    parser.add_argument("--random-init", action="store_true", help="add the rows that build with random values")
    args = parser.parse_args()
    sys.path.insert(0, ROOT)
    from bench.machine import describe, header

    machine = describe()
    print(header(machine), flush=True)
    if not os.path.exists(args.file):
        os.makedirs(os.path.dirname(args.file), exist_ok=True)
        subprocess.run([args.torch_python, "-c", _MAKE.format(stub=STUB, path=args.file)], check=True)
    with tempfile.TemporaryDirectory() as cache:
        rows = _rows(args.file, args.torch_python, cache, args.random_init)
        for name in ("predict", "CLI call", "model(x)"):  # fills the warm cache (not counted)
            _run(*rows[f"keras_vit jax {name}, warm cache"][:2])
        results = {name: [] for name in rows}
        for _ in range(args.rounds):  # interleaved: each round runs every row once, in a fresh process
            for name, (command, env, emptied) in rows.items():
                if emptied:
                    shutil.rmtree(emptied, ignore_errors=True)
                results[name].append(_run(command, env))
    timm_after = statistics.median(r["build_load"] + r["first_call"] for r in results["timm"])
    print(
        f"{'row':52s} {'import':>7s} {'build+load':>10s} {'first call':>10s} {'total':>6s} {'after import':>12s}"
        f" {'vs timm':>7s} {'next call':>9s}"
    )
    for name, runs in results.items():
        med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        after = statistics.median(r["build_load"] + r["first_call"] for r in runs)
        total = statistics.median(r["import"] + r["build_load"] + r["first_call"] for r in runs)
        print(
            f"{name:52s} {med['import']:7.2f} {med['build_load']:10.2f} {med['first_call']:10.2f} {total:6.2f} "
            f"{after:12.2f} {after / timm_after:6.2f}x {med['next_call']:9.2f}"
        )
    print(json.dumps({"machine": machine, **{name: runs for name, runs in results.items()}}))


if __name__ == "__main__":
    main()
