"""What a new user meets first (issue 47's first part): a release's dataset name resolves in the recipes with
`--config.model.name`, and without a model it asks for one instead of naming "model None"."""

import os

import numpy as np
import pytest

import keras_vit
from conftest import python_run
from keras_vit.analysis import predict
from keras_vit.vit.data_config import ORIGINAL
from recipes.configs import finetune
from recipes.trainer import family

pytestmark = pytest.mark.long  # minutes: started first under `make test`'s two workers


def test_a_release_dataset_name_resolves_with_the_runs_model_name():
    config = finetune.get_config("folder")
    config.model.name, config.init_weights = "ViT-B/16", "augreg_in21k"
    stated = family.data_config(config)  # reads no arrays, downloads nothing
    assert stated.mean == ORIGINAL.mean and stated.std == ORIGINAL.std and stated.labels == "imagenet21k"
    pixels = family.normalizer(config=config)(np.full(3, 255.0))
    np.testing.assert_allclose(pixels, [1.0, 1.0, 1.0])  # the original code's [-1, 1]


def test_a_dataset_name_without_a_model_asks_for_the_model(tmp_path, capsys):
    photo = tmp_path / "photo.png"
    from PIL import Image

    Image.new("RGB", (8, 8)).save(photo)
    assert predict.main([str(photo), "--weights=augreg_in21k"]) == 2
    error = capsys.readouterr().err
    assert "names a release only together with a model" in error and "--model" in error and "None" not in error


def test_an_offline_release_download_is_one_short_error_naming_its_cause_and_the_cache(tmp_path):
    import os

    env = dict(
        os.environ,
        KERAS_VIT_BASE_URL=f"file://{tmp_path / 'nowhere'}",
        KERAS_VIT_CACHE_DIR=str(tmp_path),
        TF_CPP_MIN_LOG_LEVEL="3",
    )
    code = "import keras_vit\nkeras_vit.ViT_Ti16(weights='augreg_in21k')\n"
    done = python_run(["-c", code], env=env, timeout=300)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    at = next(i for i, line in enumerate(lines) if line.startswith("Traceback"))
    assert done.returncode == 1 and "direct cause" not in done.stderr
    assert len(lines) - at <= 25, "\n".join(lines[at:])  # one traceback, not the ~90 lines of its chained causes
    message = lines[-1]
    assert message.startswith("ValueError: Could not download release") and "nowhere" in message
    assert str(tmp_path / "keras_vit") in message and "KERAS_VIT_CACHE_DIR" in message


@pytest.mark.parametrize(
    "code, line",
    [
        ("import recipes.train", "the recipes (recipes.train) needs tensorflow, ml_collections"),
    ],
)
def test_a_missing_extra_is_one_line_naming_it(code, line):
    import os
    import subprocess
    import sys

    blocked = "import sys\nfor n in ('tensorflow', 'ml_collections'):\n    sys.modules[n] = None\n"
    env = dict(os.environ, KERAS_BACKEND="jax", PYTHONPATH=os.path.dirname(os.path.dirname(__file__)))
    done = subprocess.run([sys.executable, "-c", blocked + code], env=env, capture_output=True, text=True, timeout=300)
    last = done.stderr.strip().splitlines()[-1]
    assert done.returncode == 1 and last.startswith("ImportError: ") and line.split(" need")[0] in last, done.stderr
    assert "pip install 'keras-vision-transformer[" in last


def test_an_export_format_without_its_runtime_names_the_extra(monkeypatch):
    import keras_vit
    from keras_vit.utils import extras

    model = keras_vit.VisionTransformer(
        patch_size=8, hidden_size=16, mlp_dim=32, num_heads=2, num_layers=1, input_shape=(16, 16, 3), classes=3
    )
    import hub_export

    real = extras.missing
    monkeypatch.setattr(
        extras, "missing", lambda modules: [m for m in real(modules)] + [m for m in modules if m == "onnxruntime"]
    )
    with pytest.raises(
        ImportError,
        match=r"format='onnx' on the tensorflow backend needs onnxruntime: pip install "
        r"'keras-vision-transformer\[onnx\]'",
    ):
        hub_export.export(model, "unused", "classification", format="onnx")


def test_an_export_card_names_the_weights_the_model_was_loaded_from(tmp_path):
    import json

    import keras_vit
    import hub_export

    model = keras_vit.VisionTransformer(
        patch_size=8, hidden_size=16, mlp_dim=32, num_heads=2, num_layers=1, input_shape=(16, 16, 3), classes=3
    )
    path = keras_vit.save_npz(model, str(tmp_path / "mine.npz"))
    loaded = keras_vit.load_model(path)
    assert loaded.weights_source == path and keras_vit.load_model(path, classes=5).weights_source == path
    rebuilt = keras_vit.load_weights(
        keras_vit.VisionTransformer(
            patch_size=8, hidden_size=16, mlp_dim=32, num_heads=2, num_layers=1, input_shape=(16, 16, 3), classes=3
        ),
        path,
    )
    assert rebuilt.weights_source == path
    out = hub_export.export(loaded, str(tmp_path / "export"), "classification", format="saved_model")
    card = json.loads(open(os.path.join(out, "metadata.json")).read())
    assert card["source_checkpoint"] == path
    assert f"Source checkpoint: `{path}`" in open(os.path.join(out, "README.md")).read()


