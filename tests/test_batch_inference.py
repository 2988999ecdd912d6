"""Batch inference (`python -m keras_vit.inference`): the scores of the one-image predict path, images read as
PIL / timm read them, unreadable files listed and skipped, a run killed by SIGKILL and started again equal to
an uninterrupted one, other settings in the same output refused, and JAX and PyTorch runs without
TensorFlow giving TensorFlow's results."""

import json
import os

import keras
import numpy as np
import pytest
from PIL import Image, ImageOps

import keras_vit
from keras_vit.analysis import image_sources, inference, shards
from keras_vit.analysis.predict import classify
from conftest import python_run

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NO_TENSORFLOW = (
    "import sys\nfor name in ('tensorflow', 'tensorflow_datasets', 'tensorflow_hub', 'tf_keras'):\n"
    "    sys.modules[name] = None\n"
)  # `import tensorflow` fails, as on an install without it


def _photos(folder):
    """Real photos (scikit-image) in the modes users have: RGB JPEG, grayscale and RGBA PNG, CMYK JPEG, a
    16-bit PNG, an EXIF-rotated JPEG, a nested folder, and one file that is not an image."""
    from skimage import data

    os.makedirs(os.path.join(folder, "nested", "deeper"))
    chelsea, camera, coffee = data.chelsea(), data.camera(), data.coffee()
    Image.fromarray(chelsea).save(os.path.join(folder, "cat.jpg"), quality=92)
    Image.fromarray(camera).save(os.path.join(folder, "camera.png"))
    Image.fromarray(coffee).convert("RGBA").save(os.path.join(folder, "nested", "coffee.png"))
    Image.fromarray(coffee).convert("CMYK").save(os.path.join(folder, "nested", "coffee_cmyk.jpg"))
    Image.fromarray((camera.astype("uint16") * 257)).save(os.path.join(folder, "nested", "deeper", "camera16.png"))
    exif = Image.Exif()
    exif[0x0112] = 6  # orientation: rotate 90 degrees to display
    Image.fromarray(chelsea[:200, :300]).save(os.path.join(folder, "rotated.jpg"), exif=exif, quality=92)
    for i in range(6):
        Image.fromarray(np.roll(chelsea, 40 * i, axis=1)[::2, ::2]).save(os.path.join(folder, f"more_{i}.jpg"))
    with open(os.path.join(folder, "nested", "broken.jpg"), "wb") as f:
        f.write(b"\xff\xd8\xff\xe0 not really a jpeg")


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("inference")
    keras.utils.set_random_seed(0)
    model = keras_vit.VisionTransformer(
        patch_size=8, hidden_size=16, mlp_dim=32, num_heads=2, num_layers=1, input_shape=(32, 48, 3), classes=1000
    )
    path = str(tmp / "tiny.keras")
    model.save(path)
    _photos(str(tmp / "photos"))
    return tmp, model, path


def test_top_k_equals_the_predict_path_and_the_unreadable_file_is_listed(setup):
    tmp, model, _ = setup
    manifest = inference.run_inference(
        model, str(tmp / "photos"), str(tmp / "top"), top=3, batch_size=4, shard_size=5, progress=False
    )
    out = shards.read_output(str(tmp / "top"))
    assert manifest["complete"] and [s["rows"] for s in manifest["shards"]] == [5, 4, 3]  # 13 files, one bad
    assert out["bad"][0]["file"] == "nested/broken.jpg" and "not a readable image" in out["bad"][0]["error"]
    assert "nested/deeper/camera16.png" in list(out["file"])
    reference = classify(model, [str(tmp / "photos" / f) for f in out["file"]], top=3)
    assert out["class_name"].tolist() == [[r["name"] for r in ref["top"]] for ref in reference]
    assert out["class_id"].tolist() == [[r["id"] for r in ref["top"]] for ref in reference]
    np.testing.assert_allclose(out["score"], [[r["score"] for r in ref["top"]] for ref in reference], atol=2e-6)


