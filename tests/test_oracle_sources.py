"""Sources that vary one fact the earlier fixtures held fixed, written by their own frameworks with their logits
(tests/fixtures/oracle, tools/make_oracle_fixtures.py; tests/fixtures/timm_hub for the bare files): each loads with
the source's logits or is refused naming the missing fact. No torch needed."""

import dataclasses
import json
import os
import warnings
import shutil

import numpy as np
import pytest

import keras_vit
from conftest import FIXTURES

ORACLE = os.path.join(FIXTURES, "oracle")
HUB = os.path.join(FIXTURES, "timm_hub")
SMALL = dict(input_shape=(32, 32, 3), patch_size=8, hidden_size=32, mlp_dim=128, num_heads=2, num_layers=2, classes=5)


def _gap(model, case: str, folder: str = ORACLE) -> float:
    names = [f"{case}_{what}.npy" if folder == ORACLE else f"{what}.npy" for what in ("input", "logits")]
    x, ref = (np.load(os.path.join(folder, name)) for name in names)
    return float(np.abs(np.asarray(model(x)) - ref).max())


@pytest.mark.parametrize("case", ["grid_4x6", "no_qkv_bias", "eps_1e-5", "quick_gelu", "gelu_new"])
def test_transformers_configs_load_with_transformers_logits(case):
    """image_size pairs, qkv_bias=False, layer_norm_eps and each hidden_act the model has are read, not assumed."""
    model = keras_vit.load_model(os.path.join(ORACLE, f"hf_{case}"), classifier_activation=None)
    assert _gap(model, f"hf_{case}") <= 1e-5
    config = json.load(open(os.path.join(ORACLE, f"hf_{case}", "config.json")))
    assert model.variant.layer_norm_epsilon == config["layer_norm_eps"]
    assert model.variant.qkv_bias == config["qkv_bias"]
    if case == "grid_4x6":
        assert model.image_size == (32, 48) and model.position_embedding.grid_size == (4, 6)


def test_transformers_activation_the_model_lacks_is_refused_by_name():
    with pytest.raises(ValueError, match="hidden_act='relu'"):
        keras_vit.load_model(os.path.join(ORACLE, "hf_relu"))


def test_bare_timm_file_with_a_non_square_grid_is_refused_not_guessed():
    """9 position rows (2x4 grid + class row) are a square count: never taken for a 3x3 grid without a class row."""
    path = os.path.join(ORACLE, "timm_grid_2x4.safetensors")
    with pytest.raises(ValueError, match="does not state its input size.*pass input_shape"):
        keras_vit.load_model(path, num_heads=2)
    with pytest.warns(UserWarning, match="does not state activation") as caught:
        model = keras_vit.load_model(path, num_heads=2, input_shape=(16, 32, 3), classifier_activation=None)
    # the facts no tensor shows, each named with the default taken
    said = str(caught[0].message)
    assert "post_norm=False" in said and "rotary_embedding=None" in said and "activation='gelu'" in said, said
    assert _gap(model, "timm_grid_2x4") <= 1e-5


def test_bare_timm_file_with_fc_norm_pools_by_averaging_as_timm_does():
    """An fc_norm beside a class token: timm's rule is average pooling, and the warning says it was assumed."""
    with pytest.warns(UserWarning, match="classifier='gap'"):
        model = keras_vit.load_model(
            os.path.join(ORACLE, "timm_avg_class_token.safetensors"), num_heads=2, classifier_activation=None
        )
    assert model.classifier == "gap" and model.class_token is not None
    assert _gap(model, "timm_avg_class_token") <= 1e-5


def test_bare_clip_file_names_what_it_assumed_and_loads_exactly_when_told():
    path = os.path.join(HUB, "clip", "model.safetensors")
    with pytest.warns(UserWarning, match="layer_norm_epsilon=1e-06"):
        keras_vit.load_model(path, num_heads=2)
    model = keras_vit.load_model(path, num_heads=2, layer_norm_epsilon=1e-5, classifier_activation=None)
    assert _gap(model, "clip", os.path.join(HUB, "clip")) <= 1e-5


