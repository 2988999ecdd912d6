"""Few-shot solve time vs feature extraction time (the probe must be ~free next to extraction).

    .venv/bin/python bench/fewshot.py --classes 1000 --shots 25 --dim 1024 --model ViT-L/16

Solve: keras_vit.analysis.fewshot on random features (25,000 x 1,024 for 25 shots x 1,000 classes).
Extraction: a measured batch of the model at 224 px, scaled to the same 25,000 images.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def solve_seconds(classes: int, shots: int, dim: int, repeats: int = 3) -> float:
    from keras_vit.analysis import fewshot

    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(classes), shots)
    x = rng.normal(size=(len(y), dim)).astype("float32")
    xt, yt = rng.normal(size=(1000, dim)).astype("float32"), rng.integers(0, classes, 1000)
    times = []
    for seed in range(repeats):
        t = time.perf_counter()
        fewshot.linear_fewshot_accuracy(x, y, xt, yt, shots, seed)
        times.append(time.perf_counter() - t)
    return float(np.median(times))


def extraction_seconds(model_name: str, images: int, batch: int, size: int) -> float:
    import tensorflow as tf

    from keras_vit import create_model

    model = create_model(model_name, include_top=False, input_shape=(size, size, 3))
    x = tf.random.uniform((batch, size, size, 3), -1, 1)
    f = tf.function(lambda: model(x, training=False), jit_compile=True)
    f().numpy()
    t = time.perf_counter()
    f().numpy()
    return (time.perf_counter() - t) / batch * images


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--classes", type=int, default=1000)
    p.add_argument("--shots", type=int, default=25)
    p.add_argument("--dim", type=int, default=1024)
    p.add_argument("--model", default="ViT-L/16")
    p.add_argument("--image_size", type=int, default=224)
    p.add_argument("--batch", type=int, default=8)
    args = p.parse_args(argv)
    from bench.machine import header

    print(header(), flush=True)
    n = args.classes * args.shots
    solve = solve_seconds(args.classes, args.shots, args.dim)
    extract = extraction_seconds(args.model, n, args.batch, args.image_size)
    print(
        f"solve {args.shots} shots x {args.classes} classes at D={args.dim}: {solve:.2f} s; "
        f"extracting {n} features with {args.model}@{args.image_size}: {extract:.0f} s (estimated from one "
        f"batch of {args.batch}); solve / extraction = {100 * solve / extract:.3f} %"
    )


if __name__ == "__main__":
    main()
