"""docs/own-data.md runs as written: the recipes command, the `model.fit` snippet and the LoRA snippets, on a
generated image folder, with a tiny pretrained model standing in for the AugReg download; the batch-inference
commands, and the image-text ones with a tiny CLIPModel written by transformers standing in for the SigLIP
download."""

import os
import shlex
import sys

import keras
import numpy as np
import pytest

import keras_vit
from conftest import ROOT, python_run
from doc_blocks import blocks, substitute
from image_folders import write_folder

DOC = os.path.join(ROOT, "docs", "own-data.md")
TINY = dict(patch_size=8, hidden_size=32, mlp_dim=64, num_heads=4, num_layers=2)


@pytest.fixture(scope="module")
def stand_ins(tmp_path_factory):
    """(folder of images, a tiny 'pretrained' .npz with a 7-class head, so the docs' new head is re-initialised)."""
    tmp = tmp_path_factory.mktemp("own_data")
    write_folder(str(tmp / "photos"), per_class=12, corrupt=0)
    base = keras_vit.VisionTransformer(**TINY, input_shape=(32, 32, 3), classes=7)
    rng = np.random.default_rng(0)
    for v in base.weights:
        v.assign((0.05 * rng.standard_normal(v.shape) + (1.0 if "gamma" in v.path else 0.0)).astype("float32"))
    return tmp, keras_vit.save_npz(base, str(tmp / "base.npz"))


def test_the_page_has_the_blocks_this_test_runs():
    assert [lang for lang, _ in blocks(DOC) if lang in ("bash", "python")] == [
        "bash",
        "python",
        "python",
        "python",
        "bash",
        "bash",
    ]


def test_recipes_command_runs(stand_ins):
    tmp, npz = stand_ins
    code = [code for lang, code in blocks(DOC) if lang == "bash"][0]
    tiny = " ".join(f"--config.model.{k}={v}" for k, v in TINY.items())
    code = substitute(
        code,
        {
            "python -m": f"{sys.executable} -m",
            "folder:photos": f"folder:{tmp / 'photos'}",
            "--config.model.name=ViT-B/16": f"--config.model.name= {tiny}",
            "--config.init_weights=augreg_in21k": f"--config.init_weights={npz} --config.dataset.image_size=32 "
            "--config.batch_size=8 --config.total_steps=2 "
            "--config.optimizer.warmup_steps=1 --config.log_every=1",
            "--workdir=runs/photos": f"--workdir={tmp / 'runs' / 'photos'}",
        },
    )
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=ROOT, CUDA_VISIBLE_DEVICES="")
    args = shlex.split(code.replace("\\\n", " "))
    assert args[0] == sys.executable
    done = python_run(args[1:], cwd=ROOT, env=env, timeout=300)  # forked from this worker's interpreter

    assert done.returncode == 0, done.stderr[-3000:]
    run = tmp / "runs" / "photos"
    assert (run / "class_names.txt").read_text().split() == ["digit_0", "digit_1", "digit_2"]
    assert (run / "model.keras").exists() and (run / "dataset.json").exists()


def test_fit_and_lora_snippets_run(stand_ins, monkeypatch):
    tmp, npz = stand_ins
    monkeypatch.chdir(tmp)
    model_line = 'keras_vit.ViT_B16(weights="augreg_in21k", '
    tiny = f"keras_vit.load_model({npz!r}, **{TINY!r}, input_shape=(32, 32, 3), "
    namespace = {}
    fit, lora, reload = [code for lang, code in blocks(DOC) if lang == "python"]
    exec(
        substitute(
            fit, {model_line: tiny, "image_size=(224, 224)": "image_size=(32, 32)", "epochs = 10": "epochs = 2"}
        ),
        namespace,
    )
    assert len(namespace["history"].history["loss"]) == 2
    exec(substitute(lora, {model_line: tiny}), namespace)
    adapted = namespace["model"]
    assert adapted.lora_rank == 8 and os.path.getsize(tmp / "photos.lora.h5") < 100_000
    exec(substitute(reload, {'keras_vit.ViT_B16(weights="augreg_in21k", ': tiny}), namespace)
    images = np.random.default_rng(1).uniform(0, 255, (4, 32, 32, 3)).astype("float32")
    expected = adapted.predict(images, verbose=0)
    np.testing.assert_allclose(namespace["base"].predict(images, verbose=0), expected, atol=1e-5)
    reloaded = keras.models.load_model(tmp / "photos.keras")
    np.testing.assert_allclose(reloaded.predict(images, verbose=0), expected, atol=1e-5)


def _run_commands(code: str) -> None:
    """Runs each command of a bash block (lines joined at their backslashes) with this interpreter."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=ROOT, CUDA_VISIBLE_DEVICES="")
    for command in code.replace("\\\n", " ").strip().splitlines():
        args = shlex.split(command)
        assert args[0] == sys.executable
        done = python_run(args[1:], cwd=ROOT, env=env, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]


def test_inference_commands_run(stand_ins):
    tmp, npz = stand_ins
    code = [code for lang, code in blocks(DOC) if lang == "bash"][1]
    model = tmp / "runs" / "photos" / "model.keras"
    if not model.exists():  # the recipes test writes it; alone, this test makes its own
        model.parent.mkdir(parents=True, exist_ok=True)
        keras_vit.VisionTransformer(**TINY, input_shape=(32, 32, 3), classes=3).save(str(model))
    code = substitute(
        code,
        {
            "python -m": f"{sys.executable} -m",
            " photos ": f" {tmp / 'photos'} ",
            "runs/photos/": f"{tmp / 'runs' / 'photos'}/",
            "--weights=augreg_in21k --model=ViT-B/16": f"--weights={npz}",
            "--output=embeddings": f"--output={tmp / 'embeddings'}",
        },
    )
    _run_commands(code)
    from keras_vit.analysis.shards import read_output

    top = read_output(str(tmp / "runs" / "photos" / "predictions"))
    assert top["class_index"].shape == (3 * 15, 3) and not top["bad"]
    features = read_output(str(tmp / "embeddings"))["embedding"]
    assert features.dtype == np.float16 and features.shape == (3 * 15, 32)
    np.testing.assert_allclose(np.linalg.norm(features.astype("float32"), axis=1), 1.0, atol=2e-3)


def test_image_text_inference_commands_run(stand_ins):
    """Text embeddings of a captions file and image embeddings of the folder, comparable by a dot product."""
    tmp, _ = stand_ins
    code = [code for lang, code in blocks(DOC) if lang == "bash"][2]
    captions = tmp / "captions.txt"
    captions.write_text("a handwritten zero\na handwritten one\na handwritten two\n")
    code = substitute(
        code,
        {
            "python -m": f"{sys.executable} -m",
            " captions.txt ": f" {captions} ",
            " photos ": f" {tmp / 'photos'} ",
            "hf-hub:timm/ViT-B-16-SigLIP": os.path.join(ROOT, "tests", "fixtures", "transformers_clip", "clip_eos"),
            "--output=caption_index": f"--output={tmp / 'caption_index'}",
            "--output=photo_index": f"--output={tmp / 'photo_index'}",
        },
    )
    _run_commands(code)
    from keras_vit.analysis.shards import read_output

    texts, images = read_output(str(tmp / "caption_index")), read_output(str(tmp / "photo_index"))
    assert list(texts["text"]) == ["a handwritten zero", "a handwritten one", "a handwritten two"]
    assert images["embedding"].shape == (3 * 15, texts["embedding"].shape[1])
    cosines = images["embedding"] @ texts["embedding"].T  # unit vectors: cosine similarities
    assert np.all(np.abs(cosines) <= 1 + 1e-5)
