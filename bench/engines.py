"""The trainer's step rate on its two engines: `python -m recipes.train` on TensorFlow and on JAX, back to back.

    .venv/bin/python bench/engines.py --rounds 3 --steps 400
    .venv/bin/python bench/engines.py --flags=--config.model.name=ViT-S/16,--config.dataset.image_size=224 \\
        --steps 30 --log_every 10

Each run is the CLI in a fresh process on the demo config (bundled digits, its model, batch 64) with
evaluation off; the rate is the median of the logged img/s after the first window (which holds the
compilation). Rounds interleave the engines, so drift of the machine hits both alike.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RATE = re.compile(r"step (\d+)/\d+ .* ([\d.]+) img/s")


def run(backend: str, steps: int, log_every: int, flags: list) -> float:
    """Median logged img/s of one trainer run on `backend`, compilation window excluded."""
    with tempfile.TemporaryDirectory() as workdir:
        cmd = [
            sys.executable,
            "-m",
            "recipes.train",
            f"--backend={backend}",
            "--config=recipes/configs/demo.py",
            f"--workdir={workdir}",
            f"--config.total_steps={steps}",
            f"--config.log_every={log_every}",
            f"--config.checkpoint_every={steps}",
            "--config.dataset.eval_split=",
            *flags,
        ]
        env = dict(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=ROOT)
        done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
        if done.returncode:
            raise SystemExit(f"{backend} run failed:\n{done.stderr[-3000:]}")
        rates = [float(m.group(2)) for m in RATE.finditer(done.stderr) if int(m.group(1)) > log_every]
        return statistics.median(rates)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=400)
    p.add_argument("--log_every", type=int, default=50)
    p.add_argument("--flags", default="", help="comma-separated extra trainer flags")
    args = p.parse_args(argv)
    sys.path.insert(0, ROOT)
    from bench.machine import header

    print(header(), flush=True)
    flags = [f for f in args.flags.split(",") if f]
    print(f"{'round':>5} {'tensorflow img/s':>17} {'jax img/s':>10} {'jax/tf':>7}")
    for r in range(args.rounds):
        tf_rate = run("tensorflow", args.steps, args.log_every, flags)
        jax_rate = run("jax", args.steps, args.log_every, flags)
        print(f"{r + 1:>5} {tf_rate:>17.1f} {jax_rate:>10.1f} {jax_rate / tf_rate:>7.2f}", flush=True)


if __name__ == "__main__":
    main()
