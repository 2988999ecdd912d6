"""Our Keras training step against the same network written directly for each backend: how close to the limit.

    .venv/bin/python bench/backend_limit.py --rounds 3          # ViT-S/16 @ 224, batch 16

Four rows, each in a fresh process, rounds interleaved; one step = forward, backward, clipping of the global
gradient norm to 1.0 and AdamW (lr 1e-4, weight decay 0.05, epsilon 1e-7), on one fixed batch:
- "keras JAX": `recipes.trainer.jax_step.JaxEngine`, the recipes' JAX step (`stateless_call`, `jax.jit`, state
  donated) on `keras_vit.create_model`;
- "plain Flax + optax": the same ViT written in `flax.linen` (fused q/k/v kernel, `jax.nn.dot_product_attention`
  as our JAX path uses) with `optax.clip_by_global_norm` + `optax.adamw`, one `jax.jit` with donation and the
  engine's compile options (`keras_vit.utils.xla_options`);
- "keras TF (XLA)": `recipes.trainer.tf_step.build_train_step(jit_compile=True)`, the recipes' TF step;
- "plain TF (XLA)": the same ViT as `tf.Variable`s and TensorFlow ops (einsum attention, as our TF path), a
  `tf.GradientTape`, `tf.clip_by_global_norm` and AdamW written out, in one `tf.function(jit_compile=True)`.
Every network has keras_vit's parameter count (checked). Images/s is the batch over the median step time;
"built" is the row process's resident memory once the model and optimizer exist (VmRSS; the keras JAX row has
TensorFlow loaded, as the recipes' input pipeline needs it), "peak" its peak over the steps (VmHWM). `vs plain`
is our row's rate over the plain row's.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from bench.backend_plain import CLIP, EPS, LR, S16, WD, plain_flax, plain_tf  # noqa: E402

ROWS = {"keras JAX": "jax", "plain Flax + optax": "jax", "keras TF (XLA)": "tensorflow", "plain TF (XLA)": "tensorflow"}
PAIRS = (("keras JAX", "plain Flax + optax"), ("keras TF (XLA)", "plain TF (XLA)"))


def _keras_model(size: int):
    import keras_vit

    return keras_vit.create_model("ViT-S/16", input_shape=(size, size, 3), classifier_activation=None)


def keras_jax(size: int, batch: int):
    """(step() that blocks, parameter count) for the recipes' JAX engine."""
    import numpy as np

    import keras_vit
    from recipes.trainer.jax_step import JaxEngine

    model = _keras_model(size)
    opt = keras_vit.FusedAdamW(LR, weight_decay=WD, epsilon=EPS)  # the recipes' AdamW
    opt.build(model.trainable_variables)
    engine = JaxEngine(model, opt, None, num_classes=S16["classes"], global_batch_size=batch, clip_norm=CLIP)
    engine.release_variables()  # as `recipes.trainer.jax_run` does before its loop
    rng = np.random.default_rng(0)
    batch_ = (
        rng.uniform(-1, 1, (batch, size, size, 3)).astype("float32"),
        rng.integers(0, S16["classes"], batch).astype("int32"),
    )
    return lambda: engine(batch_)["loss"].block_until_ready(), model.count_params()


def keras_tf(size: int, batch: int):
    """(step() that blocks, parameter count) for the recipes' TF step compiled by XLA."""
    import tensorflow as tf

    import keras_vit
    from recipes.trainer import tf_step

    model = _keras_model(size)
    opt = keras_vit.FusedAdamW(LR, weight_decay=WD, epsilon=EPS)  # the recipes' AdamW
    opt.build(model.trainable_variables)
    step = tf_step.build_train_step(
        model, opt, num_classes=S16["classes"], global_batch_size=batch, clip_norm=CLIP, jit_compile=True
    )
    x = tf.random.uniform((batch, size, size, 3), -1, 1)
    y = tf.random.uniform((batch,), 0, S16["classes"], dtype=tf.int32)
    return lambda: step((x, y))["loss"].numpy(), model.count_params()


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--image_size", type=int, default=224)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--iters", type=int, default=8)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--rows", default=",".join(ROWS), help="comma-separated, of: " + ", ".join(ROWS))
    p.add_argument("--_row")
    args = p.parse_args(argv)
    if args._row:
        _run_row(args)
        return
    from bench.machine import describe, header

    machine = describe()
    print(header(machine), flush=True)
    results = {}
    rows = args.rows.split(",")
    unknown = [row for row in rows if row not in ROWS]
    if unknown:
        p.error(f"unknown rows {unknown}; the rows are {list(ROWS)}")
    for r in range(args.rounds):
        for row in rows:
            env = dict(os.environ, KERAS_BACKEND=ROWS[row], PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="3")
            done = subprocess.run(
                [
                    sys.executable,
                    os.path.abspath(__file__),
                    "--_row",
                    row,
                    "--image_size",
                    str(args.image_size),
                    "--batch",
                    str(args.batch),
                    "--iters",
                    str(args.iters),
                    "--warmup",
                    str(args.warmup),
                ],
                env=env,
                capture_output=True,
                text=True,
            )
            if done.returncode:
                raise RuntimeError(f"{row}: {done.stderr[-3000:]}")
            results.setdefault(row, []).append(json.loads(done.stdout.strip().splitlines()[-1]))
            print(f"round {r + 1}: {row}: {results[row][-1]}", file=sys.stderr, flush=True)
    _report(args, results, machine)


def _run_row(args) -> None:
    from bench.throughput import rss_gb, timed

    build = {
        "keras JAX": keras_jax,
        "plain Flax + optax": plain_flax,
        "keras TF (XLA)": keras_tf,
        "plain TF (XLA)": plain_tf,
    }[args._row]
    step, params = build(args.image_size, args.batch)
    built = rss_gb("VmRSS")
    sec = timed(step, args.iters, args.warmup)
    print(json.dumps({"img_s": args.batch / sec, "built_gb": built, "peak_gb": rss_gb(), "params": params}))


def _report(args, results: dict, machine: dict) -> None:
    print(
        f"ViT-S/16 @ {args.image_size}, batch {args.batch}, {machine['kind']}, {machine['cores']} CPUs, "
        f"{args.rounds} round(s): img/s and peak GB (median over rounds)"
    )
    rate = {row: statistics.median(r["img_s"] for r in rs) for row, rs in results.items()}
    for row, rs in results.items():
        print(
            f"  {row:<20} {rate[row]:6.2f} img/s  built {statistics.median(r['built_gb'] for r in rs):5.2f} GB  "
            f"peak {statistics.median(r['peak_gb'] for r in rs):5.2f} GB  "
            f"params {rs[0]['params']:,}  rounds: " + ", ".join(f"{r['img_s']:.2f}" for r in rs)
        )
    for ours, plain in PAIRS:
        if ours in rate and plain in rate:
            per_round = [a["img_s"] / b["img_s"] for a, b in zip(results[ours], results[plain])]
            print(
                f"  {ours} vs {plain}: {rate[ours] / rate[plain]:.3f}x  (per round: "
                + ", ".join(f"{x:.3f}" for x in per_round)
                + ")"
            )
    print(json.dumps({"machine": machine, **results}))


if __name__ == "__main__":
    main()
