"""NaFlex (SigLIP 2's variable-resolution mode; timm's `naflexvit`): position tables kept at their trained grid
and resampled per input (`position_resampling`), batches of images of other aspect ratios cut into at most N
patches (`keras_vit.naflex_batch`) and the model on them (`keras_vit.naflex_forward`), against timm's own
batches and logits (tests/fixtures/backbones/*_naflex.npz, written by tools/make_backbone_fixtures.py; no
torch here), and the closed-form resampling rules against numpy / scipy. `save_pretrained` writes timm's own
NaFlexVit files (and timm's DiffAttention ViTs), which timm loads strictly (`make test-slow`)."""

import json
import os

import keras
import numpy as np
import pytest
import scipy.ndimage

import keras_vit
from keras_vit.nn.position_resampling import PositionResampling

from conftest import ROOT, run_on_backend

FIXTURES = os.path.join(ROOT, "tests", "fixtures", "backbones")
NAFLEX = ("naflex_siglip", "naflex_parfac", "radio_v3")


def _load(case: str, **kwargs):
    return keras_vit.load_model(os.path.join(FIXTURES, case), classifier_activation=None, **kwargs)


def _timm(case: str) -> dict:
    with np.load(os.path.join(FIXTURES, f"{case}_naflex.npz")) as f:
        return {k: f[k] for k in f.files}


@pytest.mark.parametrize("case", NAFLEX)
def test_a_naflex_batch_of_mixed_aspect_ratios_gives_timms_logits_per_image(case):
    model, want = _load(case), _timm(case)
    batch = {k: want[k] for k in ("patches", "patch_coord", "patch_valid")}
    assert len(set(batch["patch_valid"].sum(axis=1))) == 3  # three grids: 2x5, 6x2, 3x3 patches
    got = keras.ops.convert_to_numpy(keras_vit.naflex_forward(model, batch))
    assert np.abs(got - want["logits"]).max() <= 1e-4
    one = {k: v[1:2] for k, v in batch.items()}  # an image alone gives its row of the batch
    np.testing.assert_allclose(keras.ops.convert_to_numpy(keras_vit.naflex_forward(model, one))[0], got[1], atol=1e-5)


def test_naflex_batch_makes_timms_batch_from_the_images():
    want = _timm("naflex_siglip")
    images = [want[f"image_{i}"] for i in range(3)]
    batch = keras_vit.naflex_batch(images, 16, 12, mean=(0.5, 0.5, 0.5), std=(0.5, 0.5, 0.5))
    np.testing.assert_array_equal(batch["patch_valid"], want["patch_valid"])
    np.testing.assert_array_equal(batch["patch_coord"], want["patch_coord"])
    assert np.abs(batch["patches"] - want["patches"]).max() < 1e-4


def test_sequence_sizes_are_timms():
    """timm's `get_image_size_for_seq` on 200 random images, budgets and patch sizes (fixture)."""
    from keras_vit.vit.naflex import sequence_size

    with open(os.path.join(FIXTURES, "naflex_sizes.json")) as f:
        cases = json.load(f)
    assert len(cases) == 200
    for (h, w, p, n), size in cases:
        assert list(sequence_size(h, w, p, n)) == size, (h, w, p, n)


def _table(resampling: dict, stored: np.ndarray, rows: int, cols: int) -> np.ndarray:
    layer = keras_vit.nn.position_resampling.ResampledPositionEmbedding(resampling, 16)
    layer.build((1, None, stored.shape[-1]))
    if resampling.get("factorized"):
        layer.pos_embedding_y.assign(stored[0][None])
        layer.pos_embedding_x.assign(stored[1][None])
    else:
        layer.pos_embedding.assign(stored.reshape(1, -1, stored.shape[-1]))
    return keras.ops.convert_to_numpy(layer.table(rows, cols)).reshape(rows, cols, -1)