def test_bare_quick_gelu_file_loads_into_the_architecture_the_user_names():
    """A bare file does not state its activation, so the named architecture's quick GELU is not contradicted."""
    model = keras_vit.create_model(
        "vit_base_patch16_clip_quickgelu_224",
        classifier_activation=None,
        weights=os.path.join(HUB, "clip_quickgelu", "model.safetensors"),
        **SMALL,
    )
    assert _gap(model, "clip_quickgelu", os.path.join(HUB, "clip_quickgelu")) <= 1e-5


def test_a_bare_file_loaded_with_its_architectures_variant_takes_the_variants_facts():
    """`variant=<timm name>` states the family (quick GELU, the epsilon, pre-norm, no rotary): none of timm's
    defaults is assumed over it, and no warning says they were."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = keras_vit.load_model(
            os.path.join(HUB, "clip_quickgelu", "model.safetensors"),
            variant="vit_base_patch16_clip_quickgelu_224",
            classifier_activation=None,
            **SMALL,
        )
    assert model.variant.activation == "quick_gelu"
    assert _gap(model, "clip_quickgelu", os.path.join(HUB, "clip_quickgelu")) <= 1e-5


def test_timm_repository_whose_head_contradicts_num_classes_is_refused(tmp_path):
    folder = str(tmp_path / "repo")
    shutil.copytree(os.path.join(HUB, "plain"), folder)
    config = json.load(open(os.path.join(folder, "config.json")))
    config["num_classes"] = 1000
    config["model_args"].pop("num_classes", None)
    json.dump(config, open(os.path.join(folder, "config.json"), "w"))
    with pytest.raises(ValueError, match="num_classes=1000, but its weights hold a 5-class head"):
        keras_vit.load_model(folder)


@pytest.mark.parametrize("bad", ["[]", '{"architecture": "vit_base_patch16_224", "model_args": [1]}'])
def test_timm_config_of_the_wrong_shape_is_one_clear_line(tmp_path, bad):
    folder = tmp_path / "repo"
    shutil.copytree(os.path.join(HUB, "plain"), folder)
    (folder / "config.json").write_text(bad)
    with pytest.raises(ValueError, match="config.json"):
        keras_vit.load_model(str(folder))


def test_save_pretrained_keeps_antialias_false(tmp_path):
    base = keras_vit.load_model(os.path.join(HUB, "plain"))
    model = keras_vit.load_model(
        os.path.join(HUB, "plain"), data_config=dataclasses.replace(base.data_config, antialias=False)
    )
    keras_vit.save_pretrained(model, str(tmp_path / "out"))
    assert keras_vit.load_model(str(tmp_path / "out")).data_config.antialias is False


@pytest.mark.parametrize("classes", [2.5, True])
def test_constructors_refuse_a_class_count_that_is_not_a_whole_number(classes):
    with pytest.raises(ValueError, match="classes must be"):
        keras_vit.ViT_Ti16(classes=classes, input_shape=(32, 32, 3))
    with pytest.raises(ValueError, match="classes must be"):
        keras_vit.create_model("vit_tiny_patch16_224", classes=classes)


def test_npz_of_one_non_square_grid_is_not_loaded_raw_into_the_transposed_grid(tmp_path):
    donor = keras_vit.VisionTransformer(8, 32, 64, 4, 1, input_shape=(64, 16, 3), classes=3)
    path = str(tmp_path / "tall.npz")  # the official layout's arrays alone, as the original code writes them
    np.savez(path, **keras_vit.weights.official.model_params(donor))
    target = keras_vit.VisionTransformer(8, 32, 64, 4, 1, input_shape=(16, 64, 3), classes=3)
    before = [np.array(w) for w in target.weights]
    with pytest.raises(ValueError, match="does not state its patch grid.*old_grid"):
        keras_vit.load_npz(target, path)
    assert all(np.array_equal(a, np.array(b)) for a, b in zip(before, target.weights))
    keras_vit.load_npz(target, path, old_grid=(8, 2))  # stated: resized from 8x2 to 2x8
    told = [np.array(w) for w in target.weights]
    # the same arrays written by save_npz state their grid: the same resize without old_grid
    again = keras_vit.VisionTransformer(8, 32, 64, 4, 1, input_shape=(16, 64, 3), classes=3)
    keras_vit.load_npz(again, keras_vit.save_npz(donor, str(tmp_path / "stated.npz")))
    assert all(np.array_equal(a, np.array(b)) for a, b in zip(told, again.weights))


@pytest.mark.parametrize("name", ["default", "bicubic_imagenet"])
def test_transformers_directories_preprocess_as_their_image_processor(tmp_path, name):
    """`preprocessor_config.json` read into the data config: the model's preprocessor gives transformers'
    `ViTImageProcessor` pixels (hf_processor.npz, written by transformers itself) to PIL's 8-bit rounding."""
    from skimage import data

    refs = np.load(os.path.join(ORACLE, "hf_processor.npz"))
    folder = tmp_path / "hf"
    shutil.copytree(os.path.join(ORACLE, "hf_eps_1e-5"), folder)
    (folder / "preprocessor_config.json").write_text(
        json.dumps({"image_processor_type": "ViTImageProcessor", **json.loads(str(refs["configs"]))[name]})
    )
    model = keras_vit.load_model(str(folder), input_shape=(224, 224, 3))
    config = json.loads(str(refs["configs"]))[name]
    assert model.data_config.for_channels(3) == (
        tuple(config.get("image_mean", [0.5] * 3)),
        tuple(config.get("image_std", [0.5] * 3)),
    )
    preprocessor = keras_vit.ImagePreprocessing((224, 224), model.data_config, normalize=False)
    photos = {
        "astronaut": data.astronaut(),
        "chelsea": data.chelsea(),
        "rocket_tall": np.ascontiguousarray(data.rocket().transpose(1, 0, 2)),
    }
    for photo, image in photos.items():
        gap = np.abs(np.asarray(preprocessor(image))[0] - refs[f"{name}/{photo}"]).max()
        assert gap <= 1.2, (photo, gap)


