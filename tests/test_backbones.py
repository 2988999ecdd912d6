"""The backbones beyond the paper's ViT (timm's `eva` module: EVA-02, EVA-CLIP, DINOv3, Perception Encoder, RoPE-ViT and
RoPE-Mixed; AIMv2 and BEiT-3 of its `vision_transformer` module): each
family's timm repository (tools/make_backbone_fixtures.py: written by timm 1.0.31 itself at a non-square 2x3
grid, every parameter perturbed) gives timm's logits, keeps its parts through `.keras`, the feature API, any-size
inputs, LoRA, int8 and an ONNX export, and is refused where a writer cannot hold it. Rotary embeddings are
checked against the RoFormer formula written out in numpy. No torch needed."""

import os

import keras
import numpy as np
import pytest

import keras_vit
from keras_vit.nn.rotary import Rotary, RotaryPositionEmbedding, apply_rotary, rotation_matrix

from conftest import ROOT, run_on_backend

pytestmark = pytest.mark.long  # minutes: started first under `make test`'s two workers


def _np(x) -> np.ndarray:
    return keras.ops.convert_to_numpy(x)


FIXTURES = os.path.join(ROOT, "tests", "fixtures", "backbones")
# case -> the options that make it that family, and its token layout
CASES = {
    "eva02_tiny": (
        dict(
            swiglu=True,
            absolute_position_embedding=True,
            fc_norm=True,
            class_token=True,
            rotary_embedding=dict(
                form="axial",
                temperature=10000.0,
                offset=0.0,
                axis_order="ij",
                reference_grid=[16, 16],
                rotate_half=False,
            ),
        ),
        {"class": (0, 1), "patches": (1, 7)},
    ),
    "eva02_clip": (dict(swiglu=True, mlp_norm=True, attention_norm=True), {"class": (0, 1), "patches": (1, 7)}),
    # parallel branches (timm's ParallelThingsBlock): two attention and two MLP branches, each with its LayerScale
    "things_18x2": (dict(parallel_branches=2, layer_scale_init=1e-5), {"class": (0, 1), "patches": (1, 7)}),
    "dinov3_small": (
        dict(
            absolute_position_embedding=False,
            num_register_tokens=4,
            layer_scale_init=1e-5,
            rotary_embedding=dict(
                form="centered", temperature=100.0, offset=0.0, axis_order="ij", reference_grid=None, rotate_half=True
            ),
        ),
        {"class": (0, 1), "registers": (1, 5), "patches": (5, 11)},
    ),
    "pe_core_tiny": (
        dict(pre_norm=True, patch_bias=False, attention_pooling_heads=8, pooling_includes_prefix=True),
        {"class": (0, 1), "patches": (1, 7)},
    ),
    "rope_ape_small": (
        dict(absolute_position_embedding=True, layer_scale_init=1e-5),
        {"class": (0, 1), "patches": (1, 7)},
    ),
    "aimv2_large": (
        dict(rms_norm=True, patch_norm=True, swiglu=True, projection_bias=False, qkv_bias=False),
        {"patches": (0, 6)},
    ),
    "beit3_base": (dict(attention_norm=True, mlp_norm=True, swiglu=False), {"class": (0, 1), "patches": (1, 7)}),
    "sapiens2_base": (
        dict(
            rms_norm=True, qk_norm=True, key_value_heads=(4, 2), attention_only_layer_scale=True, num_register_tokens=8
        ),
        {"class": (0, 1), "registers": (1, 9), "patches": (9, 15)},
    ),
    "rpn_base": (dict(post_norm=True, layer_scale_init=None, fc_norm=True), {"patches": (0, 6)}),
    "rope_mixed_small": (
        dict(
            absolute_position_embedding=False,
            rotary_embedding=dict(
                form="mixed", temperature=10.0, offset=0.0, axis_order="xy", reference_grid=None, rotate_half=False
            ),
        ),
        {"class": (0, 1), "patches": (1, 7)},
    ),
    "xp_base": (
        dict(parallel_layers=True, rms_norm=True, qk_norm=True, qkv_bias=False, prefix_position_embedding=False),
        {"class": (0, 1), "patches": (1, 7)},
    ),
    "pwee": (
        dict(parallel_layers=True, layer_scale_init=1e-5, num_register_tokens=1, qkv_bias=True),
        {"registers": (0, 1), "patches": (1, 7)},
    ),
    # differential attention (the Differential Transformer) in three blocks, each with its own lambda_init
    "dwee": (
        dict(
            differential_attention=True, layer_scale_init=1e-5, num_register_tokens=1, prefix_position_embedding=False
        ),
        {"registers": (0, 1), "patches": (1, 7)},
    ),
    "dpwee": (
        dict(
            differential_attention=True,
            parallel_layers=True,
            layer_scale_init=1e-5,
            num_register_tokens=1,
            prefix_position_embedding=False,
        ),
        {"registers": (0, 1), "patches": (1, 7)},
    ),
    # NaFlex (timm's naflexvit; tests/test_naflex.py checks their variable-resolution batches)
    "naflex_siglip": (
        dict(
            prefix_position_embedding=False,
            activation="gelu_tanh",
            position_resampling=dict(
                grid=[16, 16],
                factorized=False,
                interpolation="bilinear",
                antialias=True,
                align_corners=False,
                aspect_preserving=False,
            ),
        ),
        {"patches": (0, 6)},
    ),
    "naflex_parfac": (
        dict(
            num_register_tokens=4,
            fc_norm=True,
            position_resampling=dict(
                grid=[16, 16],
                factorized=True,
                interpolation="bicubic",
                antialias=True,
                align_corners=False,
                aspect_preserving=True,
            ),
        ),
        {"registers": (0, 4), "patches": (4, 10)},
    ),
    "radio_v3": (
        dict(
            num_register_tokens=7,
            final_norm=False,
            position_resampling=dict(
                grid=[12, 12],
                factorized=False,
                interpolation="bilinear",
                antialias=False,
                align_corners=True,
                aspect_preserving=True,
            ),
        ),
        {"class": (0, 1), "registers": (1, 8), "patches": (8, 14)},
    ),
}