def test_resampling_rules_in_closed_form():
    rng = np.random.default_rng(0)
    grid = rng.normal(size=(4, 4, 3)).astype("float32")
    for interpolation in ("bicubic", "bilinear"):  # the stored grid reads the table unchanged
        np.testing.assert_allclose(_table(dict(grid=(4, 4), interpolation=interpolation), grid, 4, 4), grid, atol=1e-6)
    aligned = dict(grid=(4, 4), interpolation="bilinear", antialias=False, align_corners=True)
    np.testing.assert_allclose(
        _table(aligned, grid, 7, 5), scipy.ndimage.zoom(grid, (7 / 4, 5 / 4, 1), order=1), atol=1e-5
    )  # end points aligned: scipy's linear zoom
    square = _table(dict(aligned, aspect_preserving=True), grid, 7, 7)  # the longer side's square, top-left kept
    np.testing.assert_allclose(_table(dict(aligned, aspect_preserving=True), grid, 7, 3), square[:, :3], atol=1e-6)
    y, x = rng.normal(size=(2, 4, 3)).astype("float32")
    factorized = _table(dict(grid=(4, 4), factorized=True), np.stack([y, x]), 4, 4)
    np.testing.assert_allclose(factorized, y[:, None] + x[None, :], atol=1e-6)


def test_naflex_parts_are_checked_and_refused_by_name(tmp_path):
    with pytest.raises(ValueError, match="mean"):  # bad input to the batch maker names the field
        keras_vit.naflex_batch([np.zeros((32, 32, 3))], 16, 4, mean=(0.5, 0.5))
    with pytest.raises(ValueError, match="max_patches"):
        keras_vit.naflex_batch([np.zeros((32, 32, 3))], 16, 0)
    with pytest.raises(ValueError, match="align_corners"):
        PositionResampling.from_config(dict(grid=(4, 4), interpolation="bicubic", align_corners=True))
    with pytest.raises(ValueError, match="prefix_position_embedding=False"):
        keras_vit.VisionTransformer(16, 32, 64, 2, 1, input_shape=(32, 32, 3), position_resampling=dict(grid=(4, 4)))
    bare = os.path.join(FIXTURES, "radio_v3", "model.safetensors")
    with pytest.raises(ValueError, match="NaFlex checkpoint"):  # no name: its rule is not in the file
        keras_vit.load_model(bare, num_heads=2, input_shape=(32, 48, 3))
    plain = keras_vit.VisionTransformer(
        16,
        64,
        256,
        2,
        1,
        input_shape=(32, 48, 3),
        classes=5,
        num_register_tokens=7,
        final_norm=False,
        activation="gelu",
        layer_scale_init=1e-5,
    )
    before = [np.array(v) for v in plain.weights]
    with pytest.raises(ValueError, match="resampled per input"):
        keras_vit.load_weights(plain, bare)
    assert all(np.array_equal(a, np.array(v)) for a, v in zip(before, plain.weights))
    with pytest.raises(ValueError, match="position_resampling"):  # the official layout has no place for it
        keras_vit.save_npz(_load("radio_v3"), str(tmp_path / "m.npz"))
    assert not os.listdir(tmp_path)
    with pytest.raises(ValueError, match="resampled per input"):
        keras_vit.naflex_forward(plain, {k: v for k, v in _timm("radio_v3").items() if k.startswith("patch")})


