"""Official .npz checkpoints: parity with the original Flax code, resizing, head rules, errors."""

import json
import logging
import os
import re

import numpy as np
import pytest
import scipy.ndimage

import keras_vit
from keras_vit.weights import official as checkpoints, releases

from conftest import FLAX_FIXTURES


def _flax_case(name):
    d = os.path.join(FLAX_FIXTURES, name)
    c = json.load(open(os.path.join(d, "config.json")))
    kwargs = dict(
        patch_size=c["patches"][0],
        hidden_size=c["hidden_size"],
        mlp_dim=c["mlp_dim"],
        num_heads=c["num_heads"],
        num_layers=c["num_layers"],
        resnet_layers=c["resnet_num_layers"],
        resnet_width=c["resnet_width_factor"] or 1,
        classifier=c["classifier"],
        representation_size=c["representation_size"],
        classes=c["num_classes"],
        classifier_activation=None,
    )
    return d, kwargs, tuple(c["image_size"]) + (3,)


def _build(name, input_shape=None, **overrides):
    d, kwargs, shape = _flax_case(name)
    kwargs.update(overrides)
    return d, keras_vit.VisionTransformer(input_shape=input_shape or shape, **kwargs)


def _grid(model):
    """The model's own grid, stated: an .npz does not record the (4, 6) grid the fixture was trained at."""
    return model.position_embedding.grid_size


def _values(model):
    return [np.array(v) for v in model.weights]


@pytest.mark.parametrize("name", ["vit_tiny", "vit_tiny_rep_gap", "hybrid_tiny"])
def test_flax_parity(name):
    d, model = _build(name)
    keras_vit.load_npz(model, os.path.join(d, "weights.npz"), old_grid=_grid(model))
    logits = model.predict(np.load(os.path.join(d, "input.npy")), verbose=0)
    assert np.abs(logits - np.load(os.path.join(d, "logits.npy"))).max() <= 1e-5


def test_flax_parity_weights_keyword():
    d, kwargs, shape = _flax_case("vit_tiny")
    model = keras_vit.load_weights(
        keras_vit.VisionTransformer(input_shape=shape, **kwargs), os.path.join(d, "weights.npz")
    )
    logits = model.predict(np.load(os.path.join(d, "input.npy")), verbose=0)
    assert np.abs(logits - np.load(os.path.join(d, "logits.npy"))).max() <= 1e-5


def test_flax_parity_resized_position_embeddings():
    d, model = _build("vit_tiny", input_shape=(48, 48, 3))
    keras_vit.load_npz(model, os.path.join(d, "weights.npz"))
    posemb = model.get_layer("posembed_input").pos_embedding.numpy()
    np.testing.assert_allclose(posemb, np.load(os.path.join(d, "a_resized_posemb.npy")), atol=1e-6)
    logits = model.predict(np.load(os.path.join(d, "input_48.npy")), verbose=0)
    assert np.abs(logits - np.load(os.path.join(d, "logits_48.npy"))).max() <= 1e-5


def test_resize_non_square_matches_scipy():
    rng = np.random.default_rng(0)
    posemb = rng.normal(size=(1, 1 + 4 * 6, 8)).astype("float32")
    out = keras_vit.resize_position_embeddings(posemb, (3, 9), old_grid=(4, 6))
    expected = scipy.ndimage.zoom(posemb[0, 1:].reshape(4, 6, 8), (3 / 4, 9 / 6, 1), order=1)
    np.testing.assert_allclose(out[0, 1:], expected.reshape(27, 8), atol=1e-6)
    np.testing.assert_array_equal(out[0, 0], posemb[0, 0])
    gap = keras_vit.resize_position_embeddings(posemb[0, 1:], (8, 12), num_prefix_tokens=0, old_grid=(4, 6))
    assert gap.shape == (96, 8)
    with pytest.raises(ValueError, match="Cannot infer the grid of 24"):
        keras_vit.resize_position_embeddings(posemb, (3, 9))


def test_gap_model_from_non_square_checkpoint_needs_old_grid(tmp_path):
    d, model = _build("vit_tiny_rep_gap", input_shape=(48, 48, 3))
    with pytest.raises(ValueError, match="Cannot infer the grid"):
        keras_vit.load_npz(model, os.path.join(d, "weights.npz"))
    keras_vit.load_npz(model, os.path.join(d, "weights.npz"), old_grid=(4, 6))


