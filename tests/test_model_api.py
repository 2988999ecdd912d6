"""`VisionTransformer` as a model that describes itself: class, config, attributes, feature API."""

import inspect
import subprocess

import keras
import numpy as np
import pytest

import keras_vit
from conftest import ROOT

TINY = dict(patch_size=8, hidden_size=32, mlp_dim=64, num_heads=4, num_layers=3)
HYBRID = dict(
    patch_size=1, hidden_size=32, mlp_dim=64, num_heads=2, num_layers=1, resnet_layers=(1, 1), resnet_width=0.5
)
ATTRIBUTES = (
    "vit_config",
    "classifier",
    "representation_size",
    "image_size",
    "grid_size",
    "num_prefix_tokens",
    "include_preprocessing",
    "include_top",
    "pooling",
    "classes",
)


def _images(shape, seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype("float32")


def _randomize(model, seed=1):
    rng = np.random.default_rng(seed)
    for v in model.weights:
        v.assign((0.05 * rng.standard_normal(v.shape)).astype("float32"))


def _np(x):
    return np.asarray(keras.ops.convert_to_numpy(x))


def test_every_constructor_returns_the_class():
    for fn in (keras_vit.R50_ViT_B16, keras_vit.ViT_Ti16):
        assert isinstance(fn(input_shape=(64, 64, 3)), keras_vit.VisionTransformer)
    assert isinstance(keras_vit.create_model("R26+ViT-S/32", input_shape=(64, 64, 3)), keras_vit.VisionTransformer)


def test_get_config_is_exactly_the_constructor_keywords():
    signature = inspect.signature(keras_vit.VisionTransformer.__init__).parameters
    keywords = {k for k, p in signature.items() if k != "self" and p.kind != p.VAR_KEYWORD}
    model = keras_vit.VisionTransformer(**TINY, input_shape=(32, 48, 3), classes=3)
    assert set(model.get_config()) == keywords
    rebuilt = keras_vit.VisionTransformer.from_config(model.get_config())
    assert rebuilt.get_config() == model.get_config()


def test_description_of_table_and_custom_models():
    model = keras_vit.R50_ViT_B16(input_shape=(224, 320, 3), include_top=False)
    assert model.vit_config is keras_vit.MODELS["R50+ViT-B/16"] and model.name == "R50_ViT-B_16"
    assert (model.image_size, model.grid_size, model.num_prefix_tokens) == ((224, 320), (14, 20), 1)
    assert model.effective_patch_size == 16 and model.classifier == "token" and not model.include_top
    custom = keras_vit.VisionTransformer(**TINY, input_shape=(32, 32, 3), classifier="gap", representation_size=8)
    assert custom.vit_config.name not in keras_vit.MODELS and custom.vit_config.num_layers == 3
    assert (custom.num_prefix_tokens, custom.representation_size, custom.grid_size) == (0, 8, (4, 4))


@pytest.mark.parametrize("kind", ["plain", "hybrid"])
def test_keras_file_reloads_as_the_class_with_equal_attributes(tmp_path, kind):
    if kind == "plain":
        model = keras_vit.VisionTransformer(
            **TINY,
            input_shape=(32, 48, 3),
            classes=3,
            representation_size=8,
            include_preprocessing=True,
            drop_path_rate=0.1,
        )
        x = _images((2, 32, 48, 3)) * 127.5 + 127.5
    else:
        model = keras_vit.VisionTransformer(**HYBRID, input_shape=(64, 64, 3), classes=3, classifier="gap")
        x = _images((2, 64, 64, 3))
    _randomize(model)
    model.save(tmp_path / "m.keras")
    loaded = keras.models.load_model(tmp_path / "m.keras")  # safe_mode=True, no custom_objects
    assert type(loaded) is keras_vit.VisionTransformer
    for attribute in ATTRIBUTES:
        assert getattr(loaded, attribute) == getattr(model, attribute), attribute
    assert (loaded.stem is not None) == (kind == "hybrid")
    np.testing.assert_array_equal(loaded.predict(x, verbose=0), model.predict(x, verbose=0))


def test_intermediates_against_the_model_and_a_manual_forward():
    model = keras_vit.VisionTransformer(**TINY, input_shape=(32, 32, 3), classes=4, representation_size=8)
    _randomize(model)
    x = _images((2, 32, 32, 3))
    out = model.intermediates(x, attention=True)
    assert sorted(out) == ["attention", "blocks", "encoded", "logits", "pre_logits"]
    assert sorted(out["blocks"]) == [0, 1, 2] and _np(out["blocks"][1]).shape == (2, 17, 32)
    probs = _np(out["attention"][2])
    assert probs.shape == (2, 4, 17, 17) and np.allclose(probs.sum(-1), 1, atol=1e-5)
    z = _np(out["logits"])
    e = np.exp(z - z.max(-1, keepdims=True))
    np.testing.assert_allclose(e / e.sum(-1, keepdims=True), model.predict(x, verbose=0), atol=1e-6)
    # the encoder output is the final LayerNorm of the last block's tokens (numpy LayerNorm, eps 1e-6)
    last = _np(out["blocks"][2])
    norm = model.encoder.encoder_norm
    ln = (last - last.mean(-1, keepdims=True)) / np.sqrt(last.var(-1, keepdims=True) + 1e-6)
    np.testing.assert_allclose(_np(out["encoded"]), ln * _np(norm.gamma) + _np(norm.beta), atol=1e-5)
    # pre-logits: tanh(Dense(class token))
    dense = model.pre_logits
    np.testing.assert_allclose(
        _np(out["pre_logits"]), np.tanh(_np(out["encoded"])[:, 0] @ _np(dense.kernel) + _np(dense.bias)), atol=1e-5
    )
    some = model.intermediates(x, blocks=[-1, 0])
    assert sorted(some["blocks"]) == [0, 2] and "attention" not in some
    np.testing.assert_allclose(_np(some["blocks"][2]), last, atol=1e-6)


def test_intermediates_errors():
    model = keras_vit.VisionTransformer(**TINY, input_shape=(32, 32, 3))
    with pytest.raises(ValueError, match=r"blocks \[3\] out of range for a 3-block model"):
        model.intermediates(_images((1, 32, 32, 3)), blocks=[3])
    with pytest.raises(ValueError, match=r"images must be \(batch, 32, 32, 3\).*got \(1, 48, 32, 3\)"):
        model.intermediates(_images((1, 48, 32, 3)))


@pytest.mark.parametrize("pooling", [None, "token", "avg", "max", "sequence"])
def test_feature_model_equals_the_constructor_backbone(pooling):
    full = keras_vit.VisionTransformer(**TINY, input_shape=(32, 32, 3), classes=4, representation_size=8)
    _randomize(full)
    backbone = keras_vit.VisionTransformer(
        **TINY, input_shape=(32, 32, 3), include_top=False, pooling=pooling, representation_size=8
    )
    keras_vit.weights.official.load_params(backbone, keras_vit.weights.official.model_params(full))
    features = full.feature_model(pooling)
    assert features.count_params() <= full.count_params()
    x = _images((2, 32, 32, 3))
    np.testing.assert_allclose(features.predict(x, verbose=0), backbone.predict(x, verbose=0), atol=1e-6)


def test_feature_model_and_logits_model_errors():
    gap = keras_vit.VisionTransformer(
        **TINY, input_shape=(32, 32, 3), classifier="gap", include_top=False, pooling="avg"
    )
    with pytest.raises(ValueError, match="needs a class token"):
        gap.feature_model("token")
    with pytest.raises(ValueError, match="has no pre-logits"):
        gap.feature_model()
    with pytest.raises(ValueError, match="no head"):
        gap.logits_model()
    with pytest.raises(ValueError, match="Unknown pooling 'mean'"):
        gap.feature_model("mean")


def test_layer_name_probes_live_only_in_the_anatomy_module():
    pattern = (
        r"get_layer\(|(layer|\bl)\.name\b|isinstance\([a-z_]+, *(PatchEmbedding|Encoder|ClassToken|"
        r"AddPositionEmbedding|ResNetStem|TokenPooling)|model\.layers|\"rescaling\"|'rescaling'|\"posembed_input\""
    )
    found = subprocess.run(
        ["grep", "-rnE", pattern, "keras_vit", "recipes", "hub_export", "bench", "tools", "--include=*.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    ).stdout.splitlines()
    outside = [
        line for line in found if not line.startswith(("keras_vit/vit/model.py:", "keras_vit/vit/components.py:"))
    ]
    assert outside == []


def test_random_initialisation_is_skipped_only_when_weights_follow():
    """A model built for a checkpoint draws no random values (the loader assigns every variable); one built
    without weights keeps the original code's random initialisation."""
    from keras_vit.nn.initializers import weights_follow

    fresh = keras_vit.VisionTransformer(**TINY, input_shape=(32, 32, 3), classes=3)
    assert 0.01 < float(np.std(keras.ops.convert_to_numpy(fresh.position_embedding.pos_embedding))) < 0.03
    with weights_follow():
        skeleton = keras_vit.VisionTransformer(**TINY, input_shape=(32, 32, 3), classes=3)
    assert all(
        not np.any(keras.ops.convert_to_numpy(v))
        for v in skeleton.weights
        if v.path.endswith(("kernel", "pos_embedding"))
    )
    again = keras_vit.VisionTransformer(**TINY, input_shape=(32, 32, 3), classes=3)  # the context has ended
    assert np.any(keras.ops.convert_to_numpy(again.encoder.blocks[0].mlp.dense_0.kernel))


_SHARED_ZEROS_ON_JAX = """
import json, os, sys
import numpy as np
import keras_vit
from keras_vit.nn.initializers import weights_follow
with weights_follow():
    skeleton = keras_vit.VisionTransformer(patch_size=8, hidden_size=32, mlp_dim=64, num_heads=4, num_layers=3,
                                           input_shape=(32, 32, 3), classes=3)
kernels = [v for v in skeleton.weights if v.shape == (32, 64)]
fixture = os.path.join(sys.argv[1], "torch_reference")
model = keras_vit.load_model(os.path.join(fixture, "timm_vit.safetensors"), num_heads=2, classifier_activation=None)
pointers = [v.value.unsafe_buffer_pointer() for v in model.weights]
x = np.load(os.path.join(fixture, "input.npy"))
error = float(np.abs(model.predict(x, verbose=0) - np.load(os.path.join(fixture, "timm_vit_logits.npy"))).max())
model.compile(optimizer="adam", loss=lambda y, p: (p - y) ** 2)
loss = float(model.train_on_batch(x, np.zeros((len(x), model.output_shape[-1]), "float32")))
print(json.dumps(dict(shared=len({id(v.value) for v in kernels}), kernels=len(kernels), distinct=len(set(pointers)),
                      weights=len(pointers), error=error, loss=loss)))
"""


def test_jax_followed_zeros_are_shared_until_the_loader_gives_each_variable_its_own_array():
    """On JAX the zeros of a build for a checkpoint are one host-made array per shape; after the load every
    variable holds its own buffer (Keras' JAX trainer donates them), with timm's logits, and training runs."""
    from conftest import FIXTURES, run_on_backend

    out = run_on_backend(_SHARED_ZEROS_ON_JAX, "jax", FIXTURES)
    assert out["kernels"] >= 3 and out["shared"] == 1, out
    assert out["distinct"] == out["weights"], out
    assert out["error"] <= 1e-4 and np.isfinite(out["loss"]), out
