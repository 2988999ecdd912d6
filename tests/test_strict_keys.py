"""Every tensor of a source is mapped, or the load is refused naming it and changing nothing: an unmapped
qk-norm or LayerScale tensor must never load as a plain ViT with other logits. bfloat16 safetensors are
upcast exactly. Fixtures: the timm and transformers files made by those frameworks (tests/fixtures)."""

import json
import os
import shutil
import struct

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

import keras_vit

from conftest import ROOT

REF = os.path.join(ROOT, "tests", "fixtures", "torch_reference")
PLANTS = {
    "blocks.0.attn.k_norm.bias": "qk-norm",
    "blocks.1.attn.q_norm.weight": "qk-norm",
    "blocks.0.mlp.mystery": None,
}
HF_PLANTS = {"vit.encoder.layer.0.layer_scale1.lambda1": "LayerScale", "vit.encoder.layer.1.mystery.weight": None}


def _target():
    model = keras_vit.load_model(os.path.join(REF, "timm_vit.safetensors"), num_heads=2)
    return model, [w.copy() for w in model.get_weights()]


def _unchanged(model, before):
    for a, b in zip(before, model.get_weights()):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("key", sorted(PLANTS))
def test_an_unmapped_tensor_in_a_timm_file_is_refused_by_name(tmp_path, key):
    sd = load_file(os.path.join(REF, "timm_vit.safetensors"))
    sd[key] = np.ones(sd["norm.weight"].shape, "float32")
    path = str(tmp_path / "planted.safetensors")
    save_file(sd, path)
    model, before = _target()
    message = rf"does not map, e\.g\. '{key}'" + (rf" \({PLANTS[key]}" if PLANTS[key] else "")
    for load in (lambda: keras_vit.load_model(path, num_heads=2), lambda: keras_vit.load_weights(model, path)):
        with pytest.raises(ValueError, match=message):
            load()
    _unchanged(model, before)


@pytest.mark.parametrize("key", sorted(HF_PLANTS))
def test_an_unmapped_tensor_in_a_transformers_directory_is_refused_by_name(tmp_path, key):
    folder = tmp_path / "hf"
    shutil.copytree(os.path.join(REF, "hf_vit"), folder)
    sd = load_file(str(folder / "model.safetensors"))
    width = next(v for k, v in sd.items() if k.endswith("layernorm.weight")).shape
    sd[key] = np.ones(width, "float32")
    save_file(sd, str(folder / "model.safetensors"))
    reference = keras_vit.load_model(os.path.join(REF, "hf_vit"))
    before = [w.copy() for w in reference.get_weights()]
    shown = key[len("vit.") :]
    with pytest.raises(ValueError, match=rf"e\.g\. '{shown}'" + (r" \(LayerScale" if HF_PLANTS[key] else "")):
        keras_vit.load_weights(reference, str(folder))
    _unchanged(reference, before)


def test_an_unknown_key_in_an_official_npz_is_refused_by_name(tmp_path):
    model = keras_vit.VisionTransformer(
        patch_size=8, hidden_size=16, mlp_dim=16, num_heads=2, num_layers=1, input_shape=(16, 16, 3), classes=3
    )
    keras_vit.save_npz(model, str(tmp_path / "m.npz"))
    params = dict(np.load(tmp_path / "m.npz"))
    params["Transformer/encoderblock_0/LayerScale_0/scale"] = np.ones(16, "float32")
    np.savez(tmp_path / "planted.npz", **params)
    before = [w.copy() for w in model.get_weights()]
    with pytest.raises(ValueError, match="another ViT family.*LayerScale: checkpoint True, model False"):
        keras_vit.load_weights(model, str(tmp_path / "planted.npz"))
    _unchanged(model, before)


def _write_bfloat16(sd: dict, path: str) -> dict:
    """A bfloat16 .safetensors written by hand from the format's specification (8-byte header length, JSON
    header, raw data), independently of the reader; returns the float32 values the file holds exactly."""
    header, blobs, offset, exact = {}, [], 0, {}
    for key, value in sd.items():
        bits = np.ascontiguousarray(value, "<f4").view("<u4") >> 16
        blob = bits.astype("<u2").tobytes()
        header[key] = {"dtype": "BF16", "shape": list(value.shape), "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
        exact[key] = (bits << 16).astype("<u4").view("<f4")
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
    return exact


def test_bfloat16_safetensors_are_upcast_exactly(tmp_path):
    from keras_vit.weights.timm import reader as timm_reader

    sd = load_file(os.path.join(REF, "timm_vit.safetensors"))
    exact = _write_bfloat16(sd, str(tmp_path / "bf16.safetensors"))
    model = keras_vit.load_model(str(tmp_path / "bf16.safetensors"), num_heads=2)
    want = timm_reader.timm_to_official(exact, 2)
    from keras_vit.weights import official

    got = official.model_params(model)
    for key, value in want.items():
        np.testing.assert_array_equal(got[key].reshape(value.shape), value, err_msg=key)