def test_head_rules(caplog):
    d, _, shape = _flax_case("vit_tiny_rep_gap")
    path = os.path.join(d, "weights.npz")
    ckpt = np.load(path)
    base = dict(
        patch_size=8,
        hidden_size=32,
        mlp_dim=64,
        num_heads=4,
        num_layers=2,
        classifier="gap",
        input_shape=shape,
        classifier_activation=None,
    )
    # different classes -> zero head + log line; no representation layer -> pre_logits dropped
    model = keras_vit.VisionTransformer(classes=3, **base)
    with caplog.at_level(logging.WARNING, logger="keras_vit"), pytest.warns(UserWarning, match="zero-initialised"):
        keras_vit.load_npz(model, path, old_grid=(4, 6))
    assert not np.any(model.get_layer("head").kernel.numpy()) and not np.any(model.get_layer("head").bias.numpy())
    assert "pre_logits dropped" in caplog.text
    np.testing.assert_array_equal(model.get_layer("embedding").kernel.numpy(), ckpt["embedding/kernel"])
    # same classes and representation -> both loaded
    model = keras_vit.VisionTransformer(classes=5, representation_size=16, **base)
    keras_vit.load_npz(model, path, old_grid=(4, 6))
    np.testing.assert_array_equal(model.get_layer("head").kernel.numpy(), ckpt["head/kernel"])
    np.testing.assert_array_equal(model.get_layer("pre_logits").kernel.numpy(), ckpt["pre_logits/kernel"])
    # reset_head=True zeroes even a matching head; False refuses a mismatch
    keras_vit.load_npz(model, path, reset_head=True, old_grid=(4, 6))
    assert not np.any(model.get_layer("head").kernel.numpy())
    small = keras_vit.VisionTransformer(classes=3, representation_size=16, **base)
    with pytest.raises(ValueError, match="head has 5 classes, the model 3 \\(reset_head=False\\)"):
        keras_vit.load_npz(small, path, reset_head=False, old_grid=(4, 6))
    # without a top, the head is simply not needed
    keras_vit.load_npz(
        keras_vit.VisionTransformer(include_top=False, representation_size=16, **base), path, old_grid=(4, 6)
    )


def test_save_npz_round_trip_is_exact(tmp_path):
    for name in ("vit_tiny", "hybrid_tiny", "vit_tiny_rep_gap"):
        d, model = _build(name)
        src = os.path.join(d, "weights.npz")
        keras_vit.load_npz(model, src, old_grid=_grid(model))
        out = keras_vit.save_npz(model, str(tmp_path / f"{name}.npz"))
        a, b = np.load(src), np.load(out)
        assert sorted(a.files) == sorted(b.files)
        for key in a.files:
            np.testing.assert_array_equal(a[key], b[key])
    assert not [f for f in os.listdir(tmp_path) if f.startswith(".tmp")]
    with pytest.raises(ValueError, match="writes .npz files"):
        keras_vit.save_npz(model, str(tmp_path / "x.h5"))


def test_old_hybrid_groupnorm_shapes_and_big_vision_layout(tmp_path):
    d, model = _build("hybrid_tiny")
    params = dict(np.load(os.path.join(d, "weights.npz")))
    old = {k: (v.reshape(1, 1, 1, -1) if re.search(r"(^|/)gn[^/]*/", k) else v) for k, v in params.items()}
    np.savez(tmp_path / "old.npz", **old)
    keras_vit.load_npz(model, str(tmp_path / "old.npz"))
    x = np.load(os.path.join(d, "input.npy"))
    assert np.abs(model.predict(x, verbose=0) - np.load(os.path.join(d, "logits.npy"))).max() <= 1e-5

    d, model = _build("vit_tiny")
    x = np.load(os.path.join(d, "input.npy"))
    expected = np.load(os.path.join(d, "logits.npy"))
    for name, layout in (
        ("bv", _big_vision(d, scan=False)),
        ("bv_scan", _big_vision(d, scan=True)),
        ("opt", {"opt/target/" + k: v for k, v in np.load(os.path.join(d, "weights.npz")).items()}),
    ):
        np.savez(tmp_path / f"{name}.npz", **layout)
        model.set_weights([np.zeros_like(w) for w in model.get_weights()])
        keras_vit.load_npz(model, str(tmp_path / f"{name}.npz"))
        assert np.abs(model.predict(x, verbose=0) - expected).max() <= 1e-5, name
        rebuilt = keras_vit.load_model(tmp_path / f"{name}.npz", classifier_activation=None)  # shapes read there too
        assert np.abs(rebuilt.predict(x, verbose=0) - expected).max() <= 1e-5, name


