"""timm and Hugging Face `transformers` weights in and out, against logits those frameworks computed
themselves (tests/fixtures/torch_reference, made by tools/make_torch_fixtures.py from random weights)."""

import json
import os

import numpy as np
import pytest
from safetensors.numpy import load_file

import keras_vit
from conftest import FIXTURES

REF = os.path.join(FIXTURES, "torch_reference")
X = np.load(os.path.join(REF, "input.npy"))


def _logits(model):
    return model.predict(X, verbose=0)


def test_timm_safetensors_in():
    with pytest.raises(ValueError, match="does not say its number of heads and width 32 .* pass num_heads="):
        keras_vit.load_model(os.path.join(REF, "timm_vit.safetensors"))
    model = keras_vit.load_model(os.path.join(REF, "timm_vit.safetensors"), num_heads=2, classifier_activation=None)
    assert not model.gelu_approximate and model.vit_config.num_heads == 2 and model.classes == 5
    assert np.abs(_logits(model) - np.load(os.path.join(REF, "timm_vit_logits.npy"))).max() <= 1e-4


def test_transformers_directory_in():
    model = keras_vit.load_model(os.path.join(REF, "hf_vit"), classifier_activation=None)
    assert model.image_size == (32, 32) and model.pre_logits is None and not model.gelu_approximate
    assert np.abs(_logits(model) - np.load(os.path.join(REF, "hf_vit_logits.npy"))).max() <= 1e-4


def test_augreg_layout_npz_matches_timm_reading_it():
    """timm reads the AugReg-layout file (no pre_logits) with exact GELU; so must we, to match it."""
    path = os.path.join(REF, "augreg_layout.npz")
    model = keras_vit.load_model(path, classifier_activation=None, gelu_approximate=False)
    assert model.pre_logits is None
    reference = np.load(os.path.join(REF, "augreg_layout_timm_logits.npy"))
    assert np.abs(_logits(model) - reference).max() <= 1e-6  # measured 6e-8
    tanh = keras_vit.load_model(path, classifier_activation=None)  # the Flax default: ~2e-5 off timm here
    assert np.abs(_logits(tanh) - reference).max() > 5e-6


def test_timm_round_trip_reproduces_timm_state_dict_exactly(tmp_path):
    model = keras_vit.load_model(os.path.join(REF, "timm_vit.safetensors"), num_heads=2, classifier_activation=None)
    out = keras_vit.save_safetensors(model, tmp_path / "again.safetensors", layout="timm")
    theirs, ours = load_file(os.path.join(REF, "timm_vit.safetensors")), load_file(out)
    assert sorted(ours) == sorted(theirs)  # timm loads it with no missing or unexpected key
    for key in theirs:
        np.testing.assert_allclose(ours[key], theirs[key], rtol=0, atol=1e-7, err_msg=key)


def test_transformers_round_trip_reproduces_its_files(tmp_path):
    model = keras_vit.load_model(os.path.join(REF, "hf_vit"), classifier_activation=None)
    out = keras_vit.save_safetensors(model, tmp_path / "hf", layout="transformers")
    theirs, ours = (
        load_file(os.path.join(REF, "hf_vit", "model.safetensors")),
        load_file(os.path.join(out, "model.safetensors")),
    )
    assert sorted(ours) == sorted(theirs)
    for key in theirs:
        np.testing.assert_allclose(ours[key], theirs[key], rtol=0, atol=1e-7, err_msg=key)
    want = json.load(open(os.path.join(REF, "hf_vit", "config.json")))
    got = json.load(open(os.path.join(out, "config.json")))
    for field in (
        "model_type",
        "hidden_size",
        "num_hidden_layers",
        "num_attention_heads",
        "intermediate_size",
        "hidden_act",
        "image_size",
        "patch_size",
        "layer_norm_eps",
        "qkv_bias",
    ):
        assert got[field] == want[field], field
    again = keras_vit.load_model(out, classifier_activation=None)
    np.testing.assert_allclose(_logits(again), _logits(model), atol=1e-6)


def test_save_safetensors_refuses_what_the_target_cannot_hold(tmp_path):
    tiny = dict(patch_size=8, hidden_size=16, mlp_dim=32, num_heads=2, num_layers=1, input_shape=(32, 32, 3))
    with pytest.raises(ValueError, match="representation"):
        keras_vit.save_safetensors(
            keras_vit.VisionTransformer(**tiny, representation_size=8), tmp_path / "a.safetensors"
        )
    with pytest.raises(ValueError, match="classifier='gap'"):
        keras_vit.save_safetensors(
            keras_vit.VisionTransformer(**tiny, classifier="gap"), tmp_path / "h", layout="transformers"
        )
    with pytest.raises(ValueError, match="layout='onnx'"):
        keras_vit.save_safetensors(keras_vit.VisionTransformer(**tiny), tmp_path / "a.safetensors", layout="onnx")
    assert os.listdir(tmp_path) == []


def test_bad_safetensors_sources_change_nothing(tmp_path):
    model = keras_vit.load_model(os.path.join(REF, "timm_vit.safetensors"), num_heads=2, classifier_activation=None)
    before = [w.copy() for w in model.get_weights()]
    (tmp_path / "junk.safetensors").write_bytes(b"\x00" * 50)
    with pytest.raises(ValueError, match="junk.safetensors' is not a readable .safetensors file"):
        keras_vit.load_weights(model, tmp_path / "junk.safetensors")
    sd = load_file(os.path.join(REF, "timm_vit.safetensors"))
    del sd["blocks.1.mlp.fc2.bias"]
    from safetensors.numpy import save_file

    save_file(sd, str(tmp_path / "partial.safetensors"))
    with pytest.raises(ValueError, match="blocks.1.mlp.fc2.bias"):
        keras_vit.load_weights(model, tmp_path / "partial.safetensors")
    for a, b in zip(before, model.get_weights()):
        np.testing.assert_array_equal(a, b)


def test_root_only_hybrid_with_old_groupnorm_shapes_matches_timm():
    """AugReg's R+Ti/16 design (ResNet root only, then 8x8... here 2x2 patches at toy width) in the AugReg layout
    with (1, 1, 1, C) GroupNorm parameters, as timm's npz loader reads it."""
    model = keras_vit.load_model(
        os.path.join(REF, "augreg_r_ti_layout.npz"), classifier_activation=None, gelu_approximate=False
    )
    assert model.vit_config.resnet_layers == () and model.vit_config.effective_patch_size == 8
    x = np.load(os.path.join(REF, "augreg_r_ti_input.npy"))
    reference = np.load(os.path.join(REF, "augreg_r_ti_timm_logits.npy"))
    assert np.abs(model.predict(x, verbose=0) - reference).max() <= 1e-5  # measured 3e-7


def test_transformers_vit_model_pooler_is_the_representation_layer():
    model = keras_vit.load_model(os.path.join(REF, "hf_vit_model"))
    assert not model.include_top and model.representation_size == 32
    np.testing.assert_allclose(_logits(model), np.load(os.path.join(REF, "hf_vit_model_pooler.npy")), atol=1e-5)
