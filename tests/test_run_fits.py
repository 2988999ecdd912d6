"""A run the machine cannot hold is refused before anything is built or written, naming the estimate, the memory
and the flags that fit (the README's first fine-tune once asked a CPU machine for 37.5 GiB and aborted natively)."""

import json
import os

import pytest

import keras_vit
from recipes.configs import demo, finetune, pretrain
from recipes.trainer import memory
from conftest import ROOT, python_run


def test_the_parameter_count_is_keras_own():
    config = pretrain.get_config("vit_b16_i1k")
    config.model.update(name="ViT-S/16", representation_size=0)
    config.dataset.image_size = 96
    need, parts = memory.estimate(config, 10)
    model = keras_vit.create_model("ViT-S/16", input_shape=(96, 96, 3), classes=10)
    # weights, gradients, AdamW's two slots, its update's temporaries and the step's own, in float32
    expected = 4.0 * model.count_params() * (1 + 1 + 2 + memory.ADAM_TEMPORARIES + memory.PARAMETER_TEMPORARIES)
    assert parts["variables"] == pytest.approx(expected, rel=1e-9)
    assert need == pytest.approx(sum(parts.values()))


def test_the_papers_fine_tuning_on_a_laptop_is_refused_with_a_batch_that_fits():
    config = finetune.get_config("folder")  # ViT-B/16, 384 px, batch 512: the paper's Table 4 recipe
    with pytest.raises(memory.DoesNotFit) as caught:
        memory.check_fits(config, 2, memory=(16e9, "this laptop's memory"))
    message = str(caught.value)
    assert "and this laptop's memory is 16.0 GB" in message and "Nothing was started" in message
    assert "use --config.batch_size=auto (here: --config.batch_size=" in message
    batch = int(message.split("--config.batch_size=")[2].split()[0])
    accumulate = int(message.split("--config.grad_accum_steps=")[1].split()[0])
    assert 1 <= batch < 512 and batch * accumulate == 512
    config.batch_size = batch
    memory.check_fits(config, 2, memory=(16e9, "this laptop's memory"))  # the suggestion fits
    config.batch_size = 2 * batch
    with pytest.raises(memory.DoesNotFit):
        memory.check_fits(config, 2, memory=(16e9, "this laptop's memory"))  # and is the largest power of two


def test_remat_and_replicas_move_the_estimate_the_right_way():
    config = finetune.get_config("folder")
    config.batch_size = 16
    plain = memory.estimate(config, 2)[1]
    config.model.remat = "attention"
    attention = memory.estimate(config, 2)[1]
    config.model.remat = True
    full = memory.estimate(config, 2)[1]
    # keras_vit's attention keeps no probabilities either way; remat=True keeps one block's activations
    assert plain["activations"] == attention["activations"] > full["activations"]
    assert memory.estimate(config, 2, replicas=2)[1]["variables"] == pytest.approx(2 * full["variables"])


def test_a_config_without_sizes_is_not_estimated():
    config = demo.get_config("pretrain")
    config.model.update(name="vit_small_patch16_224", hidden_size=0)
    assert memory.estimate(config, 10) is None


def test_the_trainer_refuses_before_the_workdir_exists(tmp_path, monkeypatch):
    from recipes import trainer

    monkeypatch.setattr(memory, "available", lambda: (2e9, "the test's limit"))
    config = demo.get_config("pretrain")
    config.batch_size = 4096
    workdir = tmp_path / "run"
    with pytest.raises(ValueError, match="the test's limit is 2.0 GB: use --config.batch_size="):
        trainer.train_and_evaluate(config, str(workdir))
    assert not os.path.exists(workdir)


def test_the_cgroup_limit_is_read_where_set():
    have, where = memory.available()
    assert have > 1e9 and ("cgroup" in where or where == "this machine's memory")


def _memory_for(config, classes: int, batch: int) -> tuple:
    """A memory figure in which `batch` images per step fit by the estimate, and twice as many do not."""
    need, parts = memory.estimate(config, classes)
    per_image = (parts["activations"] + parts["input"]) / config.batch_size
    return ((parts["runtime"] + parts["variables"] + per_image * (batch + 0.5)) / memory.SAFETY, "the test's memory")


