"""A run the machine cannot hold is refused before anything is built or written, naming the estimate, the memory
and the flags that fit (the README's first fine-tune once asked a CPU machine for 37.5 GiB and aborted natively)."""

import os

import pytest

import keras_vit
from recipes.configs import demo, finetune, pretrain
from recipes.trainer import memory


def test_the_parameter_count_is_keras_own():
    config = pretrain.get_config("vit_b16_i1k")
    config.model.update(name="ViT-S/16", representation_size=0)
    config.dataset.image_size = 96
    need, parts = memory.estimate(config, 10)
    model = keras_vit.create_model("ViT-S/16", input_shape=(96, 96, 3), classes=10)
    # weights, gradients, AdamW's two slots and its update's temporaries, in float32
    expected = 4.0 * model.count_params() * (1 + 1 + 2 + memory.ADAM_TEMPORARIES)
    assert parts["variables"] == pytest.approx(expected, rel=1e-9)
    assert need == pytest.approx(sum(parts.values()))


def test_the_papers_fine_tuning_on_a_laptop_is_refused_with_a_batch_that_fits():
    config = finetune.get_config("folder")  # ViT-B/16, 384 px, batch 512: the paper's Table 4 recipe
    with pytest.raises(memory.DoesNotFit) as caught:
        memory.check_fits(config, 2, memory=(16e9, "this laptop's memory"))
    message = str(caught.value)
    assert "and this laptop's memory is 16.0 GB" in message and "Nothing was started" in message
    batch = int(message.split("--config.batch_size=")[1].split()[0])
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
