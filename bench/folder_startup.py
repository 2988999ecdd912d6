"""Start-up of a recipes run on an image folder, to its first training step: first start and resume, with
peak memory, for folders of N synthetic JPEGs (fresh process per row).

    .venv/bin/python bench/folder_startup.py --files 2000,10000,100000 [--code /path/to/other/checkout]

Each folder holds N 64x64 JPEGs of noise in 10 class folders (made once under --data, reused). A row runs
`recipes.train` in a new process on a tiny model: "first" in an empty workdir for one step, "resume" in
the same workdir for one more step. Start-up is the time from the trainer's call to the end of its first
step (the model's build and one step are the same in every row; what grows with N is the folder's share);
peak memory is the process's maximum resident set. `--code` runs the rows with another checkout's
`recipes` (e.g. the commit before the decode check was kept in the workdir) for a before/after table.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CHILD = r"""
import json, os, resource, sys, time
import keras
from recipes import train
from recipes.configs import demo

class First(keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        if not hasattr(self, "at"):
            self.at = time.perf_counter()

root, workdir, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
c = demo.get_config("pretrain")
c.model.update(hidden_size=32, mlp_dim=64, num_layers=1, num_heads=2, patch_size=8)
c.update(batch_size=32, total_steps=steps, log_every=1, checkpoint_every=1)
c.dataset.update(name=f"folder:{root}", num_classes=0, train_split="train", eval_split="", image_size=32)
first = First()
start = time.perf_counter()
train.train_and_evaluate(c, workdir, callbacks=[first])
print(json.dumps(dict(startup=first.at - start, peak_mib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)))
"""


def make_folder(root: str, files: int, classes: int = 10) -> None:
    """`files` 64x64 noise JPEGs in `classes` class folders (skipped when `root` is already complete)."""
    import numpy as np
    from PIL import Image

    marker = os.path.join(root, ".complete")
    if os.path.exists(marker):
        return
    rng = np.random.default_rng(0)
    tiles = [Image.fromarray(rng.integers(0, 256, (64, 64, 3), dtype=np.uint8)) for _ in range(16)]
    encoded = []
    for tile in tiles:
        path = os.path.join(tempfile.gettempdir(), "tile.jpg")
        tile.save(path, quality=90)
        with open(path, "rb") as f:
            encoded.append(f.read())
    for c in range(classes):
        os.makedirs(os.path.join(root, f"class_{c:02d}"), exist_ok=True)
    for i in range(files):
        with open(os.path.join(root, f"class_{i % classes:02d}", f"{i:07d}.jpg"), "wb") as f:
            f.write(encoded[i % len(encoded)])
    open(marker, "w").close()


def run(code: str, root: str, workdir: str, steps: int) -> dict:
    env = dict(os.environ, PYTHONPATH=code, KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="2")
    out = subprocess.run(
        [sys.executable, "-c", CHILD, root, workdir, str(steps)], env=env, cwd=code, capture_output=True, text=True
    )
    if out.returncode:
        raise RuntimeError(out.stderr[-3000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--files", default="2000,10000,100000")
    p.add_argument("--data", default=os.path.join(tempfile.gettempdir(), "keras_vit_folder_bench"))
    p.add_argument("--code", default=ROOT, help="the checkout whose recipes run the rows")
    args = p.parse_args(argv)
    sys.path.insert(0, ROOT)
    from bench.machine import header

    print(header(), flush=True)
    print(f"{'files':>8} {'first start s':>14} {'resume s':>9} {'first MiB':>10} {'resume MiB':>11}", flush=True)
    for n in map(int, args.files.split(",")):
        root = os.path.join(args.data, f"jpeg_{n}")
        make_folder(root, n)
        with tempfile.TemporaryDirectory() as work:
            first = run(args.code, root, work, 1)
            resume = run(args.code, root, work, 2)
        print(
            f"{n:>8} {first['startup']:>14.2f} {resume['startup']:>9.2f} {first['peak_mib']:>10.0f} "
            f"{resume['peak_mib']:>11.0f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
