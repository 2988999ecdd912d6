"""The trainer under faults: NaN mid-run, damaged checkpoints, stray files, a second run on one workdir,
and config values out of range. Each asserts the error names the field or file and what is on disk."""

import hashlib
import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_vit

from conftest import ROOT, python_run
from recipes import train
from recipes.trainer import lock
from recipes.trainer.checkpoints import CheckpointError, CheckpointManager, NonFiniteError
from recipes.configs import demo


def _config(**overrides):
    """The demo's config at a tiny size. Without XLA: these tests are about checkpoints, records and refusals, and
    compiling each run's step with XLA took half of their time (the demo, the first hour's commands and the
    backbone fine-tune train with XLA)."""
    c = demo.get_config("pretrain")
    c.model.update(hidden_size=16, mlp_dim=32, num_layers=1, num_heads=2, patch_size=8)
    c.dataset.update(eval_split="", image_size=16)
    c.update(
        batch_size=8,
        total_steps=40,
        checkpoint_every=10,
        log_every=10,
        keep_checkpoints=5,
        deterministic=True,
        jit_compile=False,
    )
    c.optimizer.warmup_steps = 5
    for key, value in overrides.items():
        group, _, field = key.rpartition(".")
        (c[group] if group else c)[field] = value
    return c


def _input(nan_from=None):
    """A fixed stream of 16x16 images; from batch `nan_from` on, the images are NaN."""
    rng = np.random.default_rng(0)
    images = rng.uniform(-1, 1, (64, 8, 16, 16, 3)).astype("float32")
    labels = rng.integers(0, 10, (64, 8)).astype("int32")
    if nan_from is not None:
        images[nan_from:] = np.nan

    def make(global_batch, image_size, training):
        return tf.data.Dataset.from_tensor_slices((images, labels)).repeat()

    return make


def _digest(directory):
    return {n: hashlib.sha256((directory / n).read_bytes()).hexdigest() for n in sorted(os.listdir(directory))}


def _ckpt_steps(directory):
    return sorted(int(n[5:-6]) for n in os.listdir(directory) if n.startswith("ckpt-") and n.endswith(".index"))


def _all_finite(directory):
    for step in _ckpt_steps(directory):
        reader = tf.train.load_checkpoint(str(directory / f"ckpt-{step}"))
        for key, dtype in reader.get_variable_to_dtype_map().items():
            if dtype.is_floating and not np.isfinite(reader.get_tensor(key)).all():
                return False
    return True


def _final_weights(workdir):
    import keras

    return [np.asarray(w) for w in keras.models.load_model(workdir / "model.keras", compile=False).get_weights()]


def test_nan_mid_run_stops_before_writing_and_keeps_good_checkpoints(tmp_path):
    with pytest.raises(NonFiniteError, match=r"between steps 21 and 30.*checkpoints/ckpt-20\b"):
        train.train_and_evaluate(_config(), str(tmp_path), train_input=_input(nan_from=25))
    ckpts = tmp_path / "checkpoints"
    assert _ckpt_steps(ckpts) == [10, 20]
    assert _all_finite(ckpts)
    assert not (tmp_path / "model.keras").exists() and not (tmp_path / "summary.json").exists()
    assert not (tmp_path / lock.LOCK_NAME).exists(), "the lock outlived the failed run"


def test_nan_run_exits_nonzero_with_one_line(tmp_path):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=ROOT, CUDA_VISIBLE_DEVICES="")
    cmd = [
        sys.executable,
        "-m",
        "recipes.train",
        "--config=recipes/configs/demo.py",
        f"--workdir={tmp_path}",
        "--config.optimizer.learning_rate=1e30",
        "--config.optimizer.warmup_steps=0",
        "--config.optimizer.clip_norm=0",
        "--config.total_steps=20",
        "--config.checkpoint_every=1",
        "--config.dataset.eval_split=",
        "--config.model.num_layers=1",
        "--config.jit_compile=False",
    ]
    run = python_run(cmd[1:], cwd=ROOT, env=env, timeout=300)
    assert run.returncode == 2, run.stderr[-2000:]
    assert "error: Training diverged" in run.stderr and "Traceback" not in run.stderr
    assert not (tmp_path / "model.keras").exists()
    assert _all_finite(tmp_path / "checkpoints")


