"""Text embeddings of a file of texts (`python -m keras_vit.inference captions.txt --texts`,
`keras_vit.analysis.text_inference`): with a tiny `CLIPModel` written by transformers
(tests/fixtures/transformers_clip), the embeddings equal transformers' own `text_embeds`; every format reads back
with its texts (commas, quotes, tabs, emoji, the empty text); a killed run resumed ends with the files an
uninterrupted run writes; other texts or settings in the same output are refused by name and change nothing; bad
input is refused before anything is written; JAX and PyTorch, with TensorFlow made to fail to import, write the same
embeddings."""

import json
import os

import numpy as np
import pytest

import keras_vit
from conftest import ROOT
from keras_vit.analysis import inference, shards, text_inference

FOLDER = os.path.join(ROOT, "tests", "fixtures", "transformers_clip", "clip_eos")
TEXTS = json.load(open(os.path.join(FOLDER, "tokenizer_battery.json")))["texts"]
LINES = [t for t in TEXTS if "\n" not in t and "\r" not in t] + ['a "quoted", comma, text', "\ttabbed"]


@pytest.fixture(scope="module")
def model():
    return keras_vit.load_image_text(FOLDER)


def _file(tmp_path, lines, name="texts.txt", ending="\n"):
    path = tmp_path / name
    path.write_bytes("".join(line + ending for line in lines).encode("utf-8"))
    return str(path)


def _snapshot(folder):
    return {name: (folder / name).read_bytes() for name in sorted(os.listdir(folder))}


def test_the_embeddings_are_transformers_text_embeds(model, tmp_path):
    """transformers' normalised `text_embeds` of its first four battery texts (tokenized by its own tokenizer)."""
    reference = np.load(os.path.join(FOLDER, "reference.npz"))["text_embeds"]
    out = tmp_path / "out"
    text_inference.run_text_inference(model, _file(tmp_path, TEXTS[:4]), str(out), fmt="npy", l2_normalize=True)
    got = shards.read_output(str(out))
    assert list(got["text"]) == TEXTS[:4]
    np.testing.assert_allclose(got["embedding"], reference, atol=1e-5)


