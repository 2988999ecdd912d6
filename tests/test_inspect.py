"""keras_vit.analysis.inspect: closed-form checks, figures from a trained tiny model, hybrids, GAP, bad input."""

import itertools
import os

import keras
import numpy as np
import pytest
from PIL import Image

import keras_vit
from keras_vit.analysis import inspect
from conftest import python_run, ROOT

TINY = dict(patch_size=8, hidden_size=32, mlp_dim=64, num_heads=4, num_layers=2, input_shape=(32, 32, 3))


def test_identity_attention_gives_identity_rollout_and_zero_distance():
    eye = np.broadcast_to(np.eye(17), (2, 4, 17, 17))
    np.testing.assert_allclose(
        inspect.rollout_from_attention([eye, eye, eye]), np.broadcast_to(np.eye(17), (2, 17, 17))
    )
    np.testing.assert_allclose(inspect.attention_distance_from_attention(eye, (4, 4), 8.0), np.zeros(4))


def test_uniform_attention_distance_is_mean_pairwise_distance():
    grid, px = (3, 5), (7.0, 5.0)
    tokens = 1 + grid[0] * grid[1]
    uniform = np.full((2, 3, tokens, tokens), 1.0 / tokens)
    centres = [((r + 0.5) * px[0], (c + 0.5) * px[1]) for r in range(grid[0]) for c in range(grid[1])]
    pairwise = np.mean([np.hypot(a[0] - b[0], a[1] - b[1]) for a, b in itertools.product(centres, centres)])
    np.testing.assert_allclose(inspect.attention_distance_from_attention(uniform, grid, px), [pairwise] * 3)


def test_rollout_of_one_layer_by_hand():
    rng = np.random.default_rng(0)
    a = rng.random((1, 2, 5, 5))
    a /= a.sum(-1, keepdims=True)
    fused = a.mean(1)[0] + np.eye(5)
    expected = fused / fused.sum(-1, keepdims=True)
    np.testing.assert_allclose(inspect.rollout_from_attention([a])[0], expected)
    two = inspect.rollout_from_attention([a, a])[0]
    np.testing.assert_allclose(two, expected @ expected)
    np.testing.assert_allclose(two.sum(-1), 1.0)


def test_similarity_and_pca_properties():
    rng = np.random.default_rng(0)
    sim = inspect.similarity_from_posemb(rng.normal(size=(1, 1 + 12, 8)), (3, 4))
    flat = sim.reshape(12, 12)
    np.testing.assert_allclose(np.diag(flat), 1.0)
    np.testing.assert_allclose(flat, flat.T)
    filters = rng.normal(size=(40, 12)) * np.linspace(3, 0.1, 12)
    comps, ratio = inspect.principal_components(filters, 5)
    np.testing.assert_allclose(comps @ comps.T, np.eye(5), atol=1e-10)
    assert np.all(np.diff(ratio) <= 0)
    centred = filters - filters.mean(0)
    _, s, vt = np.linalg.svd(centred, full_matrices=False)
    np.testing.assert_allclose(np.abs(comps), np.abs(vt[:5]), atol=1e-10)  # same axes as numpy's SVD
    np.testing.assert_allclose(ratio, (s**2 / (s**2).sum())[:5])


@pytest.fixture(scope="module")
def trained_tiny():
    """A tiny ViT trained for a few epochs on scikit-learn's real digit scans (upscaled to RGB)."""
    from sklearn.datasets import load_digits

    keras.utils.set_random_seed(0)  # one initialisation and order: an unseeded run could stop short of the bar
    x, y = load_digits(return_X_y=True)
    images = np.repeat(
        keras.ops.convert_to_numpy(keras.ops.image.resize(x.reshape(-1, 8, 8, 1) / 8.0 - 1.0, (32, 32))), 3, axis=-1
    ).astype("float32")
    model = keras_vit.VisionTransformer(**TINY, classes=10, classifier_activation=None)
    model.compile(
        keras.optimizers.Adam(2e-3), keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"]
    )
    history = model.fit(images[:1500], y[:1500], epochs=3, batch_size=64, verbose=0)
    assert history.history["accuracy"][-1] > 0.3
    return model, np.clip(images[1500:1504], -1, 1)


