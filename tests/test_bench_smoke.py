"""The bench scripts run and print their tables (tiny configs; no timing assertions)."""

import os
import subprocess
import sys

from conftest import ROOT


def _run(*args):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=ROOT)
    done = subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_throughput_smoke():
    out = _run("bench/throughput.py", "--models", "ViT-Ti/16", "--image_sizes", "32", "--batch_sizes", "2",
               "--frameworks", "keras_tf,keras_tf_naive", "--iters", "1", "--warmup", "1")
    assert "GEMM" in out and out.count("ViT-Ti/16") == 3  # infer keras_tf; train keras_tf + naive


def test_pipeline_and_fewshot_smoke():
    out = _run("bench/pipeline.py", "--image_sizes", "32", "--model", "ViT-Ti/16", "--batch", "4",
               "--batches", "2", "--iters", "1")
    assert "pipeline img/s" in out
    out = _run("bench/fewshot.py", "--classes", "10", "--shots", "2", "--dim", "16", "--model", "ViT-Ti/16",
               "--image_size", "32", "--batch", "2")
    assert "solve / extraction" in out
