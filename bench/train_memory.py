"""The recipes' training peak against `recipes.trainer.memory.estimate`: each row a fresh `recipes.train` process
(TensorFlow + XLA, a few steps on the bundled digits resized to the row's size), its resident peak (VmHWM) read
as it ends.

    .venv/bin/python bench/train_memory.py                      # the rows below
    .venv/bin/python bench/train_memory.py --rows vit_s16_224_b16

Prints one JSON line per row: the measured peak, the estimate and their ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# name: (config, flags)
ROWS = {
    "demo": ("demo:pretrain", ["--config.total_steps=20"]),
    "vit_s16_224_b16": (
        "pretrain:vit_b16_i1k",
        ["--config.model.name=ViT-S/16", "--config.batch_size=16", "--config.dataset.image_size=224"],
    ),
    "vit_s16_224_b16_nodrop": (
        "pretrain:vit_b16_i1k",
        [
            "--config.model.name=ViT-S/16",
            "--config.batch_size=16",
            "--config.dataset.image_size=224",
            "--config.model.dropout_rate=0.0",
        ],
    ),
    "vit_s16_224_b32_nodrop": (
        "pretrain:vit_b16_i1k",
        [
            "--config.model.name=ViT-S/16",
            "--config.batch_size=32",
            "--config.dataset.image_size=224",
            "--config.model.dropout_rate=0.0",
        ],
    ),
    "vit_b16_224_b8_sgd": (
        "finetune:cifar10",
        ["--config.batch_size=8", "--config.dataset.image_size=224"],
    ),
    "vit_b16_224_b16_sgd": (
        "finetune:cifar10",
        ["--config.batch_size=16", "--config.dataset.image_size=224"],
    ),
    "vit_b16_384_b4_sgd": (
        "finetune:cifar10",
        ["--config.batch_size=4", "--config.dataset.image_size=384"],
    ),
}

_CHILD = """
import json, runpy, sys
sys.argv = ["recipes.train"] + json.loads(sys.argv[1])
try:
    runpy.run_module("recipes.train", run_name="__main__")
finally:
    with open("/proc/self/status") as f:
        peak = next(int(line.split()[1]) for line in f if line.startswith("VmHWM:")) * 1e3
    print(json.dumps({"peak": peak}), file=sys.stderr)
"""


def _config(spec: str, flags: list):
    """The config `recipes.train` runs for `spec` and `--config.a.b=value` flags (values cast to the field's type)."""
    import importlib

    module, _, variant = spec.partition(":")
    config = importlib.import_module(f"recipes.configs.{module}").get_config(variant)
    for flag in flags:
        path, _, text = flag[len("--config.") :].partition("=")
        *parents, leaf = path.split(".")
        node = config
        for p in parents:
            node = node[p]
        old = node[leaf]
        node[leaf] = type(old)(text) if isinstance(old, (int, float)) and not isinstance(old, bool) else text
    return config


def run_row(name: str) -> dict:
    from recipes.trainer import memory

    config_name, flags = ROWS[name]
    with tempfile.TemporaryDirectory() as work:
        args = [
            f"--config={config_name}",
            f"--workdir={work}",
            "--config.dataset.name=mnist5k",
            "--config.dataset.num_classes=10",
            "--config.dataset.train_split=train",
            "--config.dataset.eval_split=",
            "--config.total_steps=3",
            "--config.log_every=1",
            "--config.checkpoint_every=1000",
            "--config.fewshot.every=0",
            "--config.init_weights=",
            *flags,
        ]
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=ROOT, CUDA_VISIBLE_DEVICES="")
        done = subprocess.run(
            [sys.executable, "-c", _CHILD, json.dumps(args)], cwd=ROOT, env=env, capture_output=True, text=True
        )
        if done.returncode != 0:
            raise SystemExit(f"{name}: {done.stderr[-3000:]}")
        peak = json.loads(done.stderr.strip().splitlines()[-1])["peak"]
    config = _config(config_name, args[2:])
    need, parts = memory.estimate(config, 10)
    return dict(
        row=name,
        peak_gb=round(peak / 1e9, 3),
        estimate_gb=round(need / 1e9, 3),
        ratio=round(need / peak, 3),
        parts_gb={k: round(v / 1e9, 3) for k, v in parts.items()},
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", default=",".join(ROWS), help="comma-separated: " + ", ".join(ROWS))
    rows = p.parse_args().rows.split(",")
    from bench.machine import header

    print(header(), flush=True)
    for name in rows:
        print(json.dumps(run_row(name)), flush=True)


if __name__ == "__main__":
    sys.path.insert(0, ROOT)
    main()