def _big_vision(d, scan: bool) -> dict:
    """The Flax fixture in big_vision's layout, by big_vision's own documented rules (models/vit.py
    `fix_old_checkpoints`): `params/` prefix, posemb at the top level without the class-token row (that row
    summed into `cls`), Linen block names; with `scan`, the blocks stacked on a leading depth axis."""
    flat = dict(np.load(os.path.join(d, "weights.npz")))
    posemb = flat.pop("Transformer/posembed_input/pos_embedding")
    flat["cls"] = flat["cls"] + posemb[:, :1]
    flat["pos_embedding"] = posemb[:, 1:]
    out = {}
    for k, v in flat.items():
        for a, b in (
            ("MultiHeadDotProductAttention_1", "MultiHeadDotProductAttention_0"),
            ("LayerNorm_2", "LayerNorm_1"),
            ("MlpBlock_3", "MlpBlock_0"),
        ):
            k = k.replace(a, b)
        out[k] = v
    if scan:
        blocks = sorted({int(m.group(1)) for m in map(re.compile(r"Transformer/encoderblock_(\d+)/").match, out) if m})
        rests = {k.split("/", 2)[2] for k in out if k.startswith("Transformer/encoderblock_")}
        for rest in rests:
            out[f"Transformer/encoderblock/{rest}"] = np.stack(
                [out.pop(f"Transformer/encoderblock_{i}/{rest}") for i in blocks]
            )
    return {"params/" + k: v for k, v in out.items()}


def _expect_unchanged(model, path, match):
    before = _values(model)
    with pytest.raises((ValueError, FileNotFoundError), match=match):
        keras_vit.load_npz(model, path)
    for a, b in zip(before, _values(model)):
        np.testing.assert_array_equal(a, b)


