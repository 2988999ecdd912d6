"""config.precision: bf16 compute with float32 variables trains; a bad value fails cleanly."""

import os

import keras
import numpy as np
import pytest

from recipes import train
from recipes.configs import demo


def _tiny(precision: str):
    c = demo.get_config("pretrain")
    c.model.update(hidden_size=32, mlp_dim=64, num_layers=1, num_heads=2, patch_size=8)
    c.update(batch_size=16, total_steps=4, log_every=2, checkpoint_every=4, precision=precision)
    c.dataset.eval_split = ""
    return c


def test_bfloat16_trains_with_float32_variables(tmp_path):
    summary = train.train_and_evaluate(_tiny("bfloat16"), str(tmp_path))
    assert np.isfinite(summary["final_train"]["loss"])
    assert keras.mixed_precision.global_policy().name == "float32"  # restored after the build
    model = keras.models.load_model(summary["model"], compile=False)
    assert {v.dtype for v in model.weights} == {"float32"}
    block = next(layer for layer in model._flatten_layers() if type(layer).__name__ == "EncoderBlock")
    assert block.dtype_policy.compute_dtype == "bfloat16"
    out = model(np.zeros((1, 32, 32, 3), "float32"))
    assert np.all(np.isfinite(keras.ops.convert_to_numpy(keras.ops.cast(out, "float32"))))


def test_unknown_precision_names_the_field_and_touches_nothing(tmp_path):
    workdir = tmp_path / "run"
    with pytest.raises(ValueError, match=r"config.precision='float16'.*float32, bfloat16"):
        train.train_and_evaluate(_tiny("float16"), str(workdir))
    assert not os.path.exists(workdir)