def test_a_processor_config_keras_vit_cannot_follow_is_refused_by_name(tmp_path):
    folder = tmp_path / "hf"
    shutil.copytree(os.path.join(ORACLE, "hf_eps_1e-5"), folder)
    (folder / "preprocessor_config.json").write_text(json.dumps({"rescale_factor": 1 / 127.5}))
    with pytest.raises(ValueError, match="rescale_factor"):
        keras_vit.load_model(str(folder))


def test_builders_read_a_source_once(monkeypatch):
    """create_model, the constructors and load_model read the source once into one Checkpoint and take its head,
    data config and arrays from it."""
    from keras_vit.weights import load

    reads = []
    real = load._read
    monkeypatch.setattr(load, "_read", lambda *a, **k: reads.append(a[1]) or real(*a, **k))
    keras_vit.create_model(
        "vit_base_patch16_224", weights=os.path.join(HUB, "plain", "model.safetensors"), **{**SMALL, "mlp_dim": 128}
    )
    assert len(reads) == 1
    flax = os.path.join(FIXTURES, "flax_reference", "vit_tiny")
    config = json.load(open(os.path.join(flax, "config.json")))
    keras_vit.load_model(
        os.path.join(flax, "weights.npz"),
        input_shape=(*config["image_size"], 3),
        classes=config["num_classes"],
    )
    assert len(reads) == 2


def test_a_bare_file_without_a_position_table_is_refused_unless_named():
    """timm made this DINOv3 file (tests/fixtures/backbones): its positions are rotary, which no tensor states; built
    from the bare file alone it would have had no position information at all."""
    path = os.path.join(FIXTURES, "backbones", "dinov3_small", "model.safetensors")
    sizes = dict(num_heads=2, input_shape=(32, 48, 3))
    with pytest.raises(ValueError, match="has no position table and names no architecture.*vit_base_patch16_dinov3"):
        keras_vit.load_model(path, **sizes)
    named = keras_vit.create_model(
        "vit_small_patch16_dinov3", weights=path, hidden_size=64, mlp_dim=256, num_layers=2, **sizes
    )
    assert named.variant.rotary_embedding is not None
    stated = keras_vit.load_model(path, variant="vit_small_patch16_dinov3", **sizes)
    assert stated.variant.rotary_embedding is not None
