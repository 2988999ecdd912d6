"""Masked patch prediction (appendix B.1.2): targets, corruption statistics, training through the trainer."""

import numpy as np
import tensorflow as tf

import keras_vit
from recipes import mpp, train
from conftest import tiny_recipe_config


def test_mean_colour_targets_match_numpy():
    rng = np.random.default_rng(0)
    images = rng.uniform(-1, 1, (2, 16, 16, 3)).astype("float32")
    ids = mpp.mean_colour_targets(tf.constant(images), 8, bits=3).numpy()
    colour = ((images + 1) / 2).reshape(2, 2, 8, 2, 8, 3).mean(axis=(2, 4)).reshape(2, 4, 3)
    q = np.clip(np.floor(colour * 8), 0, 7).astype(int)
    np.testing.assert_array_equal(ids, q[..., 0] * 64 + q[..., 1] * 8 + q[..., 2])
    assert ids.max() < 512


def test_corruption_rates():
    layer = mpp.PatchCorruption(0.5, 0.8, 0.1, seed=0)
    tokens = tf.constant(np.random.default_rng(0).normal(size=(64, 256, 8)).astype("float32"))
    out, corrupted = layer(tokens)
    out, corrupted = out.numpy(), corrupted.numpy().astype(bool)
    mask = layer.mask_embedding.numpy()
    is_mask = np.all(out == mask, axis=-1)
    kept = np.all(out == tokens.numpy(), axis=-1)
    assert abs(corrupted.mean() - 0.5) < 0.02
    assert not np.any(is_mask & ~corrupted) and np.all(kept[~corrupted])
    frac_mask = is_mask[corrupted].mean()
    frac_kept = kept[corrupted].mean()
    assert abs(frac_mask - 0.8) < 0.02 and abs(frac_kept - 0.1) < 0.02  # the other 10 %: random patches


def test_mpp_pretraining_runs_and_learns(tmp_path):
    c = tiny_recipe_config(batch_size=32, total_steps=60, log_every=20, checkpoint_every=60)
    c.optimizer.update(learning_rate=3e-3, warmup_steps=5)
    c.dataset.eval_split = ""
    c.mpp.enabled = True
    summary = train.train_and_evaluate(c, str(tmp_path))
    assert summary["final_train"]["loss"] < np.log(512) - 1.0  # well below a uniform guess over 512 colours
    model = keras_vit.load_model(summary["model"])
    assert model.vit_config.hidden_size == 32
