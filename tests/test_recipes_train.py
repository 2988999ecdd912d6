"""The trainer: resumption after SIGKILL, MirroredStrategy and MultiWorkerMirroredStrategy
equal to one device, TPU branch, bad input."""

import json
import os
import signal
import socket
import subprocess
import sys
import time

import keras
import numpy as np
import pytest

import keras_vit  # noqa: F401  (registers the layers for load_model)
from conftest import ROOT, python_run

TINY = [
    "--config=recipes/configs/demo.py:pretrain",
    "--config.model.hidden_size=32",
    "--config.model.mlp_dim=64",
    "--config.model.num_layers=1",
    "--config.model.num_heads=2",
    "--config.model.patch_size=8",
    "--config.batch_size=16",
    "--config.dataset.eval_split=",
    "--config.deterministic=True",
    "--config.log_every=10",
    "--config.jit_compile=False",  # files, flags and strategies are the subject; the demo trains with XLA
]


def _env(**extra):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=ROOT, CUDA_VISIBLE_DEVICES="")
    env.update(extra)
    return env


def _train(workdir, *flags, timeout=300, env=None):
    return python_run(
        ["-m", "recipes.train", f"--workdir={workdir}", *TINY, *flags], cwd=ROOT, env=env or _env(), timeout=timeout
    )


def _weights(path):
    model = keras.models.load_model(path, compile=False)
    return [np.asarray(w) for w in model.get_weights()]


def _assert_same(a, b, atol=0.0):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        np.testing.assert_allclose(x, y, atol=atol, rtol=0)


@pytest.mark.slow  # ~50 s; the default suite kills and resumes the TF engine in test_folder_resume.py; make test-slow
def test_sigkill_then_resume_equals_uninterrupted(tmp_path):
    flags = ["--config.total_steps=400", "--config.checkpoint_every=20"]
    full = _train(tmp_path / "full", *flags)
    assert full.returncode == 0, full.stderr[-3000:]
    killed_dir = tmp_path / "killed"
    cmd = [sys.executable, "-m", "recipes.train", f"--workdir={killed_dir}", *TINY, *flags]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ckpts = killed_dir / "checkpoints"
    deadline = time.time() + 240
    while time.time() < deadline and proc.poll() is None:
        if ckpts.exists() and any(n.endswith(".index") for n in os.listdir(ckpts)):
            break
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (killed_dir / "summary.json").exists(), "the run finished before it could be killed"
    done = sorted(int(n[5:-6]) for n in os.listdir(ckpts) if n.endswith(".index"))
    assert done and done[-1] < 400
    resumed = _train(killed_dir, *flags)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    summary = json.loads((killed_dir / "summary.json").read_text())
    assert summary["resumed_from"] is not None and summary["resumed_from"] < 400
    _assert_same(_weights(killed_dir / "model.keras"), _weights(tmp_path / "full" / "model.keras"))
    # a finished run restarted does nothing but re-evaluate
    again = _train(killed_dir, *flags)
    assert again.returncode == 0 and json.loads((killed_dir / "summary.json").read_text())["resumed_from"] == 400


_MIRRORED = """
import json, sys, tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
from recipes import train
from recipes.configs import demo


def run(workdir, batch_size, replicas):
    c = demo.get_config("pretrain")
    c.model.update(hidden_size=32, mlp_dim=64, num_layers=1, num_heads=2, patch_size=8)
    c.update(batch_size=batch_size, total_steps=12, deterministic=True, log_every=4, checkpoint_every=100)
    c.dataset.eval_split = ""
    c.jit_compile = False  # as the two-replica run (a strategy of several replicas trains without XLA)
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]) if replicas == 2 else None
    train.train_and_evaluate(c, workdir, strategy=strategy)


run(sys.argv[1] + "/1", 16, 1)
run(sys.argv[1] + "/2", 16, 2)
try:
    run(sys.argv[1] + "/odd", 15, 2)
    print(json.dumps({"odd": None}))
except ValueError as e:
    print(json.dumps({"odd": str(e)}))
"""


