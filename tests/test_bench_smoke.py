"""The bench scripts run and print their tables (tiny configs; no timing assertions)."""

import os
import subprocess
import sys

import pytest

from conftest import ROOT

# every smoke test here starts fresh TF/JAX processes (1-5 min each): `make test-slow` runs them
pytestmark = pytest.mark.slow


def _run(*args):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=ROOT)
    done = subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def _tiny_throughput(*arguments):
    """bench/throughput.py on ViT-Ti/16 at 32 px, batch 2, one timed call per row."""
    tiny = ("--models", "ViT-Ti/16", "--image_sizes", "32", "--batch_sizes", "2", "--iters", "1", "--warmup", "1")
    return _run("bench/throughput.py", *tiny, *arguments)


def test_throughput_smoke():
    out = _tiny_throughput("--frameworks", "keras_tf,keras_tf_naive")
    assert "GEMM" in out and out.count("ViT-Ti/16") == 3  # infer keras_tf; train keras_tf + naive


def test_throughput_pytorch_rows_take_the_dtype_they_report():
    """The PyTorch rows run under the `--dtypes` policy they are labelled with (they measured float32 for `bf16`
    before; the row's own check now refuses a mismatch)."""
    out = _tiny_throughput("--modes", "train", "--dtypes", "fp32,bf16", "--frameworks", "keras_torch_fadamw")
    rows = [line for line in out.splitlines() if line.startswith("ViT-Ti/16")]
    assert [line.split()[4] for line in rows] == ["fp32", "bf16"], out
    assert not [line for line in out.splitlines() if line.startswith("# keras_torch")], out  # no row failed


def test_pipeline_and_fewshot_smoke():
    out = _run(
        "bench/pipeline.py",
        "--image_sizes",
        "32",
        "--model",
        "ViT-Ti/16",
        "--batch",
        "4",
        "--batches",
        "2",
        "--iters",
        "1",
    )
    assert "pipeline img/s" in out
    out = _run(
        "bench/fewshot.py",
        "--classes",
        "10",
        "--shots",
        "2",
        "--dim",
        "16",
        "--model",
        "ViT-Ti/16",
        "--image_size",
        "32",
        "--batch",
        "2",
    )
    assert "solve / extraction" in out


def test_throughput_int8_remat_and_bare_jax_step_rows_smoke():
    out = _tiny_throughput("--frameworks", "keras_tf_int8,keras_tf_remat,keras_jax_step")
    rows = [line for line in out.splitlines() if line.startswith("ViT-Ti/16")]
    # infer: int8 + remat + the jitted forward; train: remat + the bare step (int8 rows are inference only)
    assert len(rows) == 5, out


def test_memory_smoke():
    out = _run(
        "bench/memory.py",
        "--model",
        "ViT-Ti/16",
        "--size",
        "32",
        "--batch",
        "2",
        "--rows",
        "keras_tf,keras_tf_remat,keras_jax",
    )
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line.startswith("keras_")}
    assert set(rows) == {"keras_tf", "keras_tf_remat", "keras_jax"}, out
    assert len(rows["keras_jax"]) == 6  # runtime, built, peak, step-built and XLA's own temp size


def test_int8_serving_smoke():
    out = _run(
        "bench/int8_serving.py",
        "--model",
        "ViT-Ti/16",
        "--image_size",
        "32",
        "--batch_sizes",
        "2",
        "--iters",
        "1",
        "--warmup",
        "1",
        "--no_timm",
    )
    rows = [line for line in out.splitlines() if line.startswith("  b2 ")]
    assert len(rows) == 7 and all("MiB" in line for line in rows), out


def test_backend_limit_smoke():
    pytest.importorskip("flax")
    pytest.importorskip("optax")
    out = _run("bench/backend_limit.py", "--image_size", "32", "--batch", "2", "--iters", "1", "--warmup", "1")
    counts = {line.split("params ")[1].split()[0] for line in out.splitlines() if "params " in line}
    assert len(counts) == 1, out  # the plain networks have keras_vit's parameter count
    assert out.count(" vs plain ") == 2, out


def test_image_text_smoke(tmp_path):
    import importlib.util

    if importlib.util.find_spec("open_clip") is None:  # it imports only beside the torchvision stand-in the bench adds
        pytest.skip("needs open_clip (make bench-setup)")
    out = _run(
        "bench/image_text.py",
        "--texts",
        "16",
        "--batch",
        "8",
        "--iters",
        "1",
        "--images",
        "4",
        "--classes",
        "2",
        "--workdir",
        str(tmp_path),
    )
    rows = [line.split()[0] for line in out.splitlines()[-3:]]
    assert rows == ["open_clip", "tensorflow", "jax"], out
