"""Writers own exactly what they wrote: a directory writer keeps a manifest and replaces a directory only when
it holds nothing else (a foreign entry is named and left alone); the temporary-file sweep takes only its own
marked temporaries of dead processes; calibration sets are checked before a LiteRT int8 export."""

import json
import os

import numpy as np
import pytest

import keras_vit
from keras_vit.utils import atomic

from conftest import python_run, ROOT

TINY = dict(patch_size=8, hidden_size=16, mlp_dim=16, num_heads=2, num_layers=1, input_shape=(16, 16, 3))


def test_transformers_directory_with_a_users_file_is_not_replaced(tmp_path):
    model = keras_vit.VisionTransformer(**TINY, classes=3)
    out = tmp_path / "hf"
    keras_vit.save_safetensors(model, str(out), layout="transformers")
    keras_vit.save_safetensors(model, str(out), layout="transformers")  # our own: replaced
    (out / "tokenizer.json").write_text("{}")  # what a user keeps beside a transformers config
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    with pytest.raises(FileExistsError, match="tokenizer.json"):
        keras_vit.save_safetensors(model, str(out), layout="transformers")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_a_downloaded_transformers_directory_is_never_replaced(tmp_path):
    out = tmp_path / "vit-base"
    out.mkdir()
    (out / "config.json").write_text(json.dumps({"model_type": "vit"}))
    (out / "preprocessor_config.json").write_text("{}")
    with pytest.raises(FileExistsError, match="config.json"):
        keras_vit.save_safetensors(keras_vit.VisionTransformer(**TINY, classes=3), str(out), layout="transformers")
    assert sorted(os.listdir(out)) == ["config.json", "preprocessor_config.json"]


def test_export_overwrite_keeps_a_file_the_user_added(tmp_path):
    from hub_export import export

    model = keras_vit.VisionTransformer(**TINY, classes=3)
    out = export(model, str(tmp_path / "onnx"), "classification", format="onnx")
    export(model, out, "classification", format="onnx", overwrite=True)  # only ours inside: replaced
    note = os.path.join(out, "notes.txt")
    with open(note, "w") as f:
        f.write("mine")
    with pytest.raises(FileExistsError, match="notes.txt"):
        export(model, out, "classification", format="onnx", overwrite=True)
    assert open(note).read() == "mine"


def test_the_sweep_takes_only_marked_temporaries_of_dead_writers(tmp_path):
    dead = 2**22 + 12345  # above the default pid_max: no such process
    users = tmp_path / f".tmp-model.keras-{dead}-my-backup"  # looks like an old temporary, is a user's file
    ours = tmp_path / f".tmp-model.keras-{dead}-{atomic.MARK}abc123"
    users.write_text("keep me")
    ours.write_text("left by a killed writer")
    atomic.write_file(tmp_path / "model.keras", b"new")
    assert users.read_text() == "keep me" and not ours.exists()


def _calibration_model():
    return keras_vit.VisionTransformer(**TINY, classes=3)


@pytest.mark.parametrize(
    "images, message",
    [
        ([], "no image"),
        ([np.zeros((0, 16, 16, 3), "float32")], "no image"),
        ([np.full((4, 16, 16, 3), 200.0, "float32")], r"values in \[200, 200\].* takes \[-1, 1\]"),
        ([np.zeros((4, 32, 32, 3), "float32")], r"representative_images\[0\]: images must be \(batch, 16, 16, 3\)"),
        ([np.zeros((4, 3, 16, 16), "float32")], "channels first"),
        ([np.full((4, 16, 16, 3), np.nan, "float32")], "values in"),
    ],
)
def test_calibration_sets_are_checked(tmp_path, images, message):
    from hub_export import export

    with pytest.raises(ValueError, match=message):
        export(
            _calibration_model(),
            str(tmp_path / "int8"),
            "classification",
            format="litert",
            quantize="int8",
            representative_images=images,
        )
    assert not (tmp_path / "int8").exists()


def test_cli_calibration_of_the_wrong_size_is_one_line(tmp_path):
    model = _calibration_model()
    model.save(tmp_path / "m.keras")
    np.save(tmp_path / "calib.npy", np.zeros((4, 32, 32, 3), "float32"))
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=ROOT)
    done = python_run(
        [
            "-m",
            "hub_export",
            f"--weights={tmp_path / 'm.keras'}",
            "--format=litert",
            "--quantize=int8",
            f"--representative={tmp_path / 'calib.npy'}",
            f"--out={tmp_path / 'out'}",
            "--variant=classification",
        ],
        env=env,
        timeout=300,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr and "(batch, 16, 16, 3)" in done.stderr
    assert not (tmp_path / "out").exists()


def test_an_export_from_before_manifests_is_replaced_unless_a_user_added_to_it(tmp_path):
    from hub_export import export

    model = keras_vit.VisionTransformer(**TINY, classes=3)
    out = export(model, str(tmp_path / "old"), "classification", format="onnx")
    os.remove(os.path.join(out, atomic.MANIFEST))  # as the previous release wrote it
    export(model, out, "classification", format="onnx", overwrite=True)
    os.remove(os.path.join(out, atomic.MANIFEST))
    with open(os.path.join(out, "notes.txt"), "w") as f:
        f.write("mine")
    with pytest.raises(FileExistsError, match="notes.txt"):
        export(model, out, "classification", format="onnx", overwrite=True)


def test_a_saved_model_signature_names_the_size_it_takes(tmp_path):
    """A SavedModel signature does not check shapes itself: an image of another size fails with the size the
    export takes, not an "Incompatible shapes" error deep in the graph; the right size still runs."""
    import tensorflow as tf

    from hub_export import export

    model = keras_vit.VisionTransformer(**TINY, classes=3)
    out = export(model, str(tmp_path / "sm"), "classification", format="saved_model")
    serve = tf.saved_model.load(os.path.join(out, "saved_model")).signatures["serving_default"]
    assert serve(images=tf.zeros((2, 16, 16, 3)))["output_0"].shape == (2, 3)
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"images must be \(batch, 16, 16, 3\)"):
        serve(images=tf.zeros((1, 32, 32, 3)))


def test_an_edited_output_file_is_not_lost_to_overwrite(tmp_path):
    """The manifest keeps each file's size and sha256: a file edited since (a model card) is named and kept."""
    model = keras_vit.VisionTransformer(**TINY, classes=3)
    out = tmp_path / "hf"
    keras_vit.save_safetensors(model, str(out), layout="transformers")
    manifest = json.loads((out / atomic.MANIFEST).read_text())
    assert manifest["files"]["config.json"]["size"] == (out / "config.json").stat().st_size
    (out / "config.json").write_text((out / "config.json").read_text().replace("LABEL_0", "cat"))
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    with pytest.raises(FileExistsError, match="config.json.*changed since"):
        keras_vit.save_safetensors(model, str(out), layout="transformers")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_a_manifest_copied_beside_a_users_files_deletes_nothing(tmp_path):
    model = keras_vit.VisionTransformer(**TINY, classes=3)
    keras_vit.save_safetensors(model, str(tmp_path / "ours"), layout="transformers")
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "config.json").write_text(json.dumps({"model_type": "vit", "note": "my own"}))
    (theirs / "model.safetensors").write_bytes(b"my weights")
    (theirs / atomic.MANIFEST).write_bytes((tmp_path / "ours" / atomic.MANIFEST).read_bytes())
    with pytest.raises(FileExistsError, match="changed since"):
        keras_vit.save_safetensors(model, str(theirs), layout="transformers")
    assert (theirs / "model.safetensors").read_bytes() == b"my weights"