def test_bad_checkpoints_leave_model_unchanged(tmp_path):
    d, model = _build("vit_tiny")
    params = dict(np.load(os.path.join(d, "weights.npz")))
    missing = {k: v for k, v in params.items() if "encoderblock_1" not in k}
    np.savez(tmp_path / "missing.npz", **missing)
    _expect_unchanged(
        model, str(tmp_path / "missing.npz"), r"lacks 16 weight\(s\).*Transformer/encoderblock_1/.*\.\.\."
    )
    wrong = dict(params, **{"Transformer/encoder_norm/scale": np.ones(31, "float32")})
    np.savez(tmp_path / "shape.npz", **wrong)
    _expect_unchanged(
        model,
        str(tmp_path / "shape.npz"),
        r"Transformer/encoder_norm/scale: checkpoint shape \(31,\), model expects \(32,\)",
    )
    _, hybrid = _build("hybrid_tiny")
    _expect_unchanged(hybrid, os.path.join(d, "weights.npz"), "family mismatch")
    raw = open(os.path.join(d, "weights.npz"), "rb").read()
    (tmp_path / "trunc.npz").write_bytes(raw[: len(raw) // 2])
    _expect_unchanged(model, str(tmp_path / "trunc.npz"), "not a readable .npz")
    (tmp_path / "text.npz").write_text("hello")
    _expect_unchanged(model, str(tmp_path / "text.npz"), "not a readable .npz")
    np.savez(tmp_path / "pickle.npz", **dict(params, extra=np.array([{"a": 1}], dtype=object)))
    _expect_unchanged(model, str(tmp_path / "pickle.npz"), "pickled object arrays")
    _expect_unchanged(model, str(tmp_path / "absent.npz"), "does not exist")
    bigger = dict(params, **{"Transformer/encoderblock_2/LayerNorm_0/scale": np.ones(32, "float32")})
    np.savez(tmp_path / "extra.npz", **bigger)
    _expect_unchanged(model, str(tmp_path / "extra.npz"), "no place for.*encoderblock_2")


def test_release_registry_and_file_url_fetch(tmp_path, monkeypatch):
    names = {r.name for r in releases.available()}
    assert {"ViT-B_16/imagenet21k", "ViT-L_16/imagenet21k+imagenet2012", "R50+ViT-B_16/imagenet21k"} <= names
    rel = next(r for r in releases.available() if r.name == "ViT-B_16/imagenet21k")
    assert rel.url == "https://storage.googleapis.com/vit_models/imagenet21k/ViT-B_16.npz" and rel.classes == 21843
    import hashlib

    monkeypatch.setenv("KERAS_VIT_CACHE_DIR", str(tmp_path / "keras_home"))
    d, kwargs, shape = _flax_case("vit_tiny")
    src = os.path.join(d, "weights.npz")
    digest = hashlib.sha256(open(src, "rb").read()).hexdigest()
    releases.register_release(
        releases.Release("tiny/test", "ViT-Ti/16", "test", 32, 5, "file://" + os.path.abspath(src), digest)
    )
    model = keras_vit.load_weights(keras_vit.VisionTransformer(input_shape=shape, **kwargs), "tiny/test")
    logits = model.predict(np.load(os.path.join(d, "input.npy")), verbose=0)
    assert np.abs(logits - np.load(os.path.join(d, "logits.npy"))).max() <= 1e-5
    assert os.path.exists(tmp_path / "keras_home" / "keras_vit" / "tiny_test.npz")
    releases.register_release(
        releases.Release("tiny/badhash", "ViT-Ti/16", "test", 32, 5, "file://" + os.path.abspath(src), "0" * 64)
    )
    with pytest.raises(ValueError, match="hash"):
        keras_vit.load_weights(keras_vit.VisionTransformer(input_shape=shape, **kwargs), "tiny/badhash")
    with pytest.raises(ValueError, match="No 'imagenet21k' checkpoint is released for model 'ViT-Ti/16'"):
        keras_vit.ViT_Ti16(weights="imagenet21k")


def test_explicit_old_grid_is_honoured_when_the_token_count_matches(tmp_path):
    """A 2x8-grid file into a 4x4-grid model has 16 patch rows either way: with old_grid it must be resized."""
    donor = keras_vit.VisionTransformer(8, 32, 64, 4, 1, input_shape=(16, 64, 3), classes=3)
    _randomize_all(donor)
    path = checkpoints.save_npz(donor, str(tmp_path / "wide.npz"))
    target = keras_vit.VisionTransformer(8, 32, 64, 4, 1, input_shape=(32, 32, 3), classes=3)
    keras_vit.load_npz(target, path, old_grid=(2, 8))
    posemb = np.load(path)["Transformer/posembed_input/pos_embedding"]
    grid = posemb[0, 1:].reshape(2, 8, 32)
    expected = scipy.ndimage.zoom(grid, (4 / 2, 4 / 8, 1), order=1).reshape(16, 32)
    got = np.array(target.position_embedding.pos_embedding)[0]
    np.testing.assert_allclose(got[1:], expected, atol=1e-6)
    np.testing.assert_array_equal(got[0], posemb[0, 0])


def _randomize_all(model, seed=4):
    rng = np.random.default_rng(seed)
    for v in model.weights:
        v.assign((0.05 * rng.standard_normal(v.shape)).astype("float32"))


def test_save_npz_states_its_grid_beside_the_official_arrays(tmp_path):
    """An `.npz` keras_vit writes keeps exactly the official arrays and states its patch grid in the zip archive's
    comment, so a non-square or any-size model's file loads without `old_grid`; official files state none."""
    import zipfile

    tiny = dict(patch_size=4, hidden_size=16, mlp_dim=32, num_heads=2, num_layers=1, classes=3)
    wide = keras_vit.VisionTransformer(input_shape=(24, 32, 3), **tiny)  # a 6x8 grid
    path = keras_vit.save_npz(wide, str(tmp_path / "wide.npz"))
    assert sorted(np.load(path).files) == sorted(checkpoints.model_params(wide))  # the official keys, no more
    assert checkpoints.stated_npz_grid(path) == (6, 8)
    again = keras_vit.load_model(path)  # the size it was trained at, read from the grid
    assert again.image_size == (24, 32) and again.grid_size == (6, 8)
    x = np.random.default_rng(0).uniform(-1, 1, (1, 24, 32, 3)).astype("float32")
    np.testing.assert_allclose(again.predict(x, verbose=0), wide.predict(x, verbose=0), atol=1e-6)
    # an any-size model's stored table into a non-square model: resized from the grid the file states
    any_size = keras_vit.VisionTransformer(input_shape=(None, None, 3), **tiny)
    stored = keras_vit.save_npz(any_size, str(tmp_path / "any.npz"))
    assert checkpoints.stated_npz_grid(stored) == any_size.grid_size
    keras_vit.load_npz(keras_vit.VisionTransformer(input_shape=(24, 32, 3), **tiny), stored)
    # the official release files state nothing; a keras_vit comment of another schema is refused by name
    assert checkpoints.stated_npz_grid(os.path.join(FLAX_FIXTURES, "vit_tiny", "weights.npz")) is None
    with zipfile.ZipFile(path, "a") as archive:
        archive.comment = json.dumps({"kind": "keras_vit.npz", "schema": 2, "position_grid": [6, 8]}).encode()
    with pytest.raises(ValueError, match=r"wide.npz.*schema 2.*expected schema 1"):
        keras_vit.load_model(path)
