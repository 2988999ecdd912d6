"""What a new user meets first (issue 47's first part): a release's dataset name resolves in the recipes with
`--config.model.name`, and without a model it asks for one instead of naming "model None"."""

import numpy as np

from keras_vit.analysis import predict
from keras_vit.vit.data_config import ORIGINAL
from recipes.configs import finetune
from recipes.trainer import family


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
    import subprocess
    import sys

    env = dict(os.environ, KERAS_VIT_BASE_URL=f"file://{tmp_path / 'nowhere'}", KERAS_VIT_CACHE_DIR=str(tmp_path),
               TF_CPP_MIN_LOG_LEVEL="3")
    code = "import keras_vit\nkeras_vit.ViT_Ti16(weights='augreg_in21k')\n"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    at = next(i for i, line in enumerate(lines) if line.startswith("Traceback"))
    assert done.returncode == 1 and "direct cause" not in done.stderr
    assert len(lines) - at <= 25, "\n".join(lines[at:])  # one traceback, not the ~90 lines of its chained causes
    message = lines[-1]
    assert message.startswith("ValueError: Could not download release") and "nowhere" in message
    assert str(tmp_path / "keras_vit") in message and "KERAS_VIT_CACHE_DIR" in message