@pytest.mark.parametrize("fmt", ["parquet", "npy", "csv"])
def test_every_format_reads_back_with_its_texts(model, tmp_path, fmt):
    want = np.asarray(model.encode_text(model.text_preprocessor()(LINES), normalize=False))
    out = tmp_path / "out"
    manifest = text_inference.run_text_inference(
        model, _file(tmp_path, LINES, ending="\r\n"), str(out), fmt=fmt, shard_size=4, batch_size=3
    )
    assert manifest["complete"] and len(manifest["shards"]) == -(-len(LINES) // 4)
    got = shards.read_output(str(out))
    assert list(got["text"]) == LINES and got["bad"] == []
    np.testing.assert_allclose(got["embedding"], want, atol=1e-5)


def test_a_killed_run_resumes_to_the_uninterrupted_files_and_other_inputs_are_refused(model, tmp_path, monkeypatch):
    texts = _file(tmp_path, LINES)
    whole = tmp_path / "whole"
    text_inference.run_text_inference(model, texts, str(whole), fmt="csv", shard_size=3)
    killed = tmp_path / "killed"
    writes = []
    real = shards.write_manifest

    def dies_after_two_shards(directory, manifest):
        real(directory, manifest)
        writes.append(1)
        if len(writes) == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(shards, "write_manifest", dies_after_two_shards)
    with pytest.raises(KeyboardInterrupt):
        text_inference.run_text_inference(model, texts, str(killed), fmt="csv", shard_size=3)
    monkeypatch.setattr(shards, "write_manifest", real)
    assert len(shards.read_manifest(str(killed))["shards"]) == 2
    text_inference.run_text_inference(model, texts, str(killed), fmt="csv", shard_size=3)
    assert _snapshot(killed) == _snapshot(whole)
    before = _snapshot(killed)
    edited = _file(tmp_path, LINES[:-1] + ["another last text"], name="edited.txt")
    for call, field in (
        (lambda: text_inference.run_text_inference(model, edited, str(killed), fmt="csv", shard_size=3), "source"),
        (lambda: text_inference.run_text_inference(model, texts, str(killed), fmt="csv", shard_size=2), "shard_size"),
        (
            lambda: text_inference.run_text_inference(
                model, texts, str(killed), fmt="csv", shard_size=3, l2_normalize=True
            ),
            "l2_normalize",
        ),
    ):
        with pytest.raises(ValueError, match=field):
            call()
    assert _snapshot(killed) == before


def test_bad_input_is_refused_before_anything_is_written(model, tmp_path):
    out = tmp_path / "out"
    bad_bytes = tmp_path / "latin1.txt"
    bad_bytes.write_bytes("café\n".encode("latin-1"))
    with pytest.raises(ValueError, match="is not UTF-8 text"):
        text_inference.run_text_inference(model, str(bad_bytes), str(out))
    (tmp_path / "empty.txt").write_text("")
    with pytest.raises(ValueError, match="holds no texts"):
        text_inference.run_text_inference(model, str(tmp_path / "empty.txt"), str(out))
    with pytest.raises(ValueError, match="holds a line break"):
        text_inference.run_text_inference(model, ["one", "two\nthree"], str(out))
    with pytest.raises(TypeError, match="not a str"):
        text_inference.run_text_inference(model, ["one", 2], str(out))
    with pytest.raises(TypeError, match="image-text model"):
        text_inference.run_text_inference(model.image_model, ["one"], str(out))
    with pytest.raises(ValueError, match="batch_size"):
        text_inference.run_text_inference(model, ["one"], str(out), batch_size=0)
    assert not out.exists()


def test_the_command_writes_text_embeddings_and_refuses_image_flags(tmp_path, capsys):
    texts = _file(tmp_path, LINES)
    out = tmp_path / "out"
    code = inference.main([texts, "--texts", f"--weights={FOLDER}", f"--output={out}", "--format=csv"])
    assert code == 0 and f"{len(LINES)} text embedding(s) written" in capsys.readouterr().out
    assert list(shards.read_output(str(out))["text"]) == LINES
    for flag in ("--features=pooled", "--labels=imagenet", "--exif_transpose", "--model=ViT-B/16"):
        code = inference.main([texts, "--texts", f"--weights={FOLDER}", f"--output={tmp_path / 'x'}", flag])
        assert code == 2 and "do not apply to texts" in capsys.readouterr().err
    code = inference.main(
        [str(tmp_path / "missing.txt"), "--texts", f"--weights={FOLDER}", f"--output={tmp_path / 'x'}"]
    )
    assert code == 2 and "is not a file of texts" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


_ON_BACKEND = r"""
import sys
sys.modules["tensorflow"] = None  # import tensorflow fails: JAX and PyTorch users need none
import json, numpy as np, keras_vit
from keras_vit.analysis import shards, text_inference
model = keras_vit.load_image_text(sys.argv[1])
text_inference.run_text_inference(model, sys.argv[2], sys.argv[3], fmt="npy", shard_size=5, batch_size=4)
got = shards.read_output(sys.argv[3])
print(json.dumps({"texts": list(got["text"]), "embedding": got["embedding"].tolist()}))
"""


@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_jax_and_torch_write_the_same_embeddings_without_tensorflow(model, tmp_path, backend):
    from conftest import run_on_backend

    texts = _file(tmp_path, LINES)
    out = run_on_backend(_ON_BACKEND, backend, FOLDER, texts, str(tmp_path / "out"))
    want = np.asarray(model.encode_text(model.text_preprocessor()(LINES), normalize=False))
    assert out["texts"] == LINES
    np.testing.assert_allclose(np.asarray(out["embedding"]), want, atol=1e-5)


def test_image_embeddings_of_a_folder_are_the_image_towers_and_the_modes_are_kept_apart(model, tmp_path, capsys):
    """`--features=embedding`: an image-text model's image embeddings of a folder (what its text embeddings are
    compared with), equal to `encode_image` on the images as the command reads them (8-bit, as timm does) and its
    data config prepares them; an image model's
    features asked of an image-text model, or the embedding of an image model, are refused by name."""
    from PIL import Image
    from skimage import data

    from keras_vit.analysis.image_sources import read_pixels
    from keras_vit.analysis.images import preprocess_image

    photos = tmp_path / "photos"
    photos.mkdir()
    for name in ("astronaut", "chelsea", "coffee"):
        Image.fromarray(getattr(data, name)()).save(photos / f"{name}.png")
    out = tmp_path / "out"
    code = inference.main(
        [str(photos), f"--weights={FOLDER}", f"--output={out}", "--features=embedding", "--format=npy"]
    )
    assert code == 0, capsys.readouterr().err
    got = shards.read_output(str(out))
    tower = model.image_model
    pixels = np.stack(
        [
            preprocess_image(read_pixels(str(photos / name), False), tower.data_config, tuple(tower.base_image_size))
            for name in got["file"]
        ]
    )
    np.testing.assert_allclose(got["embedding"], np.asarray(model.encode_image(pixels, normalize=False)), atol=1e-5)
    assert sorted(got["file"]) == ["astronaut.png", "chelsea.png", "coffee.png"]
    code = inference.main(
        [str(photos), f"--weights={FOLDER}", f"--output={tmp_path / 'x'}", "--features=embedding", "--model=ViT-B/16"]
    )
    assert code == 2 and "--model does not apply" in capsys.readouterr().err
    with pytest.raises(ValueError, match="an image-text model writes its image embedding"):
        inference.run_inference(model, str(photos), str(tmp_path / "x"), features="pooled")
    with pytest.raises(ValueError, match="keras_vit.load_image_text"):
        inference.run_inference(tower, str(photos), str(tmp_path / "x"), features="embedding")
    assert not (tmp_path / "x").exists()
