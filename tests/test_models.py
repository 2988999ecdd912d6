"""The model table and constructors: sizes vs timm, shapes, serialization, errors."""

import keras
import os

import numpy as np
import pytest

import keras_vit

# Parameter counts of timm's models with a 1000-class head at 224 px (issue 2 / REFERENCE §1).
TIMM_PARAMS = {
    "ViT_Ti16": 5_717_416,
    "ViT_S16": 22_050_664,
    "ViT_S32": 22_878_952,
    "ViT_B8": 86_576_872,
    "ViT_B16": 86_567_656,
    "ViT_B32": 88_224_232,
    "ViT_L16": 304_326_632,
    "ViT_L32": 306_535_400,
    "ViT_H14": 632_045_800,
    "R50_ViT_B16": 98_659_112,
    "R50_ViT_L32": 328_994_856,
    "R26_ViT_S32": 36_431_912,
    # AugReg's hybrids: timm vit_base_r26_s32_224 and vit_tiny_r_s16_p8_224 (timm 1.x, counted with torch)
    "R26_ViT_B32": 101_383_976,
    "R_ViT_Ti16": 6_337_704,
}

TINY = dict(patch_size=8, hidden_size=32, mlp_dim=64, num_heads=4, num_layers=2)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _images(shape=(2, 32, 32, 3), seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype("float32")


def _randomize(model, seed=1):
    rng = np.random.default_rng(seed)
    for v in model.weights:
        v.assign((0.05 * rng.standard_normal(v.shape)).astype("float32"))


# the default suite counts one model per patch size and stem (Ti/16, S/32, the root-only, R26 and R50 stems); the
# other sizes (4-10 s each to build, up to 630 M parameters) count the same formula: make test-slow
_LARGE = {"ViT_L16", "ViT_L32", "ViT_H14", "R50_ViT_L32", "ViT_B8", "ViT_B16", "ViT_B32", "ViT_S16", "R26_ViT_B32"}


@pytest.mark.parametrize(
    "constructor", [pytest.param(c, marks=pytest.mark.slow) if c in _LARGE else c for c in sorted(TIMM_PARAMS)]
)
def test_parameter_counts_equal_timm(constructor):
    model = getattr(keras_vit, constructor)()
    assert isinstance(model, keras_vit.VisionTransformer)
    assert model.count_params() == TIMM_PARAMS[constructor]
    assert model.output_shape == (None, 1000)
    keras.backend.clear_session()


def hybrid_param_count(stages, width, d, mlp, layers, classes=1000, image=224):
    """Closed-form count of a BiT-ResNet stem (bias-free weight-standardised convs, GroupNorm scale + bias)
    feeding a 1x1-patch ViT with a class token (paper §3.1; BiT: stage s has 64*w*2^s bottleneck features)."""
    root = 64 * width
    n = 7 * 7 * 3 * root + 2 * root
    cin = root
    for s, units in enumerate(stages):
        f = root * 2**s
        for u in range(units):
            n += cin * f + 2 * f + 9 * f * f + 2 * f + f * 4 * f + 2 * 4 * f
            if u == 0:
                n += cin * 4 * f + 2 * 4 * f
            cin = 4 * f
    tokens = (image // (4 * 2 ** (len(stages) - 1))) ** 2 + 1
    block = 4 * d + 4 * (d * d + d) + (d * mlp + mlp + mlp * d + d)
    return n + (cin * d + d) + d + tokens * d + layers * block + 2 * d + d * classes + classes


def test_hybrid_formula_reproduces_timm_then_counts_the_new_hybrids():
    # the formula is first checked against timm's counts of the three hybrids timm has ...
    assert hybrid_param_count((3, 4, 9), 1, 768, 3072, 12) == TIMM_PARAMS["R50_ViT_B16"]
    assert hybrid_param_count((3, 4, 6, 3), 1, 1024, 4096, 24) == TIMM_PARAMS["R50_ViT_L32"]
    assert hybrid_param_count((2, 2, 2, 2), 1, 384, 1536, 12) == TIMM_PARAMS["R26_ViT_S32"]
    # ... then counts the paper's two hybrids timm lacks (R50+ViT-B/32: stage-4 output; R50+ViT-L/16: stage 4's
    # units moved into stage 3)
    expected = {
        "R50_ViT_B32": hybrid_param_count((3, 4, 6, 3), 1, 768, 3072, 12),
        "R50_ViT_L16": hybrid_param_count((3, 4, 9), 1, 1024, 4096, 24),
    }
    assert expected == {"R50_ViT_B32": 110_945_832, "R50_ViT_L16": 316_483_624}
    for constructor, count in expected.items():
        model = getattr(keras_vit, constructor)()
        assert model.count_params() == count and model.grid_size == ((7, 7) if "32" in constructor else (14, 14))
        keras.backend.clear_session()


def test_create_model_names_and_list():
    names = keras_vit.list_models()
    assert len(names) == 16 and {"R50+ViT-B/16", "R50+ViT-B/32", "R50+ViT-L/16", "R+ViT-Ti/16", "R26+ViT-B/32"} <= set(
        names
    )
    for alias in ("ViT-B/16", "ViT-B_16", "vit_b16"):
        assert keras_vit.vit_config(alias).name == "ViT-B/16"
    assert keras_vit.vit_config("R50+ViT-B_16").resnet_layers == (3, 4, 9)
    model = keras_vit.create_model("ViT-Ti/16", input_shape=(32, 32, 3), classes=3)
    assert model.output_shape == (None, 3)


@pytest.mark.parametrize("classifier", ["token", "gap"])
@pytest.mark.parametrize("representation_size", [None, 16])
def test_output_shapes(classifier, representation_size):
    kw = dict(TINY, input_shape=(32, 48, 3), classifier=classifier, representation_size=representation_size)
    top = keras_vit.VisionTransformer(classes=7, **kw)
    assert top.output_shape == (None, 7)
    feat = keras_vit.VisionTransformer(include_top=False, **kw)
    assert feat.output_shape == (None, representation_size or 32)
    seq = keras_vit.VisionTransformer(include_top=False, pooling="sequence", **kw)
    tokens = 4 * 6 + (classifier == "token")
    assert seq.output_shape == (None, tokens, 32)
    for pooling in ("avg", "max"):
        assert keras_vit.VisionTransformer(include_top=False, pooling=pooling, **kw).output_shape == (None, 32)
    x = _images((3, 32, 48, 3))
    assert feat.predict(x, verbose=0).shape == (3, representation_size or 32)


def test_non_square_table_model_and_hybrid_shapes():
    model = keras_vit.ViT_Ti16(input_shape=(224, 320, 3), include_top=False, pooling="sequence")
    assert model.output_shape == (None, 14 * 20 + 1, 192)
    hybrid = keras_vit.VisionTransformer(
        1,
        32,
        64,
        2,
        1,
        resnet_layers=(1, 1),
        resnet_width=0.5,
        input_shape=(64, 96, 3),
        include_top=False,
        pooling="sequence",
    )
    assert hybrid.output_shape == (None, 8 * 12 + 1, 32)


def test_softmax_head_and_logits():
    model = keras_vit.VisionTransformer(**TINY, input_shape=(32, 32, 3), classes=4)
    _randomize(model)
    p = model.predict(_images(), verbose=0)
    np.testing.assert_allclose(p.sum(-1), 1.0, rtol=1e-5)
    logits_model = keras_vit.VisionTransformer(**TINY, input_shape=(32, 32, 3), classes=4, classifier_activation=None)
    logits_model.set_weights(model.get_weights())
    z = logits_model.predict(_images(), verbose=0)
    ez = np.exp(z - z.max(-1, keepdims=True))
    np.testing.assert_allclose(p, ez / ez.sum(-1, keepdims=True), atol=1e-6)


def test_initialisers_follow_the_paper():
    model = keras_vit.VisionTransformer(**TINY, input_shape=(32, 32, 3), classes=4)
    assert not np.any(model.get_layer("head").kernel.numpy())
    assert not np.any(model.get_layer("cls").cls.numpy())
    posemb = model.get_layer("posembed_input").pos_embedding.numpy()
    assert 0.01 < posemb.std() < 0.03
    gn3 = (
        keras_vit.VisionTransformer(1, 32, 64, 2, 1, resnet_layers=(1,), resnet_width=0.5, input_shape=(32, 32, 3))
        .get_layer("resnet")
        .units[0]
        .gn3
    )
    assert not np.any(gn3.gamma.numpy())


def test_preprocessing():
    pixels = np.array([[0, 127.5, 255]], dtype="float32")
    np.testing.assert_allclose(keras_vit.preprocess_input(pixels), [[-1, 0, 1]])
    np.testing.assert_allclose(keras_vit.preprocess_input(np.array([0, 255], "uint8")), [-1, 1])
    raw = keras_vit.VisionTransformer(**TINY, input_shape=(32, 32, 3), include_preprocessing=True, include_top=False)
    plain = keras_vit.VisionTransformer(**TINY, input_shape=(32, 32, 3), include_top=False)
    _randomize(plain)
    raw.set_weights(plain.get_weights())
    pix = np.random.default_rng(0).integers(0, 256, (2, 32, 32, 3)).astype("float32")
    np.testing.assert_allclose(raw.predict(pix, verbose=0), plain.predict(pix / 127.5 - 1, verbose=0), atol=1e-5)


def test_input_tensor():
    inp = keras.Input((32, 32, 3))
    model = keras_vit.VisionTransformer(**TINY, input_tensor=inp, classes=2)
    assert model.inputs[0] is inp


@pytest.mark.parametrize("hybrid", [False, True])
def test_keras_file_round_trip_without_custom_objects(tmp_path, hybrid):
    if hybrid:
        model = keras_vit.VisionTransformer(
            1,
            32,
            64,
            2,
            1,
            resnet_layers=(1, 1),
            resnet_width=0.5,
            input_shape=(64, 64, 3),
            classes=3,
            drop_path_rate=0.1,
        )
        x = _images((2, 64, 64, 3))
    else:
        model = keras_vit.VisionTransformer(
            **TINY,
            input_shape=(32, 32, 3),
            classes=3,
            representation_size=8,
            drop_path_rate=0.1,
            include_preprocessing=True,
        )
        x = _images() * 127.5 + 127.5
    _randomize(model)
    path = str(tmp_path / "model.keras")
    model.save(path)
    loaded = keras.models.load_model(path)  # safe_mode=True, no custom_objects
    np.testing.assert_array_equal(loaded.predict(x, verbose=0), model.predict(x, verbose=0))
    # keras_vit.load_weights takes the .keras file and Keras' own method a .weights.h5 file
    again = keras_vit.VisionTransformer(
        **(
            dict(
                patch_size=1,
                hidden_size=32,
                mlp_dim=64,
                num_heads=2,
                num_layers=1,
                resnet_layers=(1, 1),
                resnet_width=0.5,
                input_shape=(64, 64, 3),
            )
            if hybrid
            else dict(TINY, input_shape=(32, 32, 3), representation_size=8, include_preprocessing=True)
        ),
        classes=3,
    )
    keras_vit.load_weights(again, path)
    np.testing.assert_array_equal(again.predict(x, verbose=0), model.predict(x, verbose=0))
    h5 = str(tmp_path / "w.weights.h5")
    model.save_weights(h5)
    fresh = keras.models.clone_model(model)
    fresh.load_weights(h5)
    np.testing.assert_array_equal(fresh.predict(x, verbose=0), model.predict(x, verbose=0))


def test_layers_serialize():
    for layer in (
        keras_vit.PatchEmbedding(4, 8),
        keras_vit.AddPositionEmbedding((2, 3), 1),
        keras_vit.MlpBlock(16, 0.1),
        keras_vit.DropPath(0.2, seed=3),
        keras_vit.EncoderBlock(2, 16, 0.1, 0.2, 0.3),
        keras_vit.Encoder(2, 2, 16, drop_path_rate=0.1),
        keras_vit.TokenPooling("gap", 0),
        keras_vit.StdConv2D(8, 3, strides=2),
        keras_vit.ResidualUnit(8, 2),
        keras_vit.ResNetStem((1, 2), 0.5),
    ):
        config = layer.get_config()
        clone = type(layer).from_config(config)
        assert clone.get_config() == config


def test_drop_path_rates_and_training_behaviour():
    encoder = keras_vit.Encoder(5, 2, 16, drop_path_rate=0.4)
    np.testing.assert_allclose([b.drop_path_rate for b in encoder.blocks], [0, 0.1, 0.2, 0.3, 0.4])
    layer = keras_vit.DropPath(0.5, seed=0)
    x = np.ones((2000, 3), "float32")
    np.testing.assert_array_equal(layer(x, training=False), x)
    y = keras.ops.convert_to_numpy(layer(x, training=True))
    kept = y[:, 0] > 0
    assert set(np.unique(y)) <= {0.0, 2.0}
    assert 0.4 < kept.mean() < 0.6
    assert np.all(y == y[:, :1])  # whole examples are dropped, not elements


def test_gelu_is_tanh_approximation():
    from keras_vit.nn.mlp import gelu

    x = np.linspace(-4, 4, 101).astype("float32")
    tanh_gelu = 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))
    np.testing.assert_allclose(keras.ops.convert_to_numpy(gelu(x)), tanh_gelu, atol=1e-6)