def test_model_level_functions(trained_tiny):
    model, images = trained_tiny
    attn = inspect.attention_weights(model, images)
    assert len(attn) == 2 and attn[0].shape == (4, 4, 17, 17)
    np.testing.assert_allclose(attn[0].sum(-1), 1.0, atol=1e-5)
    maps = inspect.attention_rollout(model, images)
    assert maps.shape == (4, 32, 32) and maps.max() <= 1 + 1e-9 and maps.min() >= 0
    dist = inspect.mean_attention_distance(model, images)
    assert dist.shape == (2, 4) and np.all(dist > 0) and np.all(dist < 32 * np.sqrt(2))
    sim = inspect.position_embedding_similarity(model)
    assert sim.shape == (4, 4, 4, 4)
    assert inspect.embedding_filter_components(model).shape == (28, 8, 8, 3)


def _check_png(path, min_size=(100, 100)):
    assert os.path.getsize(path) > 1000
    img = np.asarray(Image.open(path).convert("RGB"), dtype="float32")
    assert img.shape[0] >= min_size[0] and img.shape[1] >= min_size[1]
    assert img.std() > 5.0  # not blank


def test_figures_and_cli(trained_tiny, tmp_path):
    model, images = trained_tiny
    paths = inspect.write_figures(model, images[0], str(tmp_path / "figs"))
    assert set(paths) == {
        "attention_rollout",
        "attention_distance",
        "position_embedding_similarity",
        "embedding_filters",
    }
    for p in paths.values():
        _check_png(p)
    model.save(tmp_path / "tiny.keras")
    Image.fromarray(((images[1] + 1) * 127.5).astype("uint8")).save(tmp_path / "digit.png")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=ROOT)
    done = python_run(
        [
            "-m",
            "keras_vit.analysis.inspect",
            f"--weights={tmp_path / 'tiny.keras'}",
            f"--image={tmp_path / 'digit.png'}",
            f"--out={tmp_path / 'cli'}",
        ],
        cwd=ROOT,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert len(os.listdir(tmp_path / "cli")) == 4
    bad = python_run(
        [
            "-m",
            "keras_vit.analysis.inspect",
            f"--image={tmp_path / 'nope.png'}",
            f"--weights={tmp_path / 'tiny.keras'}",
            f"--out={tmp_path / 'x'}",
        ],
        cwd=ROOT,
        env=env,
        timeout=300,
    )
    assert bad.returncode == 2 and "does not exist" in bad.stderr


def test_hybrid_and_gap_models(tmp_path):
    hybrid = keras_vit.VisionTransformer(
        1, 32, 64, 2, 2, resnet_layers=(1, 1), resnet_width=0.5, input_shape=(64, 96, 3), classes=3
    )
    x = np.random.default_rng(0).uniform(-1, 1, (2, 64, 96, 3)).astype("float32")
    assert inspect.attention_rollout(hybrid, x).shape == (2, 64, 96)
    assert inspect.mean_attention_distance(hybrid, x).shape == (2, 2)
    assert inspect.position_embedding_similarity(hybrid).shape == (8, 12, 8, 12)
    paths = inspect.write_figures(hybrid, x[0], str(tmp_path / "hybrid"))
    assert "embedding_filters" not in paths  # a hybrid's embedding sees ResNet features, not RGB
    gap = keras_vit.VisionTransformer(**TINY, classifier="gap", classes=3)
    maps = inspect.attention_rollout(gap, x[:, :32, :32])
    assert maps.shape == (2, 32, 32)
    joint = inspect.rollout_from_attention(inspect.attention_weights(gap, x[:, :32, :32]))
    expected = joint.mean(axis=1).reshape(2, 4, 4)
    grid = inspect.attention_rollout(gap, x[:, :32, :32], upsample=False)
    np.testing.assert_allclose(grid, expected / expected.max(axis=(1, 2), keepdims=True), atol=1e-6)


def test_bad_input():
    model = keras_vit.VisionTransformer(**TINY, classes=3)
    with pytest.raises(ValueError, match=r"images must be \(batch, 32, 32, 3\)"):
        inspect.attention_weights(model, np.zeros((1, 48, 48, 3)))
    with pytest.raises(ValueError, match=r"must lie in \[-1, 1\].*preprocess_input"):
        inspect.attention_rollout(model, np.full((1, 32, 32, 3), 200.0))
    raw = keras_vit.VisionTransformer(**TINY, classes=3, include_preprocessing=True)
    inspect.attention_weights(raw, np.full((1, 32, 32, 3), 200.0))
    other = keras.Sequential([keras.Input((32, 32, 3)), keras.layers.Flatten(), keras.layers.Dense(2)])
    with pytest.raises(ValueError, match="not a keras_vit.VisionTransformer"):
        inspect.attention_rollout(other, np.zeros((1, 32, 32, 3)))
    with pytest.raises(ValueError, match="head_fusion"):
        inspect.rollout_from_attention([np.ones((1, 1, 2, 2))], head_fusion="median")