def test_auto_batch_keeps_the_update_and_the_schedule_in_images():
    config = finetune.get_config("folder")  # 512 images per update at 384 px
    config.update(auto_batch=True, total_steps=500, log_every=50, checkpoint_every=1000)
    config.optimizer.warmup_steps = 100
    line = memory.choose_batch(config, 2, memory=_memory_for(config, 2, 16))
    assert config.batch_size == 16 and config.grad_accum_steps == 32 and not config.auto_batch
    assert (config.total_steps, config.optimizer.warmup_steps) == (500 * 32, 100 * 32)
    assert (config.log_every, config.checkpoint_every) == (50 * 32, 1000 * 32)
    assert "512 images per update as 32 step(s) of 16" in line
    memory.check_fits(config, 2, memory=_memory_for(finetune.get_config("folder"), 2, 16))  # what it chose fits
    assert memory.choose_batch(config, 2) == ""  # chosen once: a second call changes nothing
    # a run that fits keeps its batch; an update no per-step batch divides, or none fits, is refused
    small = demo.get_config("pretrain")
    small.auto_batch = True
    assert "32 images per update as 1 step(s) of 32" in memory.choose_batch(small, 10)
    assert small.batch_size == 32 and small.grad_accum_steps == 1
    odd = finetune.get_config("folder")
    odd.update(auto_batch=True, batch_size=48)
    with pytest.raises(memory.DoesNotFit, match="no per-step batch that divides 48 fits"):
        memory.choose_batch(odd, 2, memory=_memory_for(odd, 2, 32))
    assert odd.batch_size == 48 and odd.auto_batch  # a refusal changes nothing
    with pytest.raises(memory.DoesNotFit, match="none fits"):
        memory.choose_batch(odd, 2, memory=(1e9, "a tiny machine"))


