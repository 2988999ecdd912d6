"""`.keras` files saved by keras_vit 0.3 keep loading: one per model family (tools/make_keras_0_3_fixtures.py, run
on 0.3's main before the model record was reshaped), each with the outputs that version gave."""

import json
import os

import keras
import numpy as np
import pytest

import keras_vit
from keras_vit.vit.variant import Variant

from conftest import FIXTURES

FOLDER = os.path.join(FIXTURES, "keras_0_3")
with open(os.path.join(FOLDER, "manifest.json")) as f:
    CASES = sorted(json.load(f)["cases"])


# one file per kind of block, position information and head in the default suite; make test-slow loads all
DEFAULT = ("custom_any_size", "dinov3_small", "hybrid_units", "naflex_siglip", "things_18x2", "pwee")


@pytest.mark.parametrize(
    "cases", [pytest.param(DEFAULT, id="default"), pytest.param(CASES, id="all", marks=pytest.mark.slow)]
)
def test_every_family_of_0_3_loads_with_its_outputs(cases):
    covered = set()
    for case in (c for c in cases if c in CASES):
        model = keras.saving.load_model(os.path.join(FOLDER, f"{case}.keras"))
        data = np.load(os.path.join(FOLDER, f"{case}.npz"))
        np.testing.assert_allclose(model.predict(data["input"], verbose=0), data["output"], atol=1e-5, err_msg=case)
        default = Variant()
        covered |= {f for f in Variant.fields() if getattr(model.variant, f) != getattr(default, f)}
    if cases is CASES:  # every family option at a value other than the paper's, but those added after 0.3
        assert covered >= set(Variant.fields()) - {"position_interpolation", "parallel_branches"}


def test_keras_vit_load_model_reads_a_0_3_file():
    model = keras_vit.load_model(os.path.join(FOLDER, "dinov3_small.keras"))
    data = np.load(os.path.join(FOLDER, "dinov3_small.npz"))
    np.testing.assert_allclose(model.predict(data["input"], verbose=0), data["output"], atol=1e-5)