def test_images_are_read_as_pil_and_timm_read_them(setup):
    tmp = setup[0] / "photos"
    cmyk = image_sources.read_pixels(str(tmp / "nested" / "coffee_cmyk.jpg"))
    assert cmyk.dtype == np.uint8
    np.testing.assert_array_equal(cmyk, np.asarray(Image.open(tmp / "nested" / "coffee_cmyk.jpg").convert("RGB")))
    deep = image_sources.read_pixels(str(tmp / "nested" / "deeper" / "camera16.png"))  # scaled, not clipped white
    from skimage import data

    np.testing.assert_allclose(deep[..., 0], data.camera(), atol=1e-3)
    rotated = image_sources.read_pixels(str(tmp / "rotated.jpg"))
    assert rotated.shape == (200, 300, 3)  # as timm: orientation not applied
    upright = image_sources.read_pixels(str(tmp / "rotated.jpg"), exif_transpose=True)
    np.testing.assert_array_equal(upright, np.asarray(ImageOps.exif_transpose(Image.open(tmp / "rotated.jpg"))))


def _cli(*args, backend="tensorflow", before=""):
    code = (
        f"{before}import sys\nsys.argv = ['keras_vit.inference'] + {list(args)!r}\n"
        "from keras_vit.analysis.inference import main\nraise SystemExit(main())\n"
    )
    env = dict(os.environ, KERAS_BACKEND=backend, PYTHONPATH=ROOT)
    return python_run(["-c", code], cwd=ROOT, env=env, timeout=600)


KILL_AT_SECOND_MANIFEST = (  # SIGKILL the run after shard 1 is written but before the manifest records it
    "import os, signal\nfrom keras_vit.analysis import shards\n_write, _calls = shards.write_manifest, [0]\n"
    "def _kill(directory, manifest):\n    _calls[0] += 1\n"
    "    if _calls[0] == 2:\n        os.kill(os.getpid(), signal.SIGKILL)\n    _write(directory, manifest)\n"
    "shards.write_manifest = _kill\n"
)


def test_a_killed_run_resumes_to_the_uninterrupted_output(setup):
    tmp, _, path = setup
    common = [
        str(tmp / "photos"),
        f"--weights={path}",
        "--shard_size=4",
        "--batch_size=3",
        "--features=pooled",
        "--format=parquet",
    ]
    whole = _cli(*common, f"--output={tmp / 'whole'}")
    assert whole.returncode == 0, whole.stderr[-2000:]
    killed = _cli(*common, f"--output={tmp / 'resumed'}", before=KILL_AT_SECOND_MANIFEST)
    assert killed.returncode == -9
    assert len(shards.read_manifest(str(tmp / "resumed"))["shards"]) == 1  # shard 1 written, not recorded
    resumed = _cli(*common, f"--output={tmp / 'resumed'}")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    names = sorted(n for n in os.listdir(tmp / "whole"))
    assert names == sorted(os.listdir(tmp / "resumed"))  # no temporary left, nothing twice
    for name in names:
        if name != shards.MANIFEST:
            assert (tmp / "whole" / name).read_bytes() == (tmp / "resumed" / name).read_bytes(), name
    a, b = shards.read_output(str(tmp / "whole")), shards.read_output(str(tmp / "resumed"))
    assert a["file"].tolist() == b["file"].tolist() and a["bad"] == b["bad"] and len(a["file"]) == 12


def test_other_settings_or_a_foreign_folder_are_refused_and_left_alone(setup):
    tmp, model, _ = setup
    out = tmp / "refuse"
    inference.run_inference(
        model, str(tmp / "photos"), str(out), features="pooled", fmt="npy", shard_size=8, progress=False
    )
    before = {n: (out / n).read_bytes() for n in os.listdir(out)}
    with pytest.raises(ValueError, match="holds a run with other l2_normalize"):
        inference.run_inference(
            model,
            str(tmp / "photos"),
            str(out),
            features="pooled",
            fmt="npy",
            shard_size=8,
            l2_normalize=True,
            progress=False,
        )
    other = keras_vit.VisionTransformer(
        patch_size=8, hidden_size=16, mlp_dim=32, num_heads=2, num_layers=1, input_shape=(32, 48, 3), classes=1000
    )
    with pytest.raises(ValueError, match="other weights_sha256"):
        inference.run_inference(
            other, str(tmp / "photos"), str(out), features="pooled", fmt="npy", shard_size=8, progress=False
        )
    assert {n: (out / n).read_bytes() for n in os.listdir(out)} == before
    (tmp / "mine").mkdir()
    (tmp / "mine" / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="holds other files and no manifest.json"):
        inference.run_inference(model, str(tmp / "photos"), str(tmp / "mine"), progress=False)
    with pytest.raises(ValueError, match="holds feature arrays only"):
        inference.run_inference(model, str(tmp / "photos"), str(tmp / "x"), fmt="npy", progress=False)
    with pytest.raises(ValueError, match="one vector per image"):
        inference.run_inference(
            model, str(tmp / "photos"), str(tmp / "x"), features="patches", fmt="csv", progress=False
        )
    assert os.listdir(tmp / "mine") == ["notes.txt"] and not (tmp / "x").exists()