def test_the_trainer_and_the_cli_take_batch_size_auto(tmp_path, monkeypatch):
    from recipes import trainer

    config = demo.get_config("pretrain")
    config.model.update(hidden_size=16, mlp_dim=32, num_layers=1, num_heads=2, patch_size=8)
    config.dataset.update(eval_split="", image_size=16)
    config.update(auto_batch=True, batch_size=32, total_steps=2, log_every=1, checkpoint_every=2, jit_compile=False)
    config.optimizer.warmup_steps = 1
    memory_there = _memory_for(config, 10, 8)
    monkeypatch.setattr(memory, "available", lambda: memory_there)
    summary = trainer.train_and_evaluate(config, str(tmp_path / "run"))
    assert summary["steps"] == 8  # 2 updates of 32 images, as 4 steps of 8 each
    record = json.loads((tmp_path / "run" / "run_config.json").read_text())
    flat = json.dumps(record)
    assert '"batch_size": 8' in flat and '"grad_accum_steps": 4' in flat, flat[:2000]
    # the command line's spelling, on a machine where the demo's batch fits as it is
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=ROOT, CUDA_VISIBLE_DEVICES="")
    done = python_run(
        [
            "-m",
            "recipes.train",
            "--config=demo:pretrain",
            f"--workdir={tmp_path / 'cli'}",
            "--config.batch_size=auto",
            "--config.model.num_layers=1",
            "--config.model.hidden_size=16",
            "--config.model.mlp_dim=32",
            "--config.dataset.image_size=16",
            "--config.model.patch_size=8",
            "--config.dataset.eval_split=",
            "--config.total_steps=1",
            "--config.jit_compile=False",
        ],
        cwd=ROOT,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "batch_size=auto: 32 images per update as 1 step(s) of 32" in done.stderr


# ----------------------------------------------------------------------------- on an accelerator

_H200 = os.path.join(ROOT, "bench", "results", "accelerator_memory_h200.json")


def _h200_rows() -> list:
    with open(_H200) as f:
        runs = json.load(f)["runs"]
    return [(run, row) for run, rows in runs.items() for row in rows]


@pytest.mark.parametrize("run,row", _h200_rows(), ids=lambda r: r if isinstance(r, str) else r["row"])
def test_the_accelerator_estimate_is_within_12_percent_of_the_peaks_measured_on_an_h200(run, row):
    """The device peaks of the recipes' JAX step measured on one H200 (bench/accelerator_memory.py; the allocator's
    high-water mark, before and after the GPU compile option) against the estimate of the same config."""
    from bench.accelerator_memory import row_config

    config = row_config(row["row"])
    need, _ = memory.estimate(config, config.dataset.num_classes or 1000, accelerator=True)
    assert 0.88 <= need / (row["peak_gb"] * memory.GB) <= 1.12, (run, row["row"], need / 1e9, row["peak_gb"])


def test_the_papers_fine_tuning_on_one_h200_is_refused_with_the_batch_that_ran_there():
    rows = {row["row"]: row for _, row in _h200_rows()}
    measured = rows["vit_b16_384_b128_sgd"]  # the paper's fine-tune at batch 128 ran on the H200: 65.9 of 112.6 GB
    h200 = (measured["limit_gb"] * memory.GB, "the memory XLA may take on NVIDIA H200 (gpu 0)")
    assert measured["peak_gb"] < measured["limit_gb"]
    config = finetune.get_config("folder")  # ViT-B/16, 384 px, batch 512, float32
    with pytest.raises(memory.DoesNotFit) as caught:
        memory.check_fits(config, 2, memory=h200, accelerator=True)
    message = str(caught.value)
    assert "on each accelerator and the memory XLA may take on NVIDIA H200 (gpu 0) is 112.6 GB" in message
    assert "--config.batch_size=128 with --config.grad_accum_steps=4" in message
    assert "--config.precision=bfloat16" in message and "Nothing was started" in message
    config.batch_size = 128
    memory.check_fits(config, 2, memory=h200, accelerator=True)
    # each device holds the variables and its share of the batch: eight devices hold 512 where one holds 128
    config.batch_size = 512
    memory.check_fits(config, 2, replicas=8, memory=h200, accelerator=True)
    config.update(auto_batch=True)
    assert "512 images per update as 4 step(s) of 128" in memory.choose_batch(config, 2, memory=h200, accelerator=True)


def test_bfloat16_halves_the_activations_and_remat_keeps_fewer_on_an_accelerator():
    config = finetune.get_config("folder")
    config.batch_size = 64
    full = memory.estimate(config, 2, accelerator=True)[1]
    config.precision = "bfloat16"
    half = memory.estimate(config, 2, accelerator=True)[1]
    assert half["activations"] == pytest.approx(full["activations"] / 2)
    assert half["variables"] == full["variables"]  # float32 variables, gradients and slots either way
    config.model.remat = True
    assert memory.estimate(config, 2, accelerator=True)[1]["activations"] < half["activations"] / 4


_DEVICE_MEMORY = """
import json
import jax
from recipes.trainer import memory

on_cpu = memory.accelerator_memory(1)  # a CPU device states no limit


class Device:
    device_kind, platform = "Test GPU", "gpu"

    def memory_stats(self):
        return {"bytes_limit": 8_000_000_000, "bytes_in_use": 0}


jax.local_devices = lambda: [Device()]
print(json.dumps(dict(on_cpu=on_cpu, one=memory.accelerator_memory(1), split=memory.accelerator_memory(2))))
"""


def test_each_accelerators_memory_is_read_from_its_allocator_on_jax():
    from conftest import run_on_backend

    got = run_on_backend(_DEVICE_MEMORY, "jax")
    assert got["on_cpu"] is None
    assert got["one"] == [8e9, "the memory XLA may take on Test GPU (gpu 0)"]
    assert got["split"] is None  # a batch split 2 ways over 1 device: a layout the estimate does not describe


def test_the_trainer_refuses_on_an_accelerator_before_the_workdir_exists(tmp_path, monkeypatch):
    from recipes import trainer
    from recipes.trainer import common

    monkeypatch.setattr(common, "_on_accelerator", lambda: True)
    monkeypatch.setattr(memory, "accelerator_memory", lambda replicas: (2e9, "the test's accelerator"))
    config = demo.get_config("pretrain")
    config.batch_size = 4096
    workdir = tmp_path / "run"
    with pytest.raises(ValueError, match="on each accelerator and the test's accelerator is 2.0 GB: use "):
        trainer.train_and_evaluate(config, str(workdir))
    assert not os.path.exists(workdir)
    # where the device states no size (TensorFlow's GPUs), the run is not checked, and `auto` is refused by name
    monkeypatch.setattr(memory, "accelerator_memory", lambda replicas: None)
    config.update(auto_batch=True)
    with pytest.raises(ValueError, match="--config.batch_size=auto needs the memory there is"):
        trainer.train_and_evaluate(config, str(workdir))
    assert not os.path.exists(workdir) and config.batch_size == 4096


def test_the_accelerator_rows_run_where_tensorflow_is_not_installed(tmp_path):
    """bench/accelerator_memory.py's child builds the recipes' JAX engine on a machine with JAX alone (the GPU
    machine's image has no TensorFlow): here TensorFlow is made unimportable in the child by a sitecustomize."""
    from bench.accelerator_memory import row_config
    from conftest import python_run

    (tmp_path / "sitecustomize.py").write_text(
        "import sys\nsys.modules['tensorflow'] = None\nsys.modules['tensorflow_datasets'] = None\n"
    )
    out = tmp_path / "rows.json"
    env = dict(os.environ, PYTHONPATH=str(tmp_path), CUDA_VISIBLE_DEVICES="", TF_CPP_MIN_LOG_LEVEL="3")
    done = python_run(
        [os.path.join(ROOT, "bench", "accelerator_memory.py"), "--rows", "demo", "--steps", "1", "--out", str(out)],
        cwd=ROOT,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (row,) = json.loads(out.read_text())["rows"]
    assert "error" not in row, row
    config = row_config("demo")
    assert row["device"] == "cpu" and row["peak_gb"] == 0.0  # a CPU device states no peak: nothing to compare
    assert row["estimate_gb"] == pytest.approx(memory.estimate(config, 10, accelerator=True)[0] / 1e9)
