"""An image-folder run killed with SIGKILL and resumed equals the uninterrupted run, on both engines, with LoRA
adapters and layer-wise learning-rate decay in the state that must come back."""

import json
import os
import signal
import subprocess
import sys
import time

import keras
import numpy as np
import pytest

import keras_vit  # noqa: F401  (registers the layers for load_model)
from conftest import ROOT, python_run
from image_folders import write_folder


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    path = tmp_path_factory.mktemp("resume") / "images"
    write_folder(str(path))
    return str(path)


def _cmd(backend, workdir, root, steps):
    return [
        sys.executable,
        "-m",
        "recipes.train",
        f"--backend={backend}",
        f"--workdir={workdir}",
        "--config=recipes/configs/demo.py:pretrain",
        "--config.model.hidden_size=32",
        "--config.model.mlp_dim=64",
        "--config.model.num_layers=1",
        "--config.model.num_heads=2",
        "--config.model.patch_size=8",
        "--config.batch_size=8",
        "--config.deterministic=True",
        "--config.jit_compile=False",  # resuming is the subject; the demo trains with XLA
        f"--config.dataset.name=folder:{root}",
        "--config.dataset.num_classes=0",
        "--config.dataset.train_split=train[:80%]",
        "--config.dataset.eval_split=train[80%:]",
        f"--config.total_steps={steps}",
        "--config.checkpoint_every=5",
        "--config.log_every=10",
        "--config.lora.rank=2",
        "--config.optimizer.layer_decay=0.8",
    ]


def _env(backend: str):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=ROOT, CUDA_VISIBLE_DEVICES="")
    if backend == "jax":
        env["XLA_FLAGS"] = "--xla_force_host_platform_device_count=1"
    return env


def _checkpointed(ckpts) -> bool:
    """A first checkpoint is complete: TensorFlow's manager writes its `checkpoint` state file after the merge
    (a kill inside the merge would leave no checkpoint to resume from), Orbax renames a finished step's folder."""
    return ckpts.exists() and any(n == "checkpoint" or n.isdigit() for n in os.listdir(ckpts))


# the JAX leg (~45 s) is slow: JAX's kill-and-resume stays in the default suite through
# test_jax_recipes.py::test_sigkill_on_two_devices_then_resume_on_four_equals_uninterrupted
@pytest.mark.parametrize("backend", ["tensorflow", pytest.param("jax", marks=pytest.mark.slow)])
def test_folder_run_killed_and_resumed_equals_uninterrupted(tmp_path, root, backend):
    steps = 120 if backend == "tensorflow" else 40
    full = python_run(_cmd(backend, tmp_path / "full", root, steps)[1:], cwd=ROOT, env=_env(backend), timeout=400)
    assert full.returncode == 0, full.stderr[-3000:]
    killed = tmp_path / "killed"
    proc = subprocess.Popen(  # a process of its own: it is killed
        _cmd(backend, killed, root, steps),
        cwd=ROOT,
        env=_env(backend),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None and not _checkpointed(killed / "checkpoints"):
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (killed / "summary.json").exists(), "the run finished before it could be killed"
    resumed = python_run(_cmd(backend, killed, root, steps)[1:], cwd=ROOT, env=_env(backend), timeout=400)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    summary = json.loads((killed / "summary.json").read_text())
    assert summary["resumed_from"] is not None and 0 < summary["resumed_from"] < steps
    a, b = (
        keras.models.load_model(p / "model.keras", compile=False).get_weights() for p in (killed, tmp_path / "full")
    )
    for x, y in zip(a, b):
        np.testing.assert_allclose(x, y, atol=1e-6 if backend == "jax" else 0.0, rtol=0)
    assert (killed / "adapters.lora.h5").exists()