def _load(case: str, **kwargs):
    model = keras_vit.load_model(os.path.join(FIXTURES, case), classifier_activation=None, **kwargs)
    return model, np.load(os.path.join(FIXTURES, f"{case}_input.npy"))


def _timm(case: str) -> np.ndarray:
    return np.load(os.path.join(FIXTURES, f"{case}_logits.npy"))


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_backbone_gives_timms_logits_and_keeps_its_parts(case, tmp_path):
    model, x = _load(case)
    options, layout = CASES[case]
    assert model.token_layout == layout
    for field, value in options.items():
        got = getattr(model.variant, field)
        assert (got.to_config() if hasattr(got, "to_config") else got) == value, field
    logits = model.predict(x, verbose=0)
    assert np.abs(logits - _timm(case)).max() <= 1e-4
    assert np.abs(_np(model(x)) - _timm(case)).max() <= 1e-4  # the eager path (one block function)
    model.save(tmp_path / "m.keras")
    back = keras.saving.load_model(tmp_path / "m.keras")
    np.testing.assert_allclose(back.predict(x, verbose=0), logits, atol=1e-6)
    assert back.variant == model.variant and back.describe() == model.describe()


def test_each_family_lists_timms_names():
    counts = {
        family: len(keras_vit.list_models(family))
        for family in ("eva02", "dinov3", "pe", "rope", "aimv2", "siglip2", "naflex", "mobileclip")
    }
    # timm 1.0.31; SigLIP 2: the SigLIP architectures with v2_webli weights (30 fixed-size towers, 2 NaFlex)
    assert counts == {
        "eva02": 12,
        "dinov3": 16,
        "pe": 11,
        "rope": 16,
        "aimv2": 12,
        "siglip2": 32,
        "naflex": 14,
        "mobileclip": 1,
    }, counts


