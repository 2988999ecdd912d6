"""MobileCLIP's convolutional stem (`convolutional_stem`; timm's `vit_base_mci_224`): the stem against its formula
written out in numpy, timm's logits on a fixture timm built (tools/make_backbone_fixtures.py, `mci_small`: timm's
own hybrid constructor with a narrower stem, BatchNorm statistics perturbed), the writers, `.keras`, any-size
inputs, ONNX and the other backends. No torch needed, except the slow test where timm reads ours."""

import json
import os

import keras
import numpy as np
import pytest
from scipy.special import erf

import keras_vit
from keras_vit.analysis import summary
from keras_vit.nn.convolutional_stem import ConvolutionalStem

from conftest import ROOT, run_on_backend

FIXTURES = os.path.join(ROOT, "tests", "fixtures", "backbones")
BARE = os.path.join(FIXTURES, "mci_small", "model.safetensors")
# the fixture's model: timm's MobileCLIP layout at width 64, one block, a 2x3 grid of 16-pixel patches
KEYWORDS = dict(
    patch_size=16,
    hidden_size=64,
    mlp_dim=256,
    num_heads=2,
    num_layers=1,
    input_shape=(32, 48, 3),
    classes=5,
    convolutional_stem=[[16, 4], [16, 2]],
    activation="gelu",
    prefix_position_embedding=False,
    classifier_activation=None,
)


def _fixture_model(**overrides):
    model = keras_vit.VisionTransformer(**{**KEYWORDS, **overrides}, weights=None)
    keras_vit.load_weights(model, BARE, old_grid=(2, 3))  # a bare file does not state its grid
    return model


def _data(name: str) -> np.ndarray:
    return np.load(os.path.join(FIXTURES, f"mci_small_{name}.npy"))