def test_the_recipes_take_a_config_by_name_outside_a_checkout(tmp_path, monkeypatch):
    import json

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    tiny = [
        "--config.model.hidden_size=32",
        "--config.model.mlp_dim=64",
        "--config.model.num_layers=1",
        "--config.model.num_heads=2",
        "--config.model.patch_size=8",
        "--config.batch_size=16",
        "--config.dataset.eval_split=",
        "--config.total_steps=2",
        "--config.log_every=1",
        "--config.jit_compile=False",  # the name is the subject; the demo trains this config with XLA
    ]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=root, CUDA_VISIBLE_DEVICES="")
    done = python_run(
        ["-m", "recipes.train", "--config=demo:pretrain", f"--workdir={tmp_path / 'run'}", *tiny],
        cwd=tmp_path,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["steps"] == 2
    from recipes import configs

    # a checkout's path, run outside a checkout, names the shipped file as the name does
    monkeypatch.chdir(tmp_path)
    assert configs.resolve("recipes/configs/demo.py:pretrain") == configs.resolve("demo:pretrain")
    assert configs.resolve("finetune:folder") == os.path.join(configs.HERE, "finetune.py") + ":folder"
    assert configs.resolve(str(tmp_path / "mine.py")) == str(tmp_path / "mine.py")  # a file of one's own, as given


def test_the_install_page_lists_every_extra_setup_cfg_defines():
    import configparser
    import re

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    cfg = configparser.ConfigParser()
    cfg.read(os.path.join(root, "setup.cfg"))
    defined = set(cfg["options.extras_require"]) - {"test", "bench"}  # for this repository's own suites
    page = open(os.path.join(root, "docs", "install.md")).read().split("## Extras")[1].split("\n## ")[0]
    listed = set(re.findall(r"^\| `([a-z-]+)`", page, re.M)) | set(
        re.findall(r"^\| `[a-z]+` \(`([a-z]+)`\)", page, re.M)
    )
    assert listed == defined


def test_the_readmes_recipes_command_runs_as_written_with_a_release_name(tmp_path, capsys):
    """README's fine-tune command (a release's dataset name, `--config.model.name`, a config by name) runs as
    written, with tests/doc_prelude.py's offline release mirror and narrow table, and the size, batch and step
    count cut down (and XLA off) by flags appended after it."""
    import shlex

    from doc_blocks import blocks

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    command = next(
        c for lang, c in blocks(os.path.join(root, "README.md")) if lang == "bash" and "keras-vit-train" in c
    )
    words = shlex.split(command.replace("\\\n", " "))
    assert words[0] == "keras-vit-train" and "--config.init_weights=augreg_in21k" in words
    args = words[1:] + [
        "--config.dataset.image_size=32",
        "--config.batch_size=8",
        "--config.total_steps=2",
        "--config.optimizer.warmup_steps=1",
        "--config.log_every=1",
        "--config.jit_compile=False",  # compiling a ViT-B/16 step with XLA is most of the test's time
    ]
    tests, prelude = os.path.join(root, "tests"), os.path.join(root, "tests", "doc_prelude.py")
    code = (
        f"import sys\nsys.path.insert(0, {tests!r})\n"
        f"exec(compile(open({prelude!r}).read(), {prelude!r}, 'exec'), {{'__name__': 'doc_prelude', '__file__': {prelude!r}}})\n"
        "from image_folders import write_folder\nwrite_folder('photos', per_class=12, corrupt=0)\n"
        f"sys.argv = ['keras-vit-train'] + {args!r}\nfrom recipes.train import run\nrun()\n"
    )  # the script's call
    (tmp_path / "mirror").mkdir()
    (tmp_path / "work").mkdir()
    env = dict(
        os.environ,
        KERAS_VIT_BASE_URL=f"file://{tmp_path / 'mirror'}",
        KERAS_VIT_CACHE_DIR=str(tmp_path / "c"),
        TF_CPP_MIN_LOG_LEVEL="3",
        CUDA_VISIBLE_DEVICES="",
        PYTHONPATH=root,
    )
    done = python_run(["-c", code], cwd=tmp_path / "work", env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    import json

    summary = json.loads((tmp_path / "work" / "runs" / "photos" / "summary.json").read_text())
    classes = [d for d in os.listdir(tmp_path / "work" / "photos") if not d.startswith(".")]
    assert summary["steps"] == 2 and summary["num_classes"] == len(classes) >= 3
    # the fine-tuned model names the folder's classes, not the release's ImageNet-21k ones (the README's predict)
    run = tmp_path / "work" / "runs" / "photos"
    names = tuple((run / "class_names.txt").read_text().split())
    model = keras_vit.load_model(str(run / "model.keras"))
    assert model.data_config.labels == names and sorted(names) == sorted(classes)
    assert model.data_config.mean == (0.5, 0.5, 0.5)  # the release's own preprocessing kept beside them
    image = next((tmp_path / "work" / "photos" / names[0]).iterdir())
    capsys.readouterr()
    assert predict.main([str(image), f"--weights={run / 'model.keras'}", "--top=1"]) == 0
    printed = capsys.readouterr().out.splitlines()[1]  # "  1. <name>  <score>"
    assert printed.split()[1] in names, printed
