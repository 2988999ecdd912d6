"""big_vision's SigLIP `.npz` (`keras_vit.load_big_vision_siglip`): a tiny file in big_vision's layout, read by
open_clip's own converter into open_clip's model (tests/fixtures/open_clip/big_vision_siglip, written by
tools/make_open_clip_fixtures.py), loads with open_clip's image and text features and logits, from blocks stored
one per key and stacked under a train state's `params/`; what the file does not state (the architecture, the
tokenizer, the preprocessing) comes from the caller or open_clip's SigLIP defaults; a tensor too many or too few,
another model's config, an unknown or unbuilt model, a text head the config cannot hold are refused by name."""

import json
import os

import keras
import numpy as np
import pytest

import keras_vit
from conftest import FIXTURES, ROOT

HERE = os.path.join(FIXTURES, "open_clip", "big_vision_siglip")


def _config() -> dict:
    with open(os.path.join(FIXTURES, "open_clip", "siglip_tiny", "open_clip_config.json")) as f:
        return json.load(f)["model_cfg"]  # the architecture the fixture script gave open_clip


@pytest.mark.parametrize("name", ["plain.npz", "scanned.npz"])
def test_both_layouts_load_with_open_clips_outputs(name):
    ref = np.load(os.path.join(HERE, "reference.npz"))
    model = keras_vit.load_big_vision_siglip(os.path.join(HERE, name), _config())
    images = ref["images_nchw"].transpose(0, 2, 3, 1)
    image = keras.ops.convert_to_numpy(model.encode_image(images, normalize=False))
    text = keras.ops.convert_to_numpy(model.encode_text(ref["ids"], normalize=False))
    logits = keras.ops.convert_to_numpy(model((images, ref["ids"])))
    np.testing.assert_allclose(image, ref["image_features"], atol=1e-5, rtol=0)
    np.testing.assert_allclose(text, ref["text_features"], atol=1e-5, rtol=0)
    np.testing.assert_allclose(logits, ref["logits"], atol=1e-4, rtol=0)
    # the file states no preprocessing: open_clip's SigLIP defaults
    dc = model.image_model.data_config
    assert tuple(dc.mean) == (0.5, 0.5, 0.5) and tuple(dc.std) == (0.5, 0.5, 0.5)
    assert dc.crop_mode == "squash" and dc.interpolation == "bicubic"
    with pytest.raises(ValueError, match="names no vocabulary: pass tokenizer="):
        model.text_preprocessor()


def test_a_named_tokenizer_folder_is_used():
    spiece = os.path.join(ROOT, "tests", "fixtures", "transformers_clip", "siglip_spiece")
    model = keras_vit.load_big_vision_siglip(os.path.join(HERE, "plain.npz"), _config(), tokenizer=spiece)
    ids = model.text_preprocessor()(["a photo of a cat"])
    expected = keras_vit.SentencePieceTokenizer(spiece, model.text_model.context_length)(["a photo of a cat"])
    np.testing.assert_array_equal(ids, expected)
    with pytest.raises(ValueError, match="holds neither tokenizer.json nor spiece.model"):
        keras_vit.load_big_vision_siglip(os.path.join(HERE, "plain.npz"), _config(), tokenizer=HERE)


def _edited(tmp_path, change):
    with np.load(os.path.join(HERE, "plain.npz")) as f:
        w = {k: f[k] for k in f.files}
    change(w)
    path = str(tmp_path / "edited.npz")
    np.savez(path, **w)
    return path


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda w: w.update({"img/Transformer/extra/kernel": np.zeros(3, "float32")}), "img/Transformer/extra/kernel"),
        (lambda w: w.pop("txt/Encoder_0/encoder_norm/bias"), "no tensor 'txt/Encoder_0/encoder_norm/bias'"),
        (lambda w: w.pop("txt/Embed_0/embedding"), "not a big_vision image-text checkpoint"),
    ],
)
def test_every_tensor_is_mapped_or_the_load_is_refused(tmp_path, change, message):
    with pytest.raises(ValueError, match=message):
        keras_vit.load_big_vision_siglip(_edited(tmp_path, change), _config())


def test_what_the_file_cannot_say_is_asked_for():
    path = os.path.join(HERE, "plain.npz")
    with pytest.raises(ValueError, match="close names: ViT-B-16-SigLIP"):
        keras_vit.load_big_vision_siglip(path, "ViT-B-16-SigLP")
    with pytest.raises(ValueError, match="model='RN50'"):
        keras_vit.load_big_vision_siglip(path, "RN50")
    with pytest.raises(ValueError, match="text head .* no"):
        keras_vit.load_big_vision_siglip(path, {**_config(), "text_cfg": {**_config()["text_cfg"], "proj_bias": False}})
    with pytest.raises(ValueError, match="load_big_vision_siglip"):
        keras_vit.load_image_text(path)
    for layout in ("plain.npz", "scanned.npz"):  # the image loader names the two-tower loader
        with pytest.raises(ValueError, match="big_vision image-text checkpoint .*load_big_vision_siglip"):
            keras_vit.load_model(os.path.join(HERE, layout))
    # the full-size architecture by name: the tiny file's shapes are not its (refused, naming a tensor)
    with pytest.raises(ValueError, match="hold 2 block.*config 12.*Nothing was loaded"):
        keras_vit.load_big_vision_siglip(path, "ViT-B-16-SigLIP")


def test_save_open_clip_writes_the_state_open_clips_converter_makes(tmp_path):
    """The model written back in open_clip's layout holds, tensor for tensor, the state dict open_clip's own
    converter made of the file, and the config it was built from."""
    from safetensors.numpy import load_file

    model = keras_vit.load_big_vision_siglip(os.path.join(HERE, "scanned.npz"), _config())
    out = keras_vit.save_open_clip(model, tmp_path / "open_clip")
    ours = load_file(os.path.join(out, "open_clip_model.safetensors"))
    theirs = load_file(os.path.join(HERE, "open_clip_state.safetensors"))
    assert sorted(ours) == sorted(theirs)
    for key, value in theirs.items():
        np.testing.assert_allclose(ours[key].reshape(value.shape), value, atol=1e-7, rtol=0, err_msg=key)
        assert ours[key].shape == value.shape, key
    with open(os.path.join(out, "open_clip_config.json")) as f:
        written = json.load(f)
    assert written["model_cfg"] == _config() and written["preprocess_cfg"]["resize_mode"] == "squash"
    again = keras_vit.load_open_clip(out)  # and it reads back as open_clip's folder
    ref = np.load(os.path.join(HERE, "reference.npz"))
    text = keras.ops.convert_to_numpy(again.encode_text(ref["ids"], normalize=False))
    np.testing.assert_allclose(text, ref["text_features"], atol=1e-5, rtol=0)
