"""A hybrid `.keras` file stays a hybrid through every entry point (they all go through `keras_vit.load_model`).

hub_export's CLI is covered in test_hub_export.py.
"""

import json
import os
import numpy as np
import pytest
from PIL import Image

import keras_vit
from conftest import call_main
from keras_vit.analysis import inspect as inspect_cli
from recipes import fewshot as fewshot_cli
from recipes import train, vtab
from recipes.configs import demo


@pytest.fixture(scope="module")
def hybrid_file(tmp_path_factory):
    root = tmp_path_factory.mktemp("hybrid")
    model = keras_vit.VisionTransformer(
        1, 32, 64, 2, 1, resnet_layers=(1, 1), resnet_width=0.5, input_shape=(32, 32, 3), classes=10
    )
    path = str(root / "hybrid.keras")
    model.save(path)
    return path


def test_inspect_cli(hybrid_file, tmp_path):
    pixels = np.random.default_rng(0).integers(0, 256, (32, 32, 3)).astype("uint8")
    Image.fromarray(pixels).save(tmp_path / "x.png")
    # in-process (the command as users type it runs in test_inspect.py)
    status, stderr = call_main(
        inspect_cli.main,
        f"--weights={hybrid_file}",
        f"--image={tmp_path / 'x.png'}",
        f"--out={tmp_path / 'figs'}",
    )
    assert status in (0, None), stderr[-2000:]
    # a hybrid's patch embedding sees ResNet features, so no RGB filter figure: 3 figures, not 4
    assert sorted(os.listdir(tmp_path / "figs")) == [
        "attention_distance.png",
        "attention_rollout.png",
        "position_embedding_similarity.png",
    ]


@pytest.mark.slow  # the CLI's own test is tests/test_fewshot_recipes.py; here a hybrid's features (~40 s)
def test_fewshot_cli(hybrid_file, tmp_path):
    out = tmp_path / "fs.json"
    assert (
        fewshot_cli.main(
            ["--weights", hybrid_file, "--datasets", "mnist5k", "--shots", "10", "--seeds", "1", "--out", str(out)]
        )
        == 0
    )
    assert 0.1 < json.loads(out.read_text())["mnist5k_10shot"]["mean"] <= 1.0


def test_vtab_task_config_and_trainer_init(hybrid_file, tmp_path):
    class Args:
        weights, model, steps, batch_size, image_size = hybrid_file, "", 0, 0, 32
        learning_rate, warmup_steps, data_dir = 0.0, None, ""
        checkpoint = vtab.read_source(hybrid_file, None)  # what main reads once per run

    c = vtab.task_config(vtab.TASKS["cifar100"], Args)
    assert tuple(c.model.resnet_layers) == (1, 1) and c.model.resnet_width == 0.5 and c.model.name == ""
    model = train.build_model(c, 32, 7)
    assert model.stem is not None
    train.init_from_weights(model, c)  # the hybrid file's stem loads into the hybrid model; a new 7-class head
    plain = demo.get_config("pretrain")
    plain.model.update(patch_size=8, hidden_size=32, mlp_dim=64, num_heads=2, num_layers=1)
    plain.init_weights = hybrid_file
    with pytest.raises(ValueError, match="family mismatch"):
        train.init_from_weights(train.build_model(plain, 32, 10), plain)
