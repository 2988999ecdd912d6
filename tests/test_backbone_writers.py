"""timm's layout written back for the backbones beyond the paper's ViT (timm's `eva` module: EVA-02, DINOv3, PE, RoPE-ViT; AIMv2,
BEiT-3, Sapiens2, parallel and post-norm blocks of its `vision_transformer`): `save_pretrained` and
`save_safetensors` write the state dict timm itself wrote for each fixture (tools/make_backbone_fixtures.py),
tensor for tensor, under a registered architecture with the model's parts; what no registered architecture
holds is refused by name and nothing is written. No torch needed, except the slow test where timm reads ours."""

import json
import os

import numpy as np
import pytest
from safetensors.numpy import load_file

import keras_vit
from keras_vit.vit import timm_table

from test_backbones import CASES, FIXTURES, _load

BACKBONES = tuple(sorted(c for c in CASES if not c.startswith(("naflex", "radio")) and c != "dwee"))


def _assert_timms_tensors(path: str, case: str) -> None:
    ours, theirs = load_file(path), load_file(os.path.join(FIXTURES, case, "model.safetensors"))
    assert sorted(ours) == sorted(theirs)
    for key, value in theirs.items():
        np.testing.assert_array_equal(ours[key], value, err_msg=key)


@pytest.mark.parametrize("case", BACKBONES)
def test_save_pretrained_writes_timms_own_state_dict_of_each_backbone(case, tmp_path):
    """Names, shapes and values as timm wrote them; the fixture's own architecture with its size as model_args;
    read back with the same logits."""
    model, x = _load(case)
    repo = keras_vit.save_pretrained(model, str(tmp_path / "repo"))
    _assert_timms_tensors(os.path.join(repo, "model.safetensors"), case)
    with open(os.path.join(repo, "config.json")) as f:
        ours = json.load(f)
    with open(os.path.join(FIXTURES, case, "config.json")) as f:
        theirs = json.load(f)
    assert ours["architecture"] == theirs["architecture"]  # the nearest registered width: the fixture's own
    entry = timm_table.facts(theirs["architecture"])
    fields = dict(
        img_size="image_size",
        depth="num_layers",
        embed_dim="hidden_size",
        num_heads="num_heads",
        num_classes="classes",
        num_kv_heads="key_value_heads",
    )
    for arg, field in fields.items():  # what each builds: its model_args over the architecture's own
        assert ours["model_args"].get(arg, entry.get(field)) == theirs["model_args"].get(arg, entry.get(field)), arg
    back = keras_vit.load_model(repo, classifier_activation=None)
    assert back.variant == model.variant
    np.testing.assert_array_equal(back.predict(x, verbose=0), model.predict(x, verbose=0))


@pytest.mark.parametrize("case", ("eva02_tiny", "dinov3_small", "pwee"))
def test_save_safetensors_writes_the_bare_state_dict_timm_wrote(case, tmp_path):
    model, _ = _load(case)
    _assert_timms_tensors(keras_vit.save_safetensors(model, str(tmp_path / "m.safetensors")), case)


def test_parts_no_registered_architecture_holds_are_refused_by_name_and_write_nothing(tmp_path):
    """Rotary embeddings in parallel layers: timm registers no such architecture."""
    model = keras_vit.VisionTransformer(
        patch_size=4,
        hidden_size=32,
        mlp_dim=64,
        num_heads=2,
        num_layers=1,
        input_shape=(8, 8, 3),
        classes=3,
        parallel_layers=True,
        absolute_position_embedding=False,
        weights=None,
        rotary_embedding=dict(form="axial", temperature=100.0),
    )
    with pytest.raises(ValueError, match="no architecture timm .* registers has all of this model's.*closest"):
        keras_vit.save_pretrained(model, str(tmp_path / "repo"))
    with pytest.raises(ValueError, match="rotary_embedding"):
        keras_vit.save_safetensors(model, str(tmp_path / "m.safetensors"))
    assert os.listdir(tmp_path) == []


@pytest.mark.slow
@pytest.mark.parametrize("case", BACKBONES)
def test_timm_loads_our_save_pretrained_of_each_backbone_strictly(case, tmp_path):
    from conftest import timm_reads_save_pretrained

    model, x = _load(case)
    assert timm_reads_save_pretrained(model, x, tmp_path) <= 1e-5