def test_a_naflex_model_exports_its_fixed_size_graph_and_takes_lora_and_int8(tmp_path):
    from hub_export import export
    from hub_export.formats import runtime_model

    model = _load("naflex_parfac")
    x = np.load(os.path.join(FIXTURES, "naflex_parfac_input.npy"))
    want = np.load(os.path.join(FIXTURES, "naflex_parfac_logits.npy"))
    out = export(model, str(tmp_path / "onnx"), "classification", format="onnx")
    np.testing.assert_allclose(np.asarray(runtime_model(os.path.join(out, "model.onnx"))(x)), want, atol=1e-4)
    batch = {k: v for k, v in _timm("naflex_parfac").items() if k.startswith("patch")}
    before = keras.ops.convert_to_numpy(keras_vit.naflex_forward(model, batch))
    model.enable_lora(4, ["query", "value"])
    np.testing.assert_allclose(keras.ops.convert_to_numpy(keras_vit.naflex_forward(model, batch)), before, atol=1e-5)
    quantized = _load("naflex_parfac")
    quantized.quantize("int8")
    got = keras.ops.convert_to_numpy(keras_vit.naflex_forward(quantized, batch))
    assert np.abs(got - before).max() < 0.1 * np.abs(before).max()


_ON_BACKEND = """
import json, os, sys
import keras
import numpy as np
import keras_vit
folder, out = sys.argv[1], {}
for case in sys.argv[2:]:
    model = keras_vit.load_model(os.path.join(folder, case), classifier_activation=None)
    with np.load(os.path.join(folder, case + "_naflex.npz")) as f:
        want, batch = f["logits"], {k: f[k] for k in ("patches", "patch_coord", "patch_valid")}
    out[case] = float(np.abs(keras.ops.convert_to_numpy(keras_vit.naflex_forward(model, batch)) - want).max())
print(json.dumps(out))
"""


# PyTorch's leg is in make test-slow (as test_backbones')
@pytest.mark.parametrize("backend", ["jax", pytest.param("torch", marks=pytest.mark.slow)])
def test_naflex_batches_give_timms_logits_on_jax_and_pytorch(backend):
    gaps = run_on_backend(_ON_BACKEND, backend, FIXTURES, *NAFLEX)
    assert max(gaps.values()) <= 1e-4, gaps


def test_inspection_reads_a_resampled_table_at_the_models_grid():
    from keras_vit.analysis import inspect

    model = _load("naflex_parfac")
    x = np.load(os.path.join(FIXTURES, "naflex_parfac_input.npy"))
    table = keras.ops.convert_to_numpy(model.position_embedding.table(2, 3))[0]
    want = inspect.similarity_from_posemb(table[None], (2, 3), 0)
    np.testing.assert_allclose(inspect.position_embedding_similarity(model), want, atol=1e-6)
    out = model.intermediates(x, attention=True)
    assert out["blocks"][1].shape == (2, 10, 64) and out["attention"][1].shape == (2, 2, 10, 10)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(out["logits"]), model.predict(x, verbose=0), atol=1e-5)


@pytest.mark.parametrize("case", NAFLEX + ("dwee",))
def test_save_pretrained_writes_timms_own_state_dict_and_reads_back(case, tmp_path):
    """The written repository holds exactly the tensors timm wrote for the fixture (names, shapes, values), and
    loads back with the same logits."""
    from safetensors.numpy import load_file

    model = _load(case)
    repo = keras_vit.save_pretrained(model, str(tmp_path / "repo"))
    ours, theirs = (load_file(os.path.join(d, "model.safetensors")) for d in (repo, os.path.join(FIXTURES, case)))
    assert sorted(ours) == sorted(theirs)
    for key, value in theirs.items():
        np.testing.assert_array_equal(ours[key], value, err_msg=key)
    x = np.load(os.path.join(FIXTURES, f"{case}_input.npy"))
    back = keras_vit.load_model(repo, classifier_activation=None)
    np.testing.assert_array_equal(back.predict(x, verbose=0), model.predict(x, verbose=0))


@pytest.mark.slow
@pytest.mark.parametrize("case", NAFLEX + ("dwee",))
def test_timm_loads_our_save_pretrained_of_naflex_and_differential_models_strictly(case, tmp_path):
    from conftest import timm_reads_save_pretrained

    model = _load(case)
    x = np.load(os.path.join(FIXTURES, f"{case}_input.npy"))
    assert timm_reads_save_pretrained(model, x, tmp_path) <= 1e-5
