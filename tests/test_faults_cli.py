"""The CLIs and consumers under hostile input: one clear line, exit 2, nothing written; images read at
their real bit depth; every consumer feeds a model the input range the model itself declares."""

import hashlib
import os

import numpy as np
import pytest
from PIL import Image

import keras_vit
from keras_vit.analysis import fewshot, images, inspect
from recipes import fewshot as fewshot_cli, vtab

from conftest import python_run, ROOT

TINY = dict(patch_size=8, hidden_size=16, mlp_dim=32, num_heads=2, num_layers=1, input_shape=(32, 32, 3))


def _tree(path):
    return {
        os.path.relpath(os.path.join(d, f), path): hashlib.sha256(open(os.path.join(d, f), "rb").read()).hexdigest()
        for d, _, files in os.walk(path)
        for f in files
    }


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    d = tmp_path_factory.mktemp("m")
    keras_vit.VisionTransformer(**TINY, classes=10).save(d / "m.keras")
    return d / "m.keras"


@pytest.mark.parametrize(
    "flags,message",
    [
        (["--shots", "2.7"], "--shots[0] must be a whole number, got 2.7"),
        (["--shots", "0,5"], "--shots[0] must be >= 1"),
        (["--shots", "a,b"], "--shots='a,b' must be comma-separated whole numbers"),
        (["--seeds", "0"], "--seeds must be >= 1, got 0"),
    ],
)
def test_fewshot_cli_refuses_before_work(saved, tmp_path, capsys, flags, message):
    out = tmp_path / "r.json"
    assert fewshot_cli.main(["--weights", str(saved), "--datasets", "mnist5k", "--out", str(out), *flags]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_fewshot_cli_unwritable_out_is_reported_before_work(saved, tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    assert fewshot_cli.main(["--weights", str(saved), "--datasets", "mnist5k", "--out", str(blocker / "r.json")]) == 2
    assert f"{blocker} is a file, not a directory" in capsys.readouterr().err
    assert blocker.read_text() == "x"


@pytest.mark.parametrize(
    "kw,message",
    [
        (dict(shots=2.7), "shots must be a whole number"),
        (dict(l2_reg=-1.0), "l2_reg must be > 0"),
        (dict(seed=-1), "seed must be >= 0"),
        (dict(shots=True), "shots must be an integer"),
    ],
)
def test_probe_refuses_coercions(kw, message):
    rng = np.random.default_rng(0)
    args = dict(
        train_features=rng.normal(size=(30, 4)),
        train_labels=np.repeat([0, 1, 2], 10),
        test_features=rng.normal(size=(6, 4)),
        test_labels=np.repeat([0, 1, 2], 2),
        shots=2,
        seed=0,
    )
    with pytest.raises(ValueError, match=message):
        fewshot.linear_fewshot_accuracy(**{**args, **kw})


@pytest.mark.parametrize(
    "kw,message",
    [
        (dict(seeds=0), "seeds must be >= 1"),
        (dict(shots=[1, 2.5]), r"shots\[1\]"),
        (dict(l2_reg=0.0), "l2_reg must be > 0"),
    ],
)
def test_evaluator_refuses_what_would_give_nan(kw, message):
    data = {"d": (np.zeros((4, 32, 32, 3)), np.arange(4) % 2, np.zeros((2, 32, 32, 3)), np.arange(2))}
    with pytest.raises(ValueError, match=message):
        fewshot.FewShotEvaluator(lambda x: x.reshape(len(x), -1)[:, :4], data, **kw)


def test_fewshot_extract_feeds_raw_pixels_to_a_preprocessing_model():
    from recipes.data import load_source

    source = load_source("mnist5k", "test[:16]")
    scaled, _ = fewshot_cli.extract(lambda x: x.reshape(len(x), -1), source, 32)
    raw, _ = fewshot_cli.extract(lambda x: x.reshape(len(x), -1), source, 32, raw_pixels=True)
    assert scaled.min() >= -1 and scaled.max() <= 1 and raw.max() > 100
    np.testing.assert_allclose(raw / 127.5 - 1, scaled, atol=1e-5)
    model = keras_vit.VisionTransformer(**TINY, include_preprocessing=True)
    assert model.input_range == (0.0, 255.0) and model.to_input_range(255.0) == 255.0
    assert keras_vit.VisionTransformer(**TINY).to_input_range(255.0) == 1.0


def test_sixteen_bit_png_is_read_at_its_depth(tmp_path):
    ramp = (np.arange(64 * 64).reshape(64, 64) * 16).astype("uint16")  # 0 .. 65520
    Image.fromarray(ramp).save(tmp_path / "scan16.png")
    pixels = images.read_image(str(tmp_path / "scan16.png"))
    assert pixels.shape == (64, 64, 3)
    np.testing.assert_allclose(pixels[..., 0], ramp / 65535 * 255, atol=1e-3)  # not clipped to 255
    assert 0.45 < (pixels < 128).mean() < 0.55
    Image.fromarray((ramp >> 8).astype("uint8")).save(tmp_path / "scan8.png")
    np.testing.assert_allclose(images.read_image(str(tmp_path / "scan8.png")), pixels, atol=1.0)
    model = keras_vit.VisionTransformer(**TINY, classes=3)
    scaled = inspect._load_image(str(tmp_path / "scan16.png"), model)
    assert scaled.shape == (32, 32, 3) and scaled.min() < -0.9 and scaled.max() > 0.9


def test_inspect_cli_bad_image_and_unwritable_out(saved, tmp_path, capsys):
    (tmp_path / "not.png").write_bytes(b"GIF89a-not-really")
    assert inspect.main([f"--weights={saved}", f"--image={tmp_path / 'not.png'}", f"--out={tmp_path / 'o'}"]) == 2
    assert "not.png' is not a readable image" in capsys.readouterr().err
    (tmp_path / "file").write_text("x")
    Image.fromarray(np.zeros((8, 8, 3), "uint8")).save(tmp_path / "ok.png")
    assert inspect.main([f"--weights={saved}", f"--image={tmp_path / 'ok.png'}", f"--out={tmp_path / 'file'}"]) == 2
    assert "exists and is not a directory" in capsys.readouterr().err
    assert not (tmp_path / "o").exists() and (tmp_path / "file").read_text() == "x"


@pytest.mark.parametrize(
    "content,message",
    [
        ('{"task": "eurosat", "accuracy": 1.7}', "accuracy must be a fraction in [0, 1], got 1.7"),
        ('{"task": "eurosat", "accuracy": true}', "accuracy must be a fraction"),
        ('{"task": "dtd", "accuracy": 0.5}', "not the result of task 'eurosat'"),
        ('{"task": "eurosat", "acc', "is not a readable result.json"),
    ],
)
def test_vtab_refuses_a_damaged_result_before_any_work(tmp_path, capsys, content, message):
    (tmp_path / "eurosat").mkdir()
    (tmp_path / "eurosat" / "result.json").write_text(content)
    before = _tree(tmp_path)
    assert vtab.main(["--tasks", "eurosat", "--workdir", str(tmp_path)]) == 2
    assert message in capsys.readouterr().err
    assert _tree(tmp_path) == before


def test_vtab_flags_out_of_range(tmp_path, capsys):
    assert vtab.main(["--tasks", "eurosat", "--workdir", str(tmp_path / "w"), "--steps", "-3"]) == 2
    assert "--steps must be >= 0, got -3" in capsys.readouterr().err
    assert not (tmp_path / "w").exists()


def test_hub_export_unwritable_out_is_reported_before_building(saved, tmp_path, capsys):
    from hub_export.__main__ import main

    (tmp_path / "file").write_text("x")
    assert main([f"--weights={saved}", f"--out={tmp_path / 'file' / 'module'}"]) == 2
    assert "is a file, not a directory" in capsys.readouterr().err
    assert os.listdir(tmp_path) == ["file"]


def test_a_failed_download_names_the_url_and_where_to_place_the_file(tmp_path):
    from PIL import Image

    Image.new("RGB", (20, 20)).save(tmp_path / "photo.png")
    env = dict(
        os.environ,
        TF_CPP_MIN_LOG_LEVEL="3",
        PYTHONPATH=ROOT,
        KERAS_VIT_CACHE_DIR=str(tmp_path / "cache"),
        KERAS_VIT_BASE_URL=f"file://{tmp_path / 'no-such-mirror'}",
    )
    done = python_run(
        ["-m", "keras_vit.predict", str(tmp_path / "photo.png"), "--weights=augreg_in21k_ft_in1k", "--model=ViT-Ti/16"],
        env=env,
        timeout=300,
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
    line = done.stderr.strip().splitlines()[-1]
    assert "no-such-mirror/augreg/" in line and str(tmp_path / "cache" / "keras_vit") in line
