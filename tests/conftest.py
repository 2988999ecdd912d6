"""Shared pytest set-up: quiet TF logs, the repository root on sys.path, tiny model builders."""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

FIXTURES = os.path.join(ROOT, "tests", "fixtures")
FLAX_FIXTURES = os.path.join(FIXTURES, "flax_reference")


def call_main(main, *args: str) -> tuple:
    """(exit status, stderr) of a command's `main(argv)` called in this process: for refusals that happen before
    any work, which need no fresh interpreter (each command keeps one test that runs it as users type it)."""
    import contextlib
    import io

    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            status = main(list(args))
        except SystemExit as e:  # argparse's refusals
            status = e.code
    return status, err.getvalue()


def tiny_recipe_config(**run):
    """The demo's pre-training config with a one-block, 32-wide ViT of 8-pixel patches, trained without XLA (the
    suite's recipe tests are about files, data and schedules; compiling each run's step was half their time; the
    demo and the first hour's commands train with XLA). `run`: top-level settings over these defaults."""
    from recipes.configs import demo

    c = demo.get_config("pretrain")
    c.model.update(hidden_size=32, mlp_dim=64, num_layers=1, num_heads=2, patch_size=8)
    c.update(**{**dict(batch_size=8, total_steps=2, log_every=1, checkpoint_every=2, jit_compile=False), **run})
    return c


def run_with_torch(arguments, timeout: int = 900):
    """Runs `python <arguments>` in a Python with torch and timm (`KERAS_VIT_TORCH_PYTHON`, else this one) with
    the torchvision stand-in on the path; skips the calling test where torch or timm is missing."""
    import subprocess

    import pytest

    python = os.environ.get("KERAS_VIT_TORCH_PYTHON", sys.executable)
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "tools", "torchvision_stub"))
    done = subprocess.run([python, *arguments], capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT)
    if "No module named 'torch'" in done.stderr or "No module named 'timm'" in done.stderr:
        pytest.skip("needs torch and timm (make test-slow, or KERAS_VIT_TORCH_PYTHON)")
    assert done.returncode == 0, done.stderr[-3000:] + done.stdout[-1000:]
    return done


def run_on_backend(script: str, backend: str, *arguments, timeout: int = 300) -> dict:
    """Runs `python -c script arguments...` on Keras backend `backend` (CPU only) and returns the JSON dict the
    script prints last; skips the calling test where the backend's package is missing."""
    import json
    import subprocess

    import pytest

    pytest.importorskip(backend)
    env = dict(os.environ, KERAS_BACKEND=backend, PYTHONPATH=ROOT, CUDA_VISIBLE_DEVICES="", TF_CPP_MIN_LOG_LEVEL="3")
    done = subprocess.run(
        [sys.executable, "-c", script, *arguments], env=env, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def timm_reads_save_pretrained(model, x, directory) -> float:
    """Max |logit difference| of timm's own `local-dir:` loader reading `save_pretrained(model)` strictly
    (tools/check_torch_roundtrip.py) against the model's own logits on `x`."""
    import numpy as np

    import keras_vit

    np.save(os.path.join(directory, "input.npy"), x)
    np.save(os.path.join(directory, "keras_logits.npy"), model.predict(x, verbose=0))
    keras_vit.save_pretrained(model, os.path.join(directory, "repo"))
    done = run_with_torch(
        [os.path.join(ROOT, "tools", "check_torch_roundtrip.py"), "timm_dir", str(directory)], timeout=600
    )
    return float(done.stdout.strip().split()[-1])


def pytest_collection_modifyitems(config, items):
    """Files marked `long` (`pytestmark = pytest.mark.long`) run first: under `make test`'s two workers a long
    file started last would keep one worker busy after the other has finished."""
    items.sort(key=lambda item: item.get_closest_marker("long") is None)  # a stable sort: the order otherwise kept
