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
