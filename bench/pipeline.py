"""Input-pipeline rate of the recipes (recipes.data) vs the training step's rate.

    .venv/bin/python bench/pipeline.py --image_sizes 224,384 --model ViT-S/16 --batch 16

The pipeline is the training one (inception crop, flip, resize, [-1, 1], parallel map,
prefetch) on the bundled MNIST digits, resized up to the target size; it must deliver at
least 3x the images/s the model trains at, so the accelerator never waits for data.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def pipeline_rate(size: int, batch: int, batches: int) -> float:
    from recipes import data

    ds = data.make_dataset(data.load_source("mnist5k", "train"), batch, size, training=True)
    it = iter(ds)
    for _ in range(3):
        next(it)
    t = time.perf_counter()
    for _ in range(batches):
        next(it)[0].numpy()
    return batches * batch / (time.perf_counter() - t)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--image_sizes", default="224,384")
    p.add_argument("--model", default="ViT-S/16")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--batches", type=int, default=30)
    p.add_argument("--iters", type=int, default=3)
    args = p.parse_args(argv)
    from bench.machine import header

    print(header(), flush=True)
    from bench.throughput import keras_tf

    print(f"{'px':>4} {'pipeline img/s':>15} {'train img/s':>12} {'ratio':>7}")
    for size in map(int, args.image_sizes.split(",")):
        pipe = pipeline_rate(size, args.batch, args.batches)
        train, _ = keras_tf(args.model, size, args.batch, "train", "fp32", True, args.iters, 1)
        print(f"{size:>4} {pipe:>15.1f} {train:>12.2f} {pipe / train:>6.1f}x", flush=True)


if __name__ == "__main__":
    main()
