"""Few-shot in the recipes: the training callback logs `a/<dataset>_<k>shot`, and the CLI."""

import glob
import json
import os

import tensorflow as tf

import keras_vit
from recipes import fewshot as fewshot_cli
from recipes import train
from conftest import tiny_recipe_config


def _tags(logdir):
    tags = {}
    for path in glob.glob(os.path.join(logdir, "events.*")):
        for event in tf.compat.v1.train.summary_iterator(path):
            for v in event.summary.value:
                tags.setdefault(v.tag, []).append(event.step)
    return tags


def test_callback_logs_fewshot_during_training(tmp_path):
    c = tiny_recipe_config(batch_size=16, total_steps=20, log_every=10, checkpoint_every=20)
    c.dataset.eval_split = ""
    c.fewshot.update(
        every=10, dataset="mnist5k", train_split="train[:500]", test_split="test[:200]", shots=[1, 5], seeds=2
    )
    summary = train.train_and_evaluate(c, str(tmp_path))
    tags = _tags(tmp_path / "tb")
    assert tags["a/mnist5k_5shot"] == [10, 20] and tags["a/mnist5k_1shot"] == [10, 20]
    assert "loss" in tags and summary["steps"] == 20


def test_cli_on_bundled_digits(tmp_path, capsys):
    model = keras_vit.VisionTransformer(8, 32, 64, 2, 1, input_shape=(32, 32, 3), classes=10)
    model.save(tmp_path / "m.keras")
    out = tmp_path / "fs.json"
    assert (
        fewshot_cli.main(
            [
                "--weights",
                str(tmp_path / "m.keras"),
                "--datasets",
                "mnist5k",
                "--shots",
                "1,10",
                "--seeds",
                "2",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    results = json.loads(out.read_text())
    # a random-init ViT's features beat chance (10 %) at 10 shots on real digits: measured 0.26
    assert set(results) == {"mnist5k_1shot", "mnist5k_10shot"} and results["mnist5k_10shot"]["mean"] > 0.15
    assert fewshot_cli.main(["--datasets", "nope"]) == 2
    assert "Unknown few-shot dataset" in capsys.readouterr().err