def test_mixed_bfloat16_builds_and_runs():
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        model = keras_vit.VisionTransformer(**TINY, input_shape=(32, 32, 3), classes=3)
        hybrid = keras_vit.VisionTransformer(
            1, 32, 64, 2, 1, resnet_layers=(1,), resnet_width=0.5, input_shape=(32, 32, 3), classes=3
        )
        for m in (model, hybrid):
            assert m.get_layer("Transformer").blocks[0].attention.compute_dtype == "bfloat16"
            out = m.predict(_images(), verbose=0)
            assert out.dtype == np.float32 and np.all(np.isfinite(out))
        _, probs = (
            model.get_layer("Transformer")
            .blocks[0]
            .attention(keras.ops.cast(_images((2, 17, 32)), "bfloat16"), return_attention=True)
        )
        assert keras.backend.standardize_dtype(probs.dtype) == "float32"
    finally:
        keras.mixed_precision.set_global_policy("float32")


def test_mixed_bfloat16_model_reloads_under_float32_policy(tmp_path):
    """Nested sublayers keep the saved policy: a bf16 model loads and runs in a float32 session."""
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        model = keras_vit.VisionTransformer(
            **TINY, input_shape=(32, 32, 3), classes=3, dropout_rate=0.1, drop_path_rate=0.1
        )
        expected = model.predict(_images(), verbose=0)
    finally:
        keras.mixed_precision.set_global_policy("float32")
    model.save(tmp_path / "bf16.keras")
    loaded = keras.models.load_model(tmp_path / "bf16.keras")
    np.testing.assert_array_equal(loaded.predict(_images(), verbose=0), expected)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(input_shape=(30, 32, 3)), r"not divisible by the effective patch size 8: height 30 \(try 24 or 32\)"),
        (dict(input_shape=(32, 32, None)), "needs a known channel count"),
        (dict(classifier="cls"), "classifier='cls' is not one of 'token', 'gap'"),
        (dict(representation_size=0), "representation_size must be >= 1"),
        (dict(classes=0), "classes must be >= 1"),
        (dict(pooling="mean"), "pooling='mean' is not one of"),
        (dict(dropout_rate=1.5), "dropout_rate must be a number in"),
    ],
)
def test_bad_arguments(kwargs, match):
    args = dict(TINY, input_shape=(32, 32, 3))
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        keras_vit.VisionTransformer(**args)


