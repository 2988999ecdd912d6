"""config.jit_compile (recipes/trainer/xla_choice.py): the user's True or False is kept; None compiles the TF
engine's step with XLA except for bfloat16 on a CPU-only machine with native bf16 products."""

import logging

import pytest

from recipes import train
from recipes.configs import demo
from recipes.trainer import config_checks, tf_step, xla_choice
from tests.conftest import tiny_recipe_config

AVX512_BF16 = frozenset({"avx2", "avx512f", "avx512_bf16"})
AMX = frozenset({"avx2", "avx512f", "amx_tile", "amx_bf16"})
AVX2 = frozenset({"avx2", "fma"})


@pytest.mark.parametrize("flags", [AVX512_BF16, AMX])
def test_bfloat16_on_a_cpu_with_native_bf16_runs_without_xla(flags):
    xla, why = xla_choice.use_xla(None, "bfloat16", ["CPU"], flags)
    assert not xla and "bf16" in why and "--config.jit_compile=True" in why


@pytest.mark.parametrize(
    "precision, devices, flags",
    [
        ("float32", ["CPU"], AVX512_BF16),  # float32: XLA's step is the faster one on every CPU measured
        ("bfloat16", ["CPU"], AVX2),  # no native bf16: not measured, XLA kept
        ("bfloat16", ["CPU", "GPU"], AVX512_BF16),  # an accelerator: XLA is its compiler
        ("bfloat16", ["CPU", "TPU"], AMX),
        ("bfloat16", ["CPU"], frozenset()),  # flags unknown (no /proc/cpuinfo)
    ],
)
def test_xla_everywhere_else(precision, devices, flags):
    assert xla_choice.use_xla(None, precision, devices, flags)[0]


@pytest.mark.parametrize("jit_compile", [True, False])
def test_the_users_choice_is_kept(jit_compile):
    for precision, flags in (("bfloat16", AVX512_BF16), ("float32", AVX2)):
        assert xla_choice.use_xla(jit_compile, precision, ["CPU"], flags) == (
            jit_compile,
            f"config.jit_compile={jit_compile}",
        )


def test_cpu_flags_reads_the_first_processor(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(
        "processor\t: 0\nvendor_id\t: AuthenticAMD\nflags\t\t: fpu avx2 avx512f avx512_bf16\n\n"
        "processor\t: 1\nflags\t\t: fpu\n"
    )
    assert xla_choice.cpu_flags(str(cpuinfo)) == {"fpu", "avx2", "avx512f", "avx512_bf16"}
    assert xla_choice.cpu_flags(str(tmp_path / "missing")) == frozenset()


def test_the_default_is_none_and_a_non_boolean_is_refused():
    config = demo.get_config("pretrain")
    assert config.jit_compile is None
    config_checks.check(config)
    for value in (True, False):
        config.jit_compile = value
        config_checks.check(config)
    config.jit_compile = None
    with pytest.raises(TypeError):  # ml_collections keeps the field's type: a string never reaches the run
        config.jit_compile = "auto"


def test_the_tf_engine_builds_the_step_it_chose(tmp_path, monkeypatch, caplog):
    built = []
    original = tf_step.build_train_step
    monkeypatch.setattr(
        tf_step, "build_train_step", lambda *a, **k: built.append(k["jit_compile"]) or original(*a, **k)
    )
    monkeypatch.setattr(xla_choice, "cpu_flags", lambda: AVX512_BF16)
    config = tiny_recipe_config(jit_compile=None, precision="bfloat16", total_steps=1, checkpoint_every=1)
    config.dataset.eval_split = ""
    with caplog.at_level(logging.INFO, logger="recipes"):
        train.train_and_evaluate(config, str(tmp_path / "bf16"))
    assert built == [False]
    assert any(
        "training step without XLA: bfloat16 on a CPU with avx512_bf16" in r.getMessage() for r in caplog.records
    )
    monkeypatch.setattr(xla_choice, "cpu_flags", lambda: AVX2)
    config.precision = "float32"
    train.train_and_evaluate(config, str(tmp_path / "fp32"))
    assert built == [False, True]


def test_the_check_takes_none_only_where_it_is_allowed():
    from keras_vit.utils import validate

    assert validate.boolean("config.jit_compile", None, allow_none=True) is None
    assert validate.boolean("config.jit_compile", False, allow_none=True) is False
    with pytest.raises(ValueError, match=r"config.jit_compile must be True or False, or None, got 'auto' \(str\)"):
        validate.boolean("config.jit_compile", "auto", allow_none=True)
    with pytest.raises(ValueError, match=r"config.restart must be True or False, got None"):
        validate.boolean("config.restart", None)