def test_mirrored_two_cpus_equals_one_device(tmp_path):
    """One device and two mirrored replicas (two logical CPUs) train to the same weights; a batch the replicas
    cannot split is refused. The three runs share one interpreter (each seeds its own run)."""
    done = python_run(["-c", _MIRRORED, str(tmp_path)], cwd=ROOT, env=_env(), timeout=400)
    assert done.returncode == 0, done.stderr[-3000:]
    outs = {}
    for replicas in ("1", "2"):
        outs[replicas] = _weights(tmp_path / replicas / "model.keras")
        assert json.loads((tmp_path / replicas / "summary.json").read_text())["replicas"] == int(replicas)
    _assert_same(outs["2"], outs["1"], atol=2e-5)
    odd = json.loads(done.stdout.strip().splitlines()[-1])["odd"]
    assert odd is not None and "batch_size=15 is not divisible by the 2 replicas" in odd


def _free_ports(n):
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


@pytest.mark.slow  # the strategy path: test_mirrored_two_cpus_equals_one_device keeps it in the default suite
def test_multiworker_two_processes_equal_single_process(tmp_path):
    flags = ["--config.total_steps=12", "--config.checkpoint_every=6", "--config.jit_compile=False"]
    single = _train(tmp_path / "single", *flags)
    assert single.returncode == 0, single.stderr[-3000:]
    ports = _free_ports(2)
    cluster = {"worker": [f"127.0.0.1:{p}" for p in ports]}
    procs = []
    for i in range(2):
        env = _env(TF_CONFIG=json.dumps({"cluster": cluster, "task": {"type": "worker", "index": i}}))
        cmd = [
            "timeout",
            "-k",
            "5",
            "240",
            sys.executable,
            "-m",
            "recipes.train",
            f"--workdir={tmp_path / 'mw'}",
            "--strategy=multiworker",
            *TINY,
            *flags,
        ]
        procs.append(
            subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        )
    results = [p.communicate() for p in procs]
    for p, (_, err) in zip(procs, results):
        assert p.returncode == 0, err[-3000:]
    chief, other = _weights(tmp_path / "mw" / "model.keras"), _weights(tmp_path / "mw" / "worker_1" / "model.keras")
    _assert_same(chief, other)
    _assert_same(chief, _weights(tmp_path / "single" / "model.keras"), atol=2e-5)
    assert json.loads((tmp_path / "mw" / "summary.json").read_text())["replicas"] == 2


def test_tpu_branch_calls_the_resolver_and_fails_clearly(monkeypatch):
    import tensorflow as tf

    from recipes.trainer import distribute

    seen = {}

    def resolver(tpu=None):
        seen["tpu"] = tpu
        raise ValueError(f"Could not connect to {tpu}")

    monkeypatch.setattr(tf.distribute.cluster_resolver, "TPUClusterResolver", resolver)
    with pytest.raises(ValueError, match="No TPU reachable at --tpu='grpc://10.0.0.2:8470'"):
        distribute.get_strategy("tpu", "grpc://10.0.0.2:8470")
    assert seen["tpu"] == "grpc://10.0.0.2:8470"
    monkeypatch.undo()
    with pytest.raises(ValueError, match="No TPU reachable at --tpu=None"):
        distribute.get_strategy("tpu", None)
    with pytest.raises(ValueError, match="Unknown --strategy 'fpga'"):
        distribute.get_strategy("fpga")


@pytest.mark.parametrize(
    "flags, message",
    [
        (
            ["--config=recipes/configs/demo.py:nope"],
            "Unknown variant 'nope' for demo.py; known variants: finetune, lit, pretrain",
        ),
        (["--config.batch_size=abc"], "batch_size"),
        (["--config.dataset.name=no_such_dataset_xyz"], "Unknown TFDS dataset 'no_such_dataset_xyz'"),
        (["--config.dataset.train_split=validation"], "Bad split 'validation' for local dataset 'mnist5k'"),
        (["--strategy=multiworker"], "needs $TF_CONFIG"),
    ],
)
def test_bad_input_fails_clearly_and_keeps_workdir(tmp_path, flags, message):
    workdir = tmp_path / "wd"
    workdir.mkdir()
    (workdir / "keep.txt").write_text("precious")
    done = _train(workdir, *flags, timeout=120)
    assert done.returncode != 0
    assert message in done.stderr, done.stderr[-2000:]
    assert sorted(os.listdir(workdir)) == ["keep.txt"] and (workdir / "keep.txt").read_text() == "precious"


def test_unwritable_workdir(tmp_path):
    if os.geteuid() == 0:
        target = "/proc/keras_vit_workdir"  # not creatable even for root
    else:
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        target = str(locked / "wd")
    done = _train(target, timeout=120)
    assert done.returncode != 0 and "is not writable" in done.stderr, done.stderr[-2000:]
