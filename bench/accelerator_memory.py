"""The recipes' JAX training step on an accelerator: the device's peak against
`recipes.trainer.memory.estimate(..., accelerator=True)`, each row a fresh process (a device's high-water mark
is its process's).

    python bench/accelerator_memory.py --out accelerator_memory.json           # every row, five at a time
    python bench/accelerator_memory.py --rows vit_s16_224_b128_bf16 --jobs 1

A row builds what `recipes.train` builds on the JAX engine from the row's config and flags (`common.build`, the
`JaxEngine`, its Keras variables released as the run releases them), takes `--steps` steps on random images of
the row's size and reads the device's `peak_bytes_in_use`. Rows run side by side with XLA's preallocation off
(each process takes what it uses; the peak is the allocator's high-water mark, not its pool). The recipes'
modules import TensorFlow, which the JAX engine's step never calls: where it is not installed (an accelerator
machine with JAX alone), the child gives those imports empty stand-ins.

Prints one JSON line per row: measured peak, estimate, their ratio and the estimate's parts.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

# name: (config, flags); the CPU rows of bench/train_memory.py and the batches an accelerator trains at
ROWS = {
    "demo": ("demo:pretrain", []),
    "vit_s16_224_b16": (
        "pretrain:vit_b16_i1k",
        ["--config.model.name=ViT-S/16", "--config.batch_size=16", "--config.dataset.image_size=224"],
    ),
    "vit_s16_224_b128": (
        "pretrain:vit_b16_i1k",
        ["--config.model.name=ViT-S/16", "--config.batch_size=128", "--config.dataset.image_size=224"],
    ),
    "vit_s16_224_b128_bf16": (
        "pretrain:vit_b16_i1k",
        [
            "--config.model.name=ViT-S/16",
            "--config.batch_size=128",
            "--config.dataset.image_size=224",
            "--config.precision=bfloat16",
        ],
    ),
    "vit_s16_224_b256_nodrop_bf16": (
        "pretrain:vit_b16_i1k",
        [
            "--config.model.name=ViT-S/16",
            "--config.batch_size=256",
            "--config.dataset.image_size=224",
            "--config.model.dropout_rate=0.0",
            "--config.precision=bfloat16",
        ],
    ),
    "vit_b16_224_b16_sgd": ("finetune:cifar10", ["--config.batch_size=16", "--config.dataset.image_size=224"]),
    "vit_b16_224_b128_sgd": ("finetune:cifar10", ["--config.batch_size=128", "--config.dataset.image_size=224"]),
    "vit_b16_224_b128_sgd_bf16": (
        "finetune:cifar10",
        ["--config.batch_size=128", "--config.dataset.image_size=224", "--config.precision=bfloat16"],
    ),
    "vit_b16_384_b32_sgd_bf16": (
        "finetune:cifar10",
        ["--config.batch_size=32", "--config.dataset.image_size=384", "--config.precision=bfloat16"],
    ),
    "vit_b16_384_b128_sgd": ("finetune:cifar10", ["--config.batch_size=128", "--config.dataset.image_size=384"]),
    "vit_b16_224_b256_bf16": (
        "pretrain:vit_b16_i1k",
        ["--config.batch_size=256", "--config.dataset.image_size=224", "--config.precision=bfloat16"],
    ),
    "vit_l16_224_b64_bf16": (
        "pretrain:vit_b16_i1k",
        [
            "--config.model.name=ViT-L/16",
            "--config.batch_size=64",
            "--config.dataset.image_size=224",
            "--config.precision=bfloat16",
        ],
    ),
}


def row_config(name: str):
    """The ConfigDict `recipes.train` would run for row `name`: its config file and flags, parsed by ml_collections'
    `config_flags` as the command line is (on flag values of its own)."""
    from absl import flags
    from ml_collections import config_flags

    from recipes import configs

    spec, flag_args = ROWS[name]
    values = flags.FlagValues()
    argv, sys.argv = sys.argv, ["accelerator_memory", *flag_args]  # config_flags finds the overrides in sys.argv
    try:
        config_flags.DEFINE_config_file("config", configs.resolve(spec), flag_values=values)
        values(sys.argv)
    finally:
        sys.argv = argv
    return values.config


_CHILD = r"""
import contextlib, importlib.machinery, importlib.util, json, sys, types


class _Absent:  # whatever a module-level line of the recipes asks of TensorFlow, never called on this path
    def __getattr__(self, name):
        return self

    def __call__(self, *args, **kwargs):
        return self

    def __mro_entries__(self, bases):
        return (object,)


for name in ("tensorflow", "tensorflow_datasets"):
    try:
        there = importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        there = False
    if not there:
        stand_in = types.ModuleType(name)
        stand_in.__spec__ = importlib.machinery.ModuleSpec(name, None)
        stand_in.__getattr__ = lambda attribute: _Absent()
        sys.modules[name] = stand_in

import jax, numpy as np

from bench.accelerator_memory import row_config
from recipes.trainer import common, jax_step, memory

config, steps = row_config(sys.argv[1]), int(sys.argv[2])
classes = config.dataset.num_classes or 1000
model, net, loss_fn, optimizer, _ = common.build(config, contextlib.nullcontext(), classes, 1000)
engine = jax_step.JaxEngine.for_config(config, net, optimizer, None, classes, loss_fn)
engine.release_variables()
rng = np.random.default_rng(0)
size = config.dataset.image_size
images = rng.uniform(-1, 1, (config.batch_size, size, size, 3)).astype("float32")
labels = rng.integers(0, classes, config.batch_size)
for _ in range(steps):
    metrics = engine((images, labels))
    float(metrics["loss"])
device = jax.local_devices()[0]
stats = device.memory_stats() or {}
need, parts = memory.estimate(config, classes, accelerator=True)
print(json.dumps({
    "device": device.device_kind,
    "peak_gb": stats.get("peak_bytes_in_use", 0) / 1e9,
    "limit_gb": stats.get("bytes_limit", 0) / 1e9,
    "estimate_gb": need / 1e9,
    "parts_gb": {k: round(v / 1e9, 3) for k, v in parts.items()},
    "params": model.count_params(),
}))
"""


def row(name: str, steps: int) -> dict:
    env = dict(
        os.environ,
        KERAS_BACKEND="jax",
        XLA_PYTHON_CLIENT_PREALLOCATE="false",
        PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]),
    )
    done = subprocess.run([sys.executable, "-c", _CHILD, name, str(steps)], env=env, capture_output=True, text=True)
    if done.returncode:
        tail = done.stderr.strip().splitlines()[-3:] if done.stderr.strip() else [f"exit {done.returncode}"]
        return {"row": name, "error": " | ".join(tail)[:600]}
    out = json.loads(done.stdout.strip().splitlines()[-1])
    out.update(row=name, ratio=out["estimate_gb"] / out["peak_gb"] if out["peak_gb"] else None)
    return out


def main(argv=None) -> None:
    from bench.machine import describe, header

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", default=",".join(ROWS))
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--jobs", type=int, default=5, help="rows side by side (each a process on the one device)")
    p.add_argument("--out", default="")
    args = p.parse_args(argv)
    record = describe()
    print(header(record), flush=True)
    names = args.rows.split(",")
    unknown = [n for n in names if n not in ROWS]
    if unknown:
        raise SystemExit(f"unknown row(s) {unknown}; rows: {', '.join(ROWS)}")
    results = []
    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        for r in pool.map(lambda n: row(n, args.steps), names):
            print(json.dumps(r), flush=True)
            results.append(r)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"machine": record, "rows": results}, f, indent=1)


if __name__ == "__main__":
    main()