def test_the_stem_is_non_overlapping_convolutions_batchnorm_and_the_exact_gelu():
    """Each layer on each k x k cell alone: (cell · W − mean) / sqrt(var + 1e-5) · γ + β, then x Φ(x)."""
    stem = ConvolutionalStem([[6, 4], [5, 2]])
    x = np.random.default_rng(0).normal(size=(2, 16, 24, 3)).astype("float32")
    stem.build(x.shape)
    rng = np.random.default_rng(1)
    for conv, norm in zip(stem.convs, stem.norms):
        for variable in (conv.kernel, norm.gamma, norm.beta, norm.moving_mean):
            variable.assign(rng.normal(size=variable.shape).astype("float32"))
        norm.moving_variance.assign(rng.uniform(0.5, 2.0, norm.moving_variance.shape).astype("float32"))
    want = x.astype("float64")
    for conv, norm in zip(stem.convs, stem.norms):
        k = conv.kernel.shape[0]
        b, h, w, c = want.shape
        cells = want.reshape(b, h // k, k, w // k, k, c).transpose(0, 1, 3, 2, 4, 5).reshape(b, h // k, w // k, -1)
        y = cells @ keras.ops.convert_to_numpy(conv.kernel).reshape(-1, conv.filters)
        mean, var, gamma, beta = (
            keras.ops.convert_to_numpy(v) for v in (norm.moving_mean, norm.moving_variance, norm.gamma, norm.beta)
        )
        y = (y - mean) / np.sqrt(var + 1e-5) * gamma + beta
        want = y * 0.5 * (1 + erf(y / np.sqrt(2)))
    np.testing.assert_allclose(keras.ops.convert_to_numpy(stem(x)), want, atol=2e-5)


def test_mobileclip_gives_timms_logits_and_keeps_its_stem_through_keras_files(tmp_path):
    model = _fixture_model()
    x = _data("input")
    logits = model.predict(x, verbose=0)
    assert np.abs(logits - _data("logits")).max() <= 1e-5
    assert model.patch_embedding.patch_size == 2 and model.effective_patch_size == 16 and model.grid_size == (2, 3)
    model.save(tmp_path / "m.keras")
    back = keras.saving.load_model(tmp_path / "m.keras")
    np.testing.assert_allclose(back.predict(x, verbose=0), logits, atol=1e-6)
    assert back.variant == model.variant and back.describe()["convolutional_stem"] == [[16, 4], [16, 2]]
    any_size = _fixture_model(input_shape=(None, None, 3), position_grid=(2, 3))
    np.testing.assert_allclose(any_size.predict(x, verbose=0), logits, atol=1e-5)
    assert any_size.predict(np.zeros((1, 64, 32, 3), "float32"), verbose=0).shape == (1, 5)


def test_the_stems_flops_are_its_convolutions():
    model = keras_vit.VisionTransformer(**{**KEYWORDS, "input_shape": (64, 64, 3)}, weights=None)
    plain = keras_vit.VisionTransformer(
        **{**KEYWORDS, "input_shape": (64, 64, 3), "convolutional_stem": None}, weights=None
    )
    stem = 2 * 16 * 16 * (4 * 4 * 3) * 16 + 2 * 8 * 8 * (2 * 2 * 16) * 16  # two convolutions' multiply-adds
    embedding = 2 * 4 * 4 * (2 * 2 * 16) * 64 - 2 * 4 * 4 * (16 * 16 * 3) * 64  # the 2x2 embedding vs a 16x16 one
    assert summary.forward_flops(model) - summary.forward_flops(plain) == stem + embedding


def test_what_the_files_do_not_state_or_cannot_hold_is_refused_by_name(tmp_path):
    with pytest.raises(ValueError, match="convolutional stem.*timm architecture's name"):
        keras_vit.load_model(BARE, num_heads=2)
    model = _fixture_model()
    with pytest.raises(ValueError, match="a convolutional stem"):
        keras_vit.save_npz(model, str(tmp_path / "m.npz"))
    with pytest.raises(ValueError, match="convolutional_stem=.*16, 4"):  # timm fixes MobileCLIP's widths by name
        keras_vit.save_pretrained(model, str(tmp_path / "repo"))
    with pytest.raises(ValueError, match="hybrid"):
        keras_vit.save_safetensors(model, str(tmp_path / "hf"), layout="transformers")
    assert os.listdir(tmp_path) == []
    with pytest.raises(ValueError, match="does not divide patch_size=16"):
        keras_vit.VisionTransformer(**{**KEYWORDS, "convolutional_stem": [[16, 3]]}, weights=None)
    with pytest.raises(ValueError, match="two stems"):
        keras_vit.VisionTransformer(**{**KEYWORDS, "resnet_layers": (), "input_shape": (64, 64, 3)}, weights=None)
    with pytest.raises(ValueError, match="channels, kernel size"):
        keras_vit.VisionTransformer(**{**KEYWORDS, "convolutional_stem": [16, 4]}, weights=None)


def test_save_pretrained_writes_timms_mobileclip_and_reads_back(tmp_path):
    """By its timm name (the stem's widths are the name's): timm's ConvStem keys, the embedding as its last
    convolution, BatchNorm's counter; read back with the same logits."""
    from safetensors.numpy import load_file

    model = keras_vit.create_model(
        "vit_base_mci_224", num_layers=1, input_shape=(32, 48, 3), classes=3, classifier_activation=None
    )
    x = np.random.default_rng(0).uniform(-1, 1, (2, 32, 48, 3)).astype("float32")
    repo = keras_vit.save_pretrained(model, str(tmp_path / "repo"))
    with open(os.path.join(repo, "config.json")) as f:
        config = json.load(f)
    assert config["architecture"] == "vit_base_mci_224" and config["model_args"]["depth"] == 1
    assert config["pretrained_cfg"]["first_conv"] == "patch_embed.backbone.0.conv"  # timm's own for this name
    sd = load_file(os.path.join(repo, "model.safetensors"))
    assert sd["patch_embed.backbone.2.conv.weight"].shape == (768, 192, 2, 2)
    assert sd["patch_embed.backbone.0.bn.num_batches_tracked"].dtype == np.int64
    assert not any(k.startswith("patch_embed.proj") for k in sd)
    back = keras_vit.load_model(repo, classifier_activation=None)
    np.testing.assert_array_equal(back.predict(x, verbose=0), model.predict(x, verbose=0))


def test_a_mobileclip_exports_to_onnx_with_its_logits(tmp_path):
    from hub_export import export
    from hub_export.formats import runtime_model

    out = export(_fixture_model(), str(tmp_path / "onnx"), "classification", format="onnx")
    got = np.asarray(runtime_model(os.path.join(out, "model.onnx"))(_data("input")))
    np.testing.assert_allclose(got, _data("logits"), atol=1e-4)


_ON_BACKEND = """
import json, sys, numpy as np, keras_vit
folder = sys.argv[1]
model = keras_vit.VisionTransformer(patch_size=16, hidden_size=64, mlp_dim=256, num_heads=2, num_layers=1,
    input_shape=(32, 48, 3), classes=5, convolutional_stem=[[16, 4], [16, 2]], activation="gelu",
    prefix_position_embedding=False, classifier_activation=None)
keras_vit.load_weights(model, folder + "/mci_small/model.safetensors", old_grid=(2, 3))
x = np.load(folder + "/mci_small_input.npy")
gap = float(np.abs(np.asarray(model.predict(x, verbose=0)) - np.load(folder + "/mci_small_logits.npy")).max())
print(json.dumps({"gap": gap}))
"""


# PyTorch's leg is in make test-slow (as test_backbones')
@pytest.mark.parametrize("backend", ["jax", pytest.param("torch", marks=pytest.mark.slow)])
def test_mobileclip_gives_timms_logits_on_jax_and_pytorch(backend):
    assert run_on_backend(_ON_BACKEND, backend, FIXTURES)["gap"] <= 1e-5


@pytest.mark.slow
def test_timm_loads_our_save_pretrained_of_mobileclip_strictly(tmp_path):
    from conftest import timm_reads_save_pretrained

    model = keras_vit.create_model(
        "vit_base_mci_224", num_layers=1, input_shape=(32, 48, 3), classes=3, classifier_activation=None
    )
    rng = np.random.default_rng(0)
    for variable in model.weights:  # non-trivial statistics and weights, so a dropped or swapped tensor shows
        shape = tuple(variable.shape)
        value = rng.uniform(0.5, 1.5, shape) if "moving_variance" in variable.path else rng.normal(0, 0.05, shape)
        variable.assign(value.astype(variable.dtype))
    x = rng.uniform(-1, 1, (2, 32, 48, 3)).astype("float32")
    assert timm_reads_save_pretrained(model, x, tmp_path) <= 1e-5
