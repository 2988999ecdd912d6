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