def _damage(path, how):
    raw = path.read_bytes()
    if how == "zero-byte":
        path.write_bytes(b"")
    elif how == "truncated":
        path.write_bytes(raw[: len(raw) // 2])
    else:  # one bit flipped in the middle of the arrays
        i = len(raw) // 2
        path.write_bytes(raw[:i] + bytes([raw[i] ^ 0x10]) + raw[i + 1 :])


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("full")
    train.train_and_evaluate(_config(), str(workdir), train_input=_input())
    return workdir


def _copy_checkpoints(source, ckpts, steps):
    """The checkpoints of `steps`, with the run's record beside them, as a killed run leaves its workdir."""
    ckpts.mkdir()
    for step in steps:
        for f in (source / "checkpoints").glob(f"ckpt-{step}.*"):
            (ckpts / f.name).write_bytes(f.read_bytes())
    (ckpts.parent / "run_config.json").write_bytes((source / "run_config.json").read_bytes())


# one damage per file in the default suite (the index truncated, the data bit-flipped: TF's CRC check); the other
# three take the same path through `restore` and are in make test-slow
@pytest.mark.parametrize(
    "part,how",
    [
        pytest.param("index", "zero-byte", marks=pytest.mark.slow),
        ("index", "truncated"),
        pytest.param("data", "zero-byte", marks=pytest.mark.slow),
        pytest.param("data", "truncated", marks=pytest.mark.slow),
        ("data", "bit-flipped"),
    ],
)
def test_damaged_newest_checkpoint_falls_back_to_the_previous(uninterrupted, tmp_path, part, how, caplog):
    ckpts = tmp_path / "checkpoints"
    _copy_checkpoints(uninterrupted, ckpts, (20, 30))
    _damage(next(ckpts.glob(f"ckpt-30.{part}*")), how)
    summary = train.train_and_evaluate(_config(), str(tmp_path), train_input=_input())
    assert summary["resumed_from"] == 20
    assert "ckpt-30 is unreadable" in caplog.text
    assert (ckpts / "ckpt-30.index.unreadable").exists()
    for a, b in zip(_final_weights(tmp_path), _final_weights(uninterrupted)):
        np.testing.assert_allclose(a, b, atol=1e-6, rtol=0)


def test_stray_files_are_ignored_with_a_warning(uninterrupted, tmp_path, caplog):
    ckpts = tmp_path / "checkpoints"
    _copy_checkpoints(uninterrupted, ckpts, (30,))
    (ckpts / "ckpt-90.index").write_text("not a checkpoint")  # named like one
    (ckpts / "notes.txt").write_text("mine")
    summary = train.train_and_evaluate(_config(), str(tmp_path), train_input=_input())
    assert summary["resumed_from"] == 30
    assert "notes.txt: not a checkpoint" in caplog.text and "ckpt-90 is unreadable" in caplog.text
    assert (ckpts / "notes.txt").read_text() == "mine"


def test_restore_is_all_or_nothing_and_refuses_another_config(tmp_path):
    v = [keras.Variable(np.ones((2, 3), "float32"), name="a"), keras.Variable(np.zeros((4,), "float32"), name="b")]
    manager = CheckpointManager(str(tmp_path), {"model": v})
    manager.save(1)
    w = [keras.Variable(np.full((2, 3), 7, "float32"), name="a"), keras.Variable(np.zeros((5,), "float32"), name="b")]
    with pytest.raises(
        ValueError,
        match=r"ckpt-1 does not fit this run: model variable 'b' is \(5,\) here, "
        r"\(4,\) in the file",
    ):
        CheckpointManager(str(tmp_path), {"model": w}).restore()
    assert (w[0].numpy() == 7).all(), "a failed restore changed a variable"
    assert os.path.exists(manager.path(1) + ".index"), "a checkpoint of another config must not be moved aside"
    renamed = [
        keras.Variable(np.full((2, 3), 7, "float32"), name="a"),
        keras.Variable(np.zeros((4,), "float32"), name="c"),
    ]
    with pytest.raises(ValueError, match=r"ckpt-1 does not fit this run: it has no model variable 'c'"):
        CheckpointManager(str(tmp_path), {"model": renamed}).restore()
    # keyed by path, not position: the same variables in another order restore exactly
    swapped = [
        keras.Variable(np.zeros((4,), "float32"), name="b"),
        keras.Variable(np.zeros((2, 3), "float32"), name="a"),
    ]
    assert CheckpointManager(str(tmp_path), {"model": swapped}).restore() == 1
    assert (swapped[1].numpy() == 1).all() and (swapped[0].numpy() == 0).all()


def test_a_checkpoint_whose_write_was_interrupted_is_set_aside_as_never_written(tmp_path):
    """Killed during TensorFlow's merge: `ckpt-<step>.index` truncated beside `ckpt-<step>_temp/`. That checkpoint was
    never finished, so the run resumes from the one before, or from step 0 when it was the first; a truncated
    index without that evidence is damage, and a run with only damaged checkpoints stops and moves nothing."""
    v = [keras.Variable(np.ones((3,), "float32"), name="v")]
    manager = CheckpointManager(str(tmp_path / "a"), {"model": v})
    manager.save(1)
    index = tmp_path / "a" / "ckpt-1.index"
    index.write_bytes(index.read_bytes()[:10])
    with pytest.raises(CheckpointError, match="Every checkpoint .* is unusable"):
        CheckpointManager(str(tmp_path / "a"), {"model": v}).restore()
    assert index.exists()
    (tmp_path / "a" / "ckpt-1_temp").mkdir()  # the merge's own temporary folder: the write never finished
    assert CheckpointManager(str(tmp_path / "a"), {"model": v}).restore() is None
    assert not index.exists() and (tmp_path / "a" / "ckpt-1.index.unreadable").exists()
    manager = CheckpointManager(str(tmp_path / "b"), {"model": v})
    manager.save(1)
    v[0].assign([2.0, 2.0, 2.0])
    manager.save(2)
    (tmp_path / "b" / "ckpt-2.index").write_bytes(b"")
    (tmp_path / "b" / "ckpt-2_temp").mkdir()
    assert CheckpointManager(str(tmp_path / "b"), {"model": v}).restore() == 1 and (v[0].numpy() == 1).all()


def test_non_finite_state_is_never_saved(tmp_path):
    v = [keras.Variable(np.ones((3,), "float32"), name="v")]
    manager = CheckpointManager(str(tmp_path), {"model": v}, keep=1)
    manager.save(1)
    before = _digest(tmp_path)
    v[0].assign([1.0, np.nan, 2.0])
    with pytest.raises(NonFiniteError, match="step 2"):
        manager.save(2)
    assert _digest(tmp_path) == before


def test_second_live_run_is_refused_and_a_stale_lock_taken_over(tmp_path):
    holder = subprocess.Popen(["sleep", "120"])
    try:
        (tmp_path / lock.LOCK_NAME).write_text(
            json.dumps(dict(host=__import__("socket").gethostname(), pid=holder.pid, since="earlier"))
        )
        with pytest.raises(lock.WorkdirBusy, match=rf"pid {holder.pid}"):
            train.train_and_evaluate(_config(total_steps=2), str(tmp_path), train_input=_input())
        assert sorted(os.listdir(tmp_path)) == [lock.LOCK_NAME], "a refused run wrote into the workdir"
    finally:
        holder.kill()
        holder.wait()
    summary = train.train_and_evaluate(_config(total_steps=2), str(tmp_path), train_input=_input())
    assert summary["steps"] == 2 and not (tmp_path / lock.LOCK_NAME).exists()


@pytest.mark.parametrize(
    "field,value,message",
    [
        ("total_steps", -5, "config.total_steps must be >= 0"),
        ("checkpoint_every", 0, "config.checkpoint_every must be >= 1"),
        ("log_every", 0, "config.log_every must be >= 1"),
        ("batch_size", 0, "config.batch_size must be >= 1"),
        ("optimizer.learning_rate", float("nan"), "config.optimizer.learning_rate must be finite"),
        ("optimizer.weight_decay", -0.1, "config.optimizer.weight_decay must be >= 0"),
        ("label_smoothing", 1.0, "config.label_smoothing must be < 1"),
        ("ema_decay", 1.5, "config.ema_decay must be < 1"),
        ("model.num_layers", -1, "config.model.num_layers must be >= 0"),
        ("model.dropout_rate", 1.0, "config.model.dropout_rate must be a number in"),
        ("dataset.image_size", 0, "config.dataset.image_size must be >= 1"),
        ("model.remat", "yes", "config.model.remat must be True, False or \"attention\", got 'yes'"),
    ],
)
def test_config_out_of_range_is_refused_before_the_workdir_is_touched(tmp_path, field, value, message):
    workdir = tmp_path / "run"
    with pytest.raises(ValueError, match=message.replace(".", r"\.")):
        train.train_and_evaluate(_config(**{field: value}), str(workdir), train_input=_input())
    assert not workdir.exists()


def test_remat_attention_reaches_the_model_and_other_strings_are_refused_at_the_command_line(tmp_path):
    """`config.model.remat` takes True, False or "attention": a run with "attention" builds its model with that
    mode and trains; on the command line any other string gets to the config check (not a type error of the
    config library) and is refused in one line before the workdir exists."""
    built = []
    original = keras_vit.VisionTransformer.__init__

    def spy(self, *args, **kwargs):
        original(self, *args, **kwargs)
        built.append(self.remat)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(keras_vit.VisionTransformer, "__init__", spy)
        summary = train.train_and_evaluate(
            _config(**{"model.remat": "attention"}, total_steps=2), str(tmp_path / "a"), train_input=_input()
        )
    assert summary["steps"] == 2 and built and set(built) == {"attention"}
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=ROOT)
    run = python_run(
        [
            "-m",
            "recipes.train",
            "--config=recipes/configs/demo.py",
            f"--workdir={tmp_path / 'w'}",
            "--config.model.remat=sometimes",
        ],
        cwd=ROOT,
        env=env,
        timeout=120,
    )
    assert run.returncode != 0 and "Traceback" not in run.stderr, run.stderr[-2000:]
    assert "config.model.remat must be True, False or \"attention\", got 'sometimes'" in run.stderr, run.stderr
    assert not (tmp_path / "w").exists()


def test_unknown_config_field_is_one_line(tmp_path):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=ROOT)
    run = python_run(
        [
            "-m",
            "recipes.train",
            "--config=recipes/configs/demo.py",
            f"--workdir={tmp_path / 'w'}",
            "--config.optimiser.learning_rate=1",
        ],
        cwd=ROOT,
        env=env,
        timeout=120,
    )
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert (
        "--config.optimiser.learning_rate: the config has no field 'optimiser' (did you mean 'optimizer'?)"
        in run.stderr
    )
    assert not (tmp_path / "w").exists()