# slow (~30 s: sixteen full-size builds up to AIMv2-L): a walk; the fixtures above build each family small
@pytest.mark.slow
def test_timm_names_of_the_eva_module_build_with_timms_parameter_counts():
    for name in (
        "eva02_tiny_patch14_224",
        "vit_small_patch16_dinov3",
        "vit_pe_core_tiny_patch16_384",
        "vit_small_patch16_rope_224",
        "vit_small_plus_patch16_dinov3",
        "vit_small_patch16_rope_mixed_224",
        "aimv2_large_patch14_224",
        "vit_base_patch16_sapiens2",
        "vit_pwee_patch16_reg1_gap_256",
        "naflexvit_base_patch16_siglip",
        "naflexvit_base_patch16_parfac_gap",
        "naflexvit_base_patch16_radio_v3",
        "vit_dwee_patch16_reg1_gap_256",
        "vit_dlittle_patch16_reg1_gap_256",
    ):
        model = keras_vit.create_model(name)
        assert model.count_params() == keras_vit.vit.timm_table.parameter_count(name), name
    # timm's DiffParallelScalingBlock has one output projection (one bias) over both branches; keras_vit keeps the
    # attention's and the MLP's apart, the MLP's bias loaded as zeros: 16 blocks x 256 more
    dpwee = keras_vit.create_model("vit_dpwee_patch16_reg1_gap_256")
    assert dpwee.count_params() == keras_vit.vit.timm_table.parameter_count("vit_dpwee_patch16_reg1_gap_256") + 16 * 256


def test_what_keras_vit_does_not_build_yet_is_refused_by_name():
    with pytest.raises(ValueError, match="MAP head whose MLP width"):
        keras_vit.create_model("vit_pe_core_gigantic_patch14_448")
    with pytest.raises(ValueError, match="hybrid CNN stem other than BiT's ResNet"):
        keras_vit.create_model("vit_small_resnet26d_224")
    with pytest.raises(ValueError, match="hybrid CNN stem other than BiT's ResNet"):
        keras_vit.create_model("vit_base_resnet50d_224")
    # refused until parallel branches were a field of the record: timm's ParallelThingsBlock now builds
    assert keras_vit.create_model("vit_small_patch16_18x2_224", num_layers=1).variant.parallel_branches == 2