def test_bad_names_and_files(tmp_path):
    with pytest.raises(ValueError, match="Unknown model name 'ViT-X/16'.*ViT-B/16"):
        keras_vit.create_model("ViT-X/16")
    with pytest.raises(ValueError, match="effective patch size 16.*try 208 or 224"):
        keras_vit.ViT_B16(input_shape=(220, 224, 3))
    model = keras_vit.VisionTransformer(**TINY, input_shape=(32, 32, 3))
    with pytest.raises(FileNotFoundError, match="does-not-exist.keras"):
        keras_vit.load_weights(model, str(tmp_path / "does-not-exist.keras"))
    with pytest.raises(ValueError, match="Unsupported weights file"):
        bad = tmp_path / "weights.bin"
        bad.write_bytes(b"x")
        keras_vit.load_weights(model, str(bad))
    with pytest.raises(ValueError, match=r"reads no files: use keras_vit.create_model\(name, weights=...\)"):
        keras_vit.VisionTransformer(**TINY, input_shape=(32, 32, 3), weights=str(bad))


@pytest.mark.parametrize(
    "entry",
    [
        lambda: keras_vit.VisionTransformer(**TINY, num_layer=1),
        lambda: keras_vit.create_model("vit_small_patch16_dinov3", num_layer=1),
        lambda: keras_vit.ViT_Ti16(classifer="gap"),
        lambda: keras_vit.load_model(os.path.join(ROOT, "tests", "fixtures", "timm_hub", "plain"), num_layer=1),
    ],
)
def test_a_misspelt_keyword_is_refused_naming_it_at_every_entry_point(entry):
    with pytest.raises(TypeError, match=r"unexpected keyword argument '(num_layer|classifer)' \(did you mean"):
        entry()


