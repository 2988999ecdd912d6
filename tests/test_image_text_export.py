"""An image-text model's two towers exported (`hub_export.image_text.export_image_text`) and run in their runtimes:
onnxruntime and TensorFlow's SavedModel loader give each tower's embedding of `transformers`' own fixtures
(tests/fixtures/transformers_clip: a CLIP with a `tokenizer.json`, a SigLIP with a SentencePiece vocabulary and a
logit bias), and the similarity logits recomputed from them as metadata.json says equal `transformers`' own
`logits_per_image`; the tokenizer's files travel with the text tower; what is not an image-text model, another
format, or a folder that is not an earlier export are refused and left alone."""

import json
import os

import numpy as np
import pytest

import keras_vit
from conftest import ROOT
from hub_export.image_text import export_image_text

FIXTURES = os.path.join(ROOT, "tests", "fixtures", "transformers_clip")


def _runtime(path: str):
    """inputs -> outputs of an exported tower in its runtime, whatever its input's dtype."""
    if path.endswith(".onnx"):
        import onnxruntime

        session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
        name = session.get_inputs()[0].name
        return lambda x: session.run(None, {name: x})[0]
    import tensorflow as tf

    serve = tf.saved_model.load(path).signatures["serving_default"]
    name = next(iter(serve.structured_input_signature[1]))
    return lambda x: list(serve(**{name: tf.constant(x)}).values())[0].numpy()


def _normalize(x):
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


@pytest.mark.parametrize("fmt", ["onnx", "saved_model"])
@pytest.mark.parametrize("name", ["clip_eos", "siglip_spiece"])
def test_both_towers_run_in_their_runtime_with_transformers_logits(tmp_path, name, fmt):
    folder = os.path.join(FIXTURES, name)
    model = keras_vit.load_image_text(folder)
    out = export_image_text(model, str(tmp_path / "export"), format=fmt)
    meta = json.load(open(os.path.join(out, "metadata.json")))
    ref = np.load(os.path.join(folder, "reference.npz"))
    images, ids = ref["images"].astype("float32"), ref["token_ids"].astype("int32")
    image = _runtime(os.path.join(out, meta["image"]["file"]))(images)
    text = _runtime(os.path.join(out, meta["text"]["file"]))(ids)
    np.testing.assert_allclose(_normalize(image), ref["image_embeds"], atol=1e-5)
    np.testing.assert_allclose(_normalize(text), ref["text_embeds"], atol=1e-5)
    logits = np.exp(meta["logit_scale"]) * _normalize(image) @ _normalize(text).T
    logits = logits + (meta["logit_bias"] if meta["logit_bias"] is not None else 0.0)
    np.testing.assert_allclose(logits, ref["logits_per_image"], atol=1e-4)
    assert (meta["logit_bias"] is not None) == name.startswith("siglip")
    tokenizer = meta["text"]["tokenizer"]
    assert tokenizer["kind"] == ("sentencepiece" if name == "siglip_spiece" else "tokenizer.json")
    for file in tokenizer["files"]:  # byte for byte the repository's
        assert open(os.path.join(out, "text", file), "rb").read() == open(os.path.join(folder, file), "rb").read()
    assert meta["text"]["context_length"] == ids.shape[1]


def test_what_it_cannot_export_is_refused_and_other_folders_are_left_alone(tmp_path):
    model = keras_vit.load_image_text(os.path.join(FIXTURES, "clip_eos"))
    with pytest.raises(ValueError, match="not a keras_vit.ImageTextModel"):
        export_image_text(model.image_model, str(tmp_path / "a"))
    with pytest.raises(ValueError, match="one of saved_model, onnx"):
        export_image_text(model, str(tmp_path / "a"), format="litert")
    assert not (tmp_path / "a").exists()
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    with pytest.raises(FileExistsError, match="not an earlier output of ours"):
        export_image_text(model, str(mine), overwrite=True)
    assert (mine / "notes.txt").read_text() == "keep me"
    out = export_image_text(model, str(tmp_path / "export"))
    with pytest.raises(FileExistsError, match="overwrite=True"):
        export_image_text(model, out)
    assert export_image_text(model, out, overwrite=True) == out


_ON_BACKEND = r"""
import sys
sys.modules["tensorflow"] = None  # import tensorflow fails: ONNX is written without it
import json, os, tempfile, numpy as np, keras_vit, onnxruntime
from hub_export.image_text import export_image_text
folder = sys.argv[1]
out = export_image_text(keras_vit.load_image_text(folder), os.path.join(tempfile.mkdtemp(), "x"), format="onnx")
meta = json.load(open(os.path.join(out, "metadata.json")))
ref = np.load(os.path.join(folder, "reference.npz"))
def run(tower, x):
    session = onnxruntime.InferenceSession(os.path.join(out, meta[tower]["file"]), providers=["CPUExecutionProvider"])
    y = session.run(None, {session.get_inputs()[0].name: x})[0]
    return y / np.linalg.norm(y, axis=-1, keepdims=True)
print(json.dumps({
    "image": float(np.abs(run("image", ref["images"].astype("float32")) - ref["image_embeds"]).max()),
    "text": float(np.abs(run("text", ref["token_ids"].astype("int32")) - ref["text_embeds"]).max()),
}))
"""


@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_onnx_towers_are_written_on_jax_and_torch_without_tensorflow(backend):
    from conftest import run_on_backend

    if backend == "jax":
        pytest.importorskip("jax2onnx")
    out = run_on_backend(_ON_BACKEND, backend, os.path.join(FIXTURES, "siglip_spiece"), timeout=600)
    assert max(out.values()) <= 1e-5, out


def test_the_export_command_writes_both_towers_and_refuses_image_flags(tmp_path, capsys):
    from hub_export.__main__ import main

    folder = os.path.join(FIXTURES, "clip_eos")
    out = tmp_path / "export"
    assert main([f"--weights={folder}", "--image_text", f"--out={out}"]) == 0
    meta = json.load(open(out / "metadata.json"))
    assert meta["format"] == "onnx" and meta["source"] == folder and (out / "text" / "model.onnx").exists()
    for flags, message in (
        (["--format=litert"], "saved_model or onnx, not 'litert'"),
        (["--variant=classification"], "--variant do not apply"),
        (["--quantize=int8"], "--quantize do not apply"),
    ):
        assert main([f"--weights={folder}", "--image_text", f"--out={tmp_path / 'x'}", *flags]) == 2
        assert message in capsys.readouterr().err
    assert main([f"--weights={folder}", "--image_text", f"--out={out}"]) == 2  # exists, no --overwrite
    assert "--overwrite" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()