def _roformer(x: np.ndarray, positions: np.ndarray, temperature: float, half: bool, scale: float) -> np.ndarray:
    """RoFormer's rotation written out: for each axis a quarter of the channel pairs, pair j of axis a turned by
    scale * position_a / temperature ** (j / n); pairs are (i, i + d/2) with `half`, else (2i, 2i + 1)."""
    d = x.shape[-1]
    n = d // 4
    freqs = scale / temperature ** (np.arange(n) / n)
    angles = np.concatenate([positions[:, a : a + 1] * freqs for a in range(2)], axis=-1)  # (tokens, d/2)
    out = x.astype("float64").copy()
    for j in range(d // 2):
        a, b = (j, j + d // 2) if half else (2 * j, 2 * j + 1)
        c, s = np.cos(angles[:, j]), np.sin(angles[:, j])
        out[..., a] = x[..., a] * c - x[..., b] * s
        out[..., b] = x[..., b] * c + x[..., a] * s
    return out


@pytest.mark.parametrize("form,half,order", [("axial", False, "ij"), ("axial", False, "xy"), ("centered", True, "ij")])
def test_rotary_embeddings_are_roformers_rotation_of_each_patch_by_its_grid_position(form, half, order):
    rows, cols, d, prefix = 3, 5, 16, 2
    rotary = Rotary(
        form=form, temperature=100.0, offset=0.5 if form == "axial" else 0.0, axis_order=order, rotate_half=half
    )
    table = _np(RotaryPositionEmbedding(rotary, d, 8, prefix)(np.zeros((1, rows * 8, cols * 8, 3), "float32")))
    x = np.random.default_rng(0).normal(size=(1, prefix + rows * cols, 2, d)).astype("float32")
    y = _np(apply_rotary(keras.ops.convert_to_tensor(x), table, rotation_matrix(d, half)))
    r, c = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
    if form == "axial":
        pos = np.stack([r.ravel() + 0.5, c.ravel() + 0.5], -1)
    else:  # patch centres in [-1, 1] per axis
        pos = np.stack([(2 * r.ravel() + 1) / rows - 1, (2 * c.ravel() + 1) / cols - 1], -1)
    pos = pos if order == "ij" else pos[:, ::-1]
    want = _roformer(x[:, prefix:].transpose(0, 2, 1, 3), pos, 100.0, half, 2 * np.pi if form == "centered" else 1.0)
    np.testing.assert_allclose(y[:, prefix:], want.transpose(0, 2, 1, 3), atol=2e-5)
    np.testing.assert_array_equal(y[:, :prefix], x[:, :prefix])  # prefix tokens are not rotated
    np.testing.assert_allclose(np.linalg.norm(y, axis=-1), np.linalg.norm(x, axis=-1), rtol=1e-5)  # a rotation


def test_rotary_embedding_keywords_are_checked_by_name():
    with pytest.raises(ValueError, match="unknown keys"):
        keras_vit.VisionTransformer(16, 64, 128, 2, 1, rotary_embedding=dict(form="axial", base=10))
    with pytest.raises(ValueError, match="form"):
        keras_vit.VisionTransformer(16, 64, 128, 2, 1, rotary_embedding=dict(form="spiral"))
    with pytest.raises(ValueError, match="divisible by 4"):
        keras_vit.VisionTransformer(16, 60, 128, 2, 1, input_shape=(32, 32, 3), rotary_embedding=dict())
    with pytest.raises(ValueError, match="do not apply"):
        keras_vit.VisionTransformer(16, 64, 128, 2, 1, rotary_embedding=dict(form="mixed", rotate_half=True))


def test_an_any_size_dinov3_follows_its_input_grid_and_intermediates_agree():
    fixed, x = _load("dinov3_small")
    any_size, _ = _load("dinov3_small", input_shape=(None, None, 3))
    np.testing.assert_allclose(_np(any_size(x)), _np(fixed(x)), atol=1e-5)
    bigger = np.random.default_rng(1).uniform(-1, 1, (1, 64, 32, 3)).astype("float32")
    assert _np(any_size(bigger)).shape == (1, 64)
    out = fixed.intermediates(x)
    assert sorted(out["blocks"]) == [0, 1] and out["blocks"][0].shape == (2, 11, 64)
    np.testing.assert_allclose(_np(out["pre_logits"]), fixed.predict(x, verbose=0), atol=1e-5)


def test_lora_int8_and_remat_on_a_backbone_with_every_new_part():
    """EVA-CLIP has rotary embeddings, the SwiGLU with its norm and the attention-output norm."""
    model, x = _load("eva02_clip")
    logits = model.predict(x, verbose=0)
    model.enable_lora(4, ["query", "value", "Dense_0", "Dense_1"])
    np.testing.assert_allclose(model.predict(x, verbose=0), logits, atol=1e-6)  # B starts at zero
    remat, _ = _load("eva02_clip", remat=True)
    np.testing.assert_allclose(remat.predict(x, verbose=0), logits, atol=1e-5)
    quantized, _ = _load("eva02_clip")
    quantized.quantize("int8")
    assert np.abs(quantized.predict(x, verbose=0) - logits).max() < 0.1 * np.abs(logits).max()


def test_a_backbone_exports_to_onnx_with_its_logits(tmp_path):
    from hub_export import export
    from hub_export.formats import runtime_model

    model, x = _load("pe_core_tiny")
    out = export(model, str(tmp_path / "onnx"), "classification", format="onnx")
    got = np.asarray(runtime_model(os.path.join(out, "model.onnx"))(x))
    np.testing.assert_allclose(got, _timm("pe_core_tiny"), atol=1e-4)


def test_a_packed_gated_mlp_is_refused_where_its_activation_is_not_stated(tmp_path):
    bare = os.path.join(FIXTURES, "eva02_tiny", "model.safetensors")
    with pytest.raises(ValueError, match="packed gated MLP"):
        keras_vit.load_model(bare, num_heads=3, input_shape=(28, 42, 3))
    model = keras_vit.VisionTransformer(
        14,
        96,
        256,
        3,
        2,
        input_shape=(28, 42, 3),
        classes=5,
        classifier="gap",
        fc_norm=True,
        class_token=True,
        activation="gelu",
        key_bias=False,
    )
    before = [np.array(v) for v in model.weights]
    with pytest.raises(ValueError, match="packed gated MLP"):
        keras_vit.load_weights(model, bare)
    assert all(np.array_equal(a, np.array(v)) for a, v in zip(before, model.weights))


_ON_BACKEND = """
import json, os, sys
import keras
import numpy as np
import keras_vit
folder, out = sys.argv[1], {}
for case in sys.argv[2:]:
    model = keras_vit.load_model(os.path.join(folder, case), classifier_activation=None)
    x = np.load(os.path.join(folder, case + "_input.npy"))
    want = np.load(os.path.join(folder, case + "_logits.npy"))
    eager = keras.ops.convert_to_numpy(model(x))
    out[case] = [float(np.abs(model.predict(x, verbose=0) - want).max()), float(np.abs(eager - want).max())]
print(json.dumps(out))
"""


# PyTorch's leg (a fresh interpreter, ~22 s) is in make test-slow; PyTorch stays in the default suite through
# test_backends (ViT) and test_export_backends
@pytest.mark.parametrize("backend", ["jax", pytest.param("torch", marks=pytest.mark.slow)])
def test_the_backbones_give_timms_logits_on_jax_and_pytorch(backend):
    """Two models per process: EVA-02 and DINOv3 (axial and centred rotary embeddings, interleaved and half
    pairs) share the one-block-function cache on JAX without taking each other's function."""
    gaps = run_on_backend(
        _ON_BACKEND, backend, FIXTURES, "eva02_clip", "dinov3_small", "pe_core_tiny", "xp_base", "radio_v3", "dwee"
    )
    assert max(max(g) for g in gaps.values()) <= 1e-4, gaps


def _shard(folder: str, out) -> None:
    """The fixture's repository with its weights in two shards and an index, as the hub serves big models."""
    import json
    import shutil

    from safetensors.numpy import load_file, save_file

    out.mkdir()
    shutil.copy(os.path.join(folder, "config.json"), out / "config.json")
    sd = load_file(os.path.join(folder, "model.safetensors"))
    names = sorted(sd)
    halves = {"model-00001-of-00002.safetensors": names[::2], "model-00002-of-00002.safetensors": names[1::2]}
    for shard, keys in halves.items():
        save_file({k: sd[k] for k in keys}, str(out / shard), metadata={"format": "pt"})
    weight_map = {k: shard for shard, keys in halves.items() for k in keys}
    (out / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))


def test_a_sharded_repository_reads_as_one_source_and_a_disagreeing_index_is_refused(tmp_path):
    _shard(os.path.join(FIXTURES, "dinov3_small"), tmp_path / "sharded")
    model = keras_vit.load_model(str(tmp_path / "sharded"), classifier_activation=None)
    x = np.load(os.path.join(FIXTURES, "dinov3_small_input.npy"))
    assert np.abs(model.predict(x, verbose=0) - _timm("dinov3_small")).max() <= 1e-4
    index = tmp_path / "sharded" / "model.safetensors.index.json"
    text = index.read_text()
    index.write_text(text.replace("model-00002-of-00002", "model-00001-of-00002", 1))
    with pytest.raises(ValueError, match="does not hold what the index says"):
        keras_vit.load_model(str(tmp_path / "sharded"))


def test_a_sharded_hub_repository_resolves_offline_through_the_cache(tmp_path):
    pytest.importorskip("huggingface_hub")
    import subprocess
    import sys

    from test_timm_hub import _hub_cache

    _shard(os.path.join(FIXTURES, "dinov3_small"), tmp_path / "sharded")
    files = {p.name: str(p) for p in (tmp_path / "sharded").iterdir()}
    _hub_cache(tmp_path / "hub", "timm/vit_test.dinov3", "main", "c" * 40, files)
    script = (
        "import sys, numpy as np, keras_vit; m = keras_vit.load_model('hf-hub:timm/vit_test.dinov3', "
        "classifier_activation=None); np.save(sys.argv[2], m.predict(np.load(sys.argv[1]), verbose=0))"
    )
    env = dict(
        os.environ, HF_HUB_CACHE=str(tmp_path / "hub"), HF_HUB_OFFLINE="1", TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=ROOT
    )
    out = str(tmp_path / "logits.npy")
    done = subprocess.run(
        [sys.executable, "-c", script, os.path.join(FIXTURES, "dinov3_small_input.npy"), out],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert np.abs(np.load(out) - _timm("dinov3_small")).max() <= 1e-4


def test_a_rotary_backbone_exports_to_saved_model_and_litert_with_its_logits(tmp_path):
    from hub_export import export
    from hub_export.export import exported_file
    from hub_export.formats import runtime_model

    model, x = _load("dinov3_small")
    logits = model.predict(x, verbose=0)
    for fmt in ("saved_model", "litert"):
        runtime = runtime_model(exported_file(export(model, str(tmp_path / fmt), "feature_vector", format=fmt)))
        np.testing.assert_allclose(np.asarray(runtime(x)), logits, atol=1e-4, err_msg=fmt)


def test_layout_map_splits_the_swiglu_like_the_paper_mlp():
    import re

    from keras_vit.vit.sharding import MEGATRON

    model, _ = _load("eva02_clip")
    split = {v.path for v in model.weights for pattern in MEGATRON if re.fullmatch(pattern, v.path)}
    assert {p for p in split if "/gate/" in p} == {p for p in split if "/Dense_0/" in p}.__class__(
        p.replace("/Dense_0/", "/gate/") for p in split if "/Dense_0/" in p
    )
    assert any("/gate/kernel" in p for p in split)


def test_recipes_fine_tune_a_rotary_backbone_from_its_repository(tmp_path):
    """DINOv3 (rotary embeddings, storage tokens, no position table) through the training recipe: the run starts
    from the repository's weights and keeps its parts and preprocessing."""
    from recipes import train
    from recipes.configs import demo

    from keras_vit.weights.official import model_params

    c = demo.get_config("pretrain")
    c.model.update(name="", patch_size=0, hidden_size=0, mlp_dim=0, num_heads=0, num_layers=0)
    c.update(
        batch_size=8,
        total_steps=2,
        log_every=1,
        checkpoint_every=2,
        init_weights=os.path.join(FIXTURES, "dinov3_small"),
    )
    c.dataset.update(eval_split="", image_size=32)
    summary = train.train_and_evaluate(c, str(tmp_path))
    assert np.isfinite(summary["final_train"]["loss"])
    trained = keras.saving.load_model(summary["model"], compile=False)
    source, _ = _load("dinov3_small")
    assert trained.variant == source.variant and trained.data_config.mean == source.data_config.mean
    before, after = model_params(source), model_params(trained)
    body = [k for k in before if not k.startswith("head")]
    assert body and max(float(np.abs(after[k] - before[k]).max()) for k in body) < 0.05


def test_inspection_and_few_shot_features_of_rotary_backbones():
    from keras_vit.analysis.fewshot import feature_extractor
    from keras_vit.analysis.inspect import attention_rollout

    model, x = _load("eva02_clip")  # a class token: the rollout reads its row
    maps = attention_rollout(model, x, upsample=False)
    assert maps.shape == (2, 2, 3) and np.all(np.isfinite(maps))
    dinov3, x = _load("dinov3_small")
    features = feature_extractor(dinov3)(x)
    np.testing.assert_allclose(features, dinov3.predict(x, verbose=0), atol=1e-5)
