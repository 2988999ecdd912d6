"""timm's `create_transform` as the oracle of the preprocessor: every resize rule among the pretrained configs of
timm's ViT modules (interpolation, crop_pct, crop_mode), applied by timm 1.0.29 with the real torchvision under
Pillow 12.3 to wide, tall and tiny photos (tests/fixtures/timm_transforms, tools/timm_transforms_registry.py).
The pretrained config read into a `DataConfig` as a timm repository's would be, with Pillow 12's pass order,
gives the same pixels to PIL's 8-bit rounding."""

import json
import os
import sys

import numpy as np
import pytest

import keras_vit
from conftest import FIXTURES, ROOT
from keras_vit.weights.timm import repository as timm_repository

HERE = os.path.join(FIXTURES, "timm_transforms")


def _cases():
    return json.load(open(os.path.join(HERE, "pillow12.json")))["configs"]


@pytest.mark.parametrize("key", sorted(_cases()))
def test_each_resize_rule_matches_timms_create_transform(key, tmp_path):
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    from timm_transforms_registry import photos

    c = _cases()[key]
    (tmp_path / "config.json").write_text(
        json.dumps(
            {
                "architecture": "vit_base_patch16_224",
                "pretrained_cfg": {k: c[k] for k in ("interpolation", "crop_pct", "crop_mode", "mean", "std")},
            }
        )
    )
    config = timm_repository.data_config(str(tmp_path))  # what a timm repository with this pretrained_cfg gives
    assert config.pass_order == "pillow13"  # the current Pillow's; these references were made under 12.3
    config = keras_vit.DataConfig.from_dict(dict(config.to_dict(), pass_order="pillow12"))
    layer = keras_vit.ImagePreprocessing(tuple(c["input_size"][1:]), config, normalize=False)
    refs = np.load(os.path.join(HERE, "pillow12.npz"))
    for photo in ("wide", "tall", "tiny"):
        gap = float(np.abs(np.asarray(layer(photos()[photo]))[0] - refs[f"{key}/{photo}"]).max())
        assert gap <= 1.2, (photo, gap)
