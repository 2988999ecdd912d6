"""CLIP's and SigLIP's contrastive losses equal open_clip's `ClipLoss` / `SigLipLoss` on the same embeddings
(tests/fixtures/open_clip/losses.npz, written by open_clip through tools/make_open_clip_fixtures.py); SigLIP's
chunked form equals the whole; both equal their formulas in float64 numpy."""

import os

import numpy as np
import pytest

import keras_vit
from conftest import ROOT

REF = np.load(os.path.join(ROOT, "tests", "fixtures", "open_clip", "losses.npz"))


def _numpy_losses():
    i, t = REF["image"].astype("float64"), REF["text"].astype("float64")
    logits = np.exp(float(REF["logit_scale"])) * i @ t.T

    def ce(z):
        z = z - z.max(axis=1, keepdims=True)
        return -np.mean(np.diag(z) - np.log(np.exp(z).sum(axis=1)))

    clip = (ce(logits) + ce(logits.T)) / 2
    labels = 2 * np.eye(len(i)) - 1
    z = labels * (logits + float(REF["logit_bias"]))
    siglip = -np.sum(-np.logaddexp(0, -z)) / len(i)
    return clip, siglip


def test_the_losses_equal_open_clips_and_their_formulas():
    clip = float(keras_vit.clip_loss(REF["image"], REF["text"], REF["logit_scale"]))
    siglip = float(keras_vit.siglip_loss(REF["image"], REF["text"], REF["logit_scale"], REF["logit_bias"]))
    assert abs(clip - float(REF["clip_loss"])) <= 1e-5 and abs(siglip - float(REF["siglip_loss"])) <= 1e-5
    want_clip, want_siglip = _numpy_losses()
    assert abs(clip - want_clip) <= 1e-5 and abs(siglip - want_siglip) <= 1e-5


@pytest.mark.parametrize("chunks", [2, 3, 6])
def test_siglips_chunked_loss_is_the_whole(chunks):
    args = (REF["image"], REF["text"], REF["logit_scale"], REF["logit_bias"])
    whole = float(keras_vit.siglip_loss(*args))
    assert abs(float(keras_vit.siglip_loss(*args, text_chunks=chunks)) - whole) <= 1e-5
    with pytest.raises(ValueError, match="text_chunks=0"):
        keras_vit.siglip_loss(*args, text_chunks=0)


def _logits(bias=False):
    i, t = REF["image"].astype("float64"), REF["text"].astype("float64")
    return np.exp(float(REF["logit_scale"])) * i @ t.T + (float(REF["logit_bias"]) if bias else 0.0)


def test_per_example_losses_sum_to_open_clips_on_the_diagonal():
    n = len(REF["image"])
    clip = np.asarray(keras_vit.contrastive_losses(_logits().astype("float32"), "clip"))
    siglip = np.asarray(keras_vit.contrastive_losses(_logits(bias=True).astype("float32"), "sigmoid"))
    assert clip.shape == siglip.shape == (n,)
    assert abs(clip.sum() / n - float(REF["clip_loss"])) <= 1e-5
    assert abs(siglip.sum() / n - float(REF["siglip_loss"])) <= 1e-5


def test_a_repeated_caption_counts_every_image_of_it_as_a_match():
    """Rows 0 and 2 carry one caption: the soft target puts half on each (numpy, float64), and the sigmoid
    loss labels both pairs positive."""
    ids = np.array([[5, 7, 0], [5, 8, 0], [5, 7, 0], [9, 9, 9]])
    same = np.asarray(keras_vit.vit.contrastive.same_rows(ids))
    assert same.tolist() == [[a == b for b in (0, 1, 0, 2)] for a in (0, 1, 0, 2)]
    z = np.random.default_rng(1).normal(size=(4, 4)) * 3
    p = same.astype("float64")

    def log_softmax(x, axis):
        x = x - x.max(axis=axis, keepdims=True)
        return x - np.log(np.exp(x).sum(axis=axis, keepdims=True))

    want_clip = (-(p * log_softmax(z, 1)).sum(1) / p.sum(1) - (p * log_softmax(z, 0)).sum(0) / p.sum(0)) / 2
    want_sigmoid = np.logaddexp(0, -(2 * p - 1) * z).sum(1)
    got_clip = np.asarray(keras_vit.contrastive_losses(z.astype("float32"), "clip", same))
    got_sigmoid = np.asarray(keras_vit.contrastive_losses(z.astype("float32"), "sigmoid", same))
    np.testing.assert_allclose(got_clip, want_clip, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got_sigmoid, want_sigmoid, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="'clip'"):
        keras_vit.contrastive_losses(z, "softmax")
