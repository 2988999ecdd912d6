"""Resuming safely: a workdir's run is compared field by field with the command that resumes it (optimizer,
model, schedule, engine), a workdir whose checkpoints are all unusable is an error that moves nothing, a finished
model is never overwritten by a run that did not start from it, and `config.restart=True` starts over
deliberately (renaming, not deleting) once. Flags only the other engine reads are refused."""

import json
import os

import pytest

from conftest import ROOT, python_run
from recipes import train
from recipes.trainer import run_record
from recipes.trainer.checkpoints import CheckpointError
from test_faults_train import _ckpt_steps, _config, _damage, _input


def _run(workdir, **overrides):
    return train.train_and_evaluate(_config(**overrides), str(workdir), train_input=_input())


@pytest.fixture()
def halfway(tmp_path):
    """A workdir killed at step 20 of 40: checkpoints 10 and 20, its run_config.json, no model yet."""
    _run(tmp_path, total_steps=20)
    record = json.loads((tmp_path / run_record.RUN_CONFIG).read_text())
    record["steps_total"] = 40  # as if the 40-step run had been stopped after step 20
    record["config"]["total_steps"] = 40
    (tmp_path / run_record.RUN_CONFIG).write_text(json.dumps(record))
    (tmp_path / "model.keras").unlink()
    (tmp_path / "summary.json").unlink()
    return tmp_path


def _listing(directory):
    return sorted(os.listdir(directory))


def test_another_optimizer_is_refused_naming_the_field_and_nothing_moves(halfway):
    before = _listing(halfway / "checkpoints")
    with pytest.raises(ValueError, match=r"config\.optimizer\.name='adamw'; this command says 'sgd'"):
        _run(halfway, **{"optimizer.name": "sgd"})
    with pytest.raises(ValueError, match=r"config\.model\.num_layers=1; this command says 2"):
        _run(halfway, **{"model.num_layers": 2})
    assert _listing(halfway / "checkpoints") == before


def test_a_schedule_below_the_checkpoint_is_refused_and_a_longer_one_extends(halfway):
    with pytest.raises(ValueError, match=r"at step 20 of 40; this command's schedule is 5 steps"):
        _run(halfway, total_steps=5)
    with pytest.raises(ValueError, match=r"schedule is 30 steps"):
        _run(halfway, total_steps=30)  # above the step, but shorter than the run's own schedule
    summary = _run(halfway, total_steps=50)
    assert summary["resumed_from"] == 20 and summary["steps"] == 50
    assert json.loads((halfway / run_record.RUN_CONFIG).read_text())["steps_total"] == 50


def test_all_checkpoints_unusable_is_an_error_that_moves_nothing(halfway):
    for step in (10, 20):
        _damage(next((halfway / "checkpoints").glob(f"ckpt-{step}.data*")), "truncated")
    before = _listing(halfway / "checkpoints")
    with pytest.raises(CheckpointError, match=r"Every checkpoint .* is unusable \(steps 20, 10.*--config\.restart"):
        _run(halfway, total_steps=40)
    assert _listing(halfway / "checkpoints") == before and not (halfway / "model.keras").exists()


def test_a_finished_model_is_never_overwritten_by_a_fresh_run(tmp_path):
    _run(tmp_path, total_steps=20)
    (tmp_path / "checkpoints").rename(tmp_path / "elsewhere")  # the checkpoints are gone, the model is not
    model = (tmp_path / "model.keras").read_bytes()
    with pytest.raises(ValueError, match=r"holds a finished model\.keras and no checkpoint.*--config\.restart"):
        _run(tmp_path, total_steps=20)
    assert (tmp_path / "model.keras").read_bytes() == model


def test_restart_renames_the_old_run_aside_once(halfway):
    summary = _run(halfway, total_steps=20, restart=True, **{"optimizer.name": "sgd"})
    assert summary["resumed_from"] is None
    aside = [n for n in _listing(halfway) if ".before-restart-" in n]
    assert sorted(n.split(".before-restart-")[0] for n in aside) == ["checkpoints", run_record.RUN_CONFIG]
    assert _ckpt_steps(halfway / [n for n in aside if n.startswith("checkpoints")][0]) == [10, 20]
    # the same command again (a preempted restart resumed) carries on instead of starting over again
    again = _run(halfway, total_steps=20, restart=True, **{"optimizer.name": "sgd"})
    assert again["resumed_from"] == 20
    assert len([n for n in _listing(halfway) if ".before-restart-" in n]) == 2


def _cli(*flags, env_backend=None):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=ROOT, CUDA_VISIBLE_DEVICES="")
    env.pop("KERAS_BACKEND", None)
    if env_backend:
        env["KERAS_BACKEND"] = env_backend
    return python_run(["-m", "recipes.train", "--config=recipes/configs/demo.py", *flags], cwd=ROOT, env=env)


@pytest.mark.parametrize(
    "flags, message",
    [
        (("--backend=jax", "--strategy=tpu"), "--strategy is the tensorflow engine's flag; this run is on jax"),
        (("--backend=tensorflow", "--num_processes=2"), "--num_processes is the jax engine's flag"),
        (("--tpu=local",), "--tpu=local is read with --strategy=tpu only"),
        (("--backend=tf",), "--backend"),
    ],
)
def test_flags_of_the_other_engine_are_refused_in_one_line(tmp_path, flags, message):
    done = _cli(f"--workdir={tmp_path / 'w'}", *flags)
    assert done.returncode != 0 and message in done.stderr, done.stderr[-2000:]
    assert "Traceback" not in done.stderr and not (tmp_path / "w").exists()


# slow (~30 s, three JAX runs): the same refusals on the TensorFlow engine are in the default suite above
@pytest.mark.slow
def test_the_jax_engine_refuses_another_config_without_renaming_good_checkpoints(tmp_path):
    pytest.importorskip("jax")
    small = [
        "--config.model.num_layers=1",
        "--config.total_steps=4",
        "--config.checkpoint_every=2",
        "--config.dataset.eval_split=",
        "--config.log_every=2",
        f"--workdir={tmp_path}",
        "--backend=jax",
    ]
    first = _cli(*small, env_backend="jax")
    assert first.returncode == 0, first.stderr[-3000:]
    (tmp_path / "model.keras").unlink()
    before = _listing(tmp_path / "checkpoints")
    other = _cli(*small, "--config.optimizer.name=sgd", env_backend="jax")
    assert other.returncode == 2 and "config.optimizer.name='adamw'; this command says 'sgd'" in other.stderr
    assert "Traceback" not in other.stderr
    engine = _cli(*small[:-1], "--backend=tensorflow", env_backend="tensorflow")
    assert engine.returncode == 2 and "holds a run of the jax engine" in engine.stderr, engine.stderr[-2000:]
    assert _listing(tmp_path / "checkpoints") == before
    assert not any(n.endswith(".unreadable") for n in before)


def test_a_resume_whose_run_config_is_gone_is_refused_and_moves_nothing(halfway):
    """Without its record the run's config cannot be compared: a changed batch size would pass unnoticed."""
    (halfway / run_record.RUN_CONFIG).unlink()
    before = _listing(halfway / "checkpoints")
    with pytest.raises(ValueError, match="no run_config.json"):
        _run(halfway, total_steps=40, batch_size=4)
    assert _listing(halfway / "checkpoints") == before