def test_a_hand_edited_config_is_refused_naming_the_wrong_key():
    config = keras_vit.VisionTransformer(**TINY, input_shape=(32, 32, 3)).get_config()
    with pytest.raises(TypeError, match="'num_layer' \\(did you mean 'num_layers'"):
        keras_vit.VisionTransformer.from_config({**config, "num_layer": 1})
    with pytest.raises(ValueError, match="no field 'qk_nrom' \\(did you mean 'qk_norm'"):
        keras_vit.VisionTransformer.from_config({**config, "variant": {"attention": {"qk_nrom": True}}})
    with pytest.raises(ValueError, match="no part or field 'atention' \\(did you mean 'attention'"):
        keras_vit.VisionTransformer.from_config({**config, "variant": {"atention": {}}})


def test_the_record_is_given_nested_flat_or_by_name():
    nested = keras_vit.VisionTransformer(
        **TINY, variant={"attention": {"qk_norm": True}, "tokens": {"num_register_tokens": 2}}
    )
    flat = keras_vit.VisionTransformer(**TINY, variant={"qk_norm": True}, num_register_tokens=2)
    assert nested.variant == flat.variant and nested.variant.qk_norm and nested.num_prefix_tokens == 3
    assert nested.get_config()["variant"]["attention"]["qk_norm"] is True
    named = keras_vit.VisionTransformer(variant="vit_small_patch16_dinov3", num_layers=1, qkv_bias=True)
    assert (named.vit_config.hidden_size, named.vit_config.num_layers, named.classifier) == (384, 1, "gap")
    assert named.variant.rotary_embedding is not None and named.variant.qkv_bias  # the keyword over the name
