"""The mapped `.safetensors` reader: the same values as the `safetensors` package's own numpy loader, and
nothing it returns still points into the file."""

import os
import shutil

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from conftest import FIXTURES
from keras_vit.weights import safetensors_read
from keras_vit.weights.timm.state_dict import read_timm

TIMM = os.path.join(FIXTURES, "torch_reference", "timm_vit.safetensors")


def test_mapped_tensors_equal_the_safetensors_loader_in_every_dtype(tmp_path):
    reference = load_file(TIMM)
    mixed = {k: v.astype("float16") if v.ndim == 1 else v for k, v in reference.items()}
    mixed["counts"] = np.arange(7, dtype="int64")
    save_file(mixed, str(tmp_path / "mixed.safetensors"))
    with safetensors_read.mapped_tensors(str(tmp_path / "mixed.safetensors")) as (tensors, whole):
        assert sorted(tensors) == sorted(mixed)
        for name, value in mixed.items():
            assert tensors[name].dtype == value.dtype and tensors[name].shape == value.shape, name
            np.testing.assert_array_equal(tensors[name], value)
            assert not tensors[name].flags.writeable  # a view of the file: read-only


def test_loaded_params_own_their_data_after_the_file_is_gone(tmp_path):
    path = str(tmp_path / "vit.safetensors")
    shutil.copy(TIMM, path)
    params = read_timm(path, num_heads=2)[0]
    with safetensors_read.mapped_tensors(path) as (_, whole):
        assert not any(np.may_share_memory(v, whole) for v in params.values())
    assert all(v.flags.writeable for v in params.values())
    expected = {k: np.array(v) for k, v in params.items()}
    with open(path, "r+b") as f:  # the file rewritten in place: what was read must not change
        f.write(b"\x00" * os.path.getsize(path))
    os.remove(path)
    for key, value in expected.items():
        np.testing.assert_array_equal(params[key], value, err_msg=key)
    reference = load_file(TIMM)
    np.testing.assert_array_equal(params["embedding/bias"], reference["patch_embed.proj.bias"])
    np.testing.assert_array_equal(
        params["Transformer/encoderblock_0/MlpBlock_3/Dense_0/kernel"], reference["blocks.0.mlp.fc1.weight"].T
    )


def test_an_empty_or_truncated_file_is_refused_by_name(tmp_path):
    (tmp_path / "empty.safetensors").write_bytes(b"")
    with open(TIMM, "rb") as f:
        (tmp_path / "cut.safetensors").write_bytes(f.read(os.path.getsize(TIMM) // 2))
    for name in ("empty.safetensors", "cut.safetensors"):
        with pytest.raises(ValueError, match=f"{name}' is not a readable .safetensors file"):
            with safetensors_read.mapped_tensors(str(tmp_path / name)):
                pass