# PyTorch's leg is in make test-slow (as test_backbones')
@pytest.mark.parametrize("backend", ["jax", pytest.param("torch", marks=pytest.mark.slow)])
def test_jax_and_torch_without_tensorflow_give_tensorflows_features(setup, backend):
    if backend == "torch":
        pytest.importorskip("torch")
    tmp, model, path = setup
    out = tmp / f"features_{backend}"
    run = _cli(
        str(tmp / "photos"),
        f"--weights={path}",
        f"--output={out}",
        "--features=patches",
        "--format=npy",
        "--batch_size=4",
        backend=backend,
        before=NO_TENSORFLOW,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    theirs = shards.read_output(str(out))
    ours_dir = tmp / "features_tf"
    inference.run_inference(
        model, str(tmp / "photos"), str(ours_dir), features="patches", fmt="npy", batch_size=4, progress=False
    )
    ours = shards.read_output(str(ours_dir))
    assert theirs["embedding"].shape == (12, 24, 16)  # a 4x6 grid of patches, prefix tokens left out
    np.testing.assert_allclose(theirs["embedding"], ours["embedding"], atol=2e-5)
    manifest = json.loads((out / shards.MANIFEST).read_text())
    assert manifest["settings"]["weights"] == path and manifest["complete"]


def test_a_tfds_split_is_read_in_order_from_a_resume_point(setup, tmp_path):
    import tensorflow_datasets as tfds
    from skimage import data

    photos = [data.chelsea()[::4, ::4], data.coffee()[::4, ::4], np.repeat(data.camera()[::8, ::8, None], 3, -1)] * 3

    class KerasVitTestPhotos(tfds.core.GeneratorBasedBuilder):  # a real prepared dataset, nothing downloaded
        VERSION = tfds.core.Version("1.0.0")

        def _info(self):
            return tfds.core.DatasetInfo(
                builder=self,
                features=tfds.features.FeaturesDict(
                    {
                        "image": tfds.features.Image(shape=(None, None, 3)),
                        "label": tfds.features.ClassLabel(num_classes=3),
                    }
                ),
            )

        def _split_generators(self, dl_manager):
            return {"test": self._generate_examples()}

        def _generate_examples(self):
            for i, image in enumerate(photos):
                yield i, {"image": image, "label": i % 3}

    builder = KerasVitTestPhotos(data_dir=str(tmp_path / "tfds"))
    builder.download_and_prepare()
    labels = [int(ex["label"]) for ex in tfds.as_numpy(builder.as_dataset(split="test", shuffle_files=False))]
    _, model, _ = setup
    kw = dict(features="pooled", fmt="npy", shard_size=4, batch_size=3, data_dir=str(tmp_path / "tfds"), progress=False)
    write, calls = shards.write_shard, []

    def fail_second(*args):
        calls.append(args[1])
        if len(calls) == 2:
            raise KeyboardInterrupt  # stopped while writing shard 1: the rerun starts there, at image 4
        return write(*args)

    shards.write_shard = fail_second
    try:
        with pytest.raises(KeyboardInterrupt):
            inference.run_inference(model, "tfds:keras_vit_test_photos:test", str(tmp_path / "out"), **kw)
    finally:
        shards.write_shard = write
    manifest = inference.run_inference(model, "tfds:keras_vit_test_photos:test", str(tmp_path / "out"), **kw)
    out = shards.read_output(str(tmp_path / "out"))
    assert manifest["settings"]["source"]["kind"] == "tfds" and out["file"].tolist() == [f"test/{i}" for i in range(9)]
    inference.run_inference(
        model, _list(tmp_path, photos), str(tmp_path / "direct"), features="pooled", fmt="npy", progress=False
    )
    direct = shards.read_output(str(tmp_path / "direct"))["embedding"]  # the photos in list order: 0, 1, 2, ...
    np.testing.assert_allclose(out["embedding"], direct[labels], atol=1e-5)  # TFDS's order, photo = label


def _list(tmp_path, photos):
    """The same photos as PNG files and a text file listing them (a file-list source)."""
    (tmp_path / "png").mkdir()
    names = []
    for i, image in enumerate(photos):
        Image.fromarray(image).save(tmp_path / "png" / f"{i}.png")
        names.append(f"png/{i}.png")
    (tmp_path / "list.txt").write_text("# the photos\n" + "\n".join(names) + "\n")
    return str(tmp_path / "list.txt")


def test_per_patch_shards_default_to_a_bounded_size():
    model = keras_vit.ViT_B16()  # random weights, nothing downloaded
    assert inference._shard_size(model, "patches", "float32") == (256 << 20) // (196 * 768 * 4)  # 445 images
    assert inference._shard_size(model, "patches", "float16") == (256 << 20) // (196 * 768 * 2)
    assert inference._shard_size(model, "pooled", "float32") == inference._shard_size(model, None, "float32") == 10_000


def test_bad_settings_are_named_before_anything_is_read_or_written(setup, tmp_path):
    _, model, _ = setup
    for kwargs, message in (
        (dict(dtype="bfloat16"), "dtype must be one of float32, float16"),
        (dict(top=0), "top must be an integer >= 1"),
        (dict(shard_size=2.5), "shard_size must be an integer >= 1"),
        (dict(features="cls"), "features must be None"),
    ):
        with pytest.raises(ValueError, match=message):
            inference.run_inference(model, str(tmp_path / "no_such_folder"), str(tmp_path / "out"), **kwargs)
    assert not (tmp_path / "out").exists()
    # a file name that is not UTF-8 is named before the model runs (its row could never be written)
    photos = os.fsencode(str(tmp_path / "photos"))
    os.makedirs(photos)
    for name in (b"a.png", b"b\xff.png"):
        keras.utils.save_img(os.path.join(photos, name).decode("utf-8", "surrogateescape"), np.zeros((8, 8, 3)))
    with pytest.raises(ValueError, match=r"b\\udcff.png.*not valid UTF-8"):
        inference.run_inference(model, str(tmp_path / "photos"), str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()


def test_the_manifest_vouches_for_its_shards_and_records_every_setting(setup):
    """A recorded shard deleted, truncated or edited is redone by a resumed run and refused by `read_output`, naming
    it; the manifest's own edits (rows, kind, truncation, a list) are refused naming the file; `exif_transpose` and
    the labels are settings of the run."""
    tmp, model, _ = setup
    out = tmp / "vouched"

    def run(**kw):
        kw = {**dict(top=2, fmt="csv", shard_size=5, progress=False), **kw}
        return inference.run_inference(model, str(tmp / "photos"), str(out), **kw)

    run()
    whole = shards.read_output(str(out))
    with pytest.raises(ValueError, match="holds a run with other exif_transpose"):
        run(exif_transpose=True)
    with pytest.raises(ValueError, match="holds a run with other labels"):
        run(labels=[f"class {i}" for i in range(model.classes)])
    (out / "part-00001.csv").unlink()
    with pytest.raises(ValueError, match="part-00001.csv: missing; rerun the inference command"):
        shards.read_output(str(out))
    with pytest.warns(UserWarning, match="part-00001.csv: missing; redoing shard 1"):
        manifest = run()
    assert manifest["complete"] and sum(s["rows"] for s in manifest["shards"]) == len(whole["file"])
    assert shards.read_output(str(out))["file"].tolist() == whole["file"].tolist()
    text = (out / "part-00000.csv").read_text()
    (out / "part-00000.csv").write_text(text[: len(text) // 2])  # truncated
    with pytest.raises(ValueError, match="part-00000.csv: changed since it was written"):
        shards.read_output(str(out))
    manifest_path = out / shards.MANIFEST
    record = json.loads(manifest_path.read_text())
    run()  # redone
    record = json.loads(manifest_path.read_text())
    record["shards"][0]["rows"] = 0
    manifest_path.write_text(json.dumps(record))
    with pytest.raises(ValueError, match="part-00000.csv holds 5 rows, its manifest entry 0"):
        shards.read_output(str(out))
    for bad, message in (
        ("{", "is not a readable keras_vit.inference record"),
        ("[1, 2]", "holds a JSON list, not a keras_vit.inference record"),
        (json.dumps(dict(record, schema=None)), "is not a keras_vit.inference record of schema 1"),
        (json.dumps({k: v for k, v in record.items() if k != "settings"}), "lacks its field 'settings'"),
    ):
        manifest_path.write_text(bad)
        with pytest.raises(ValueError, match=message):
            shards.read_output(str(out))
        with pytest.raises(ValueError, match=message):
            run()
