"""keras_vit.analysis.retrieval: search and recall@k against hand-worked cases and a brute-force count written
here (candidates sorted one query at a time in plain Python), and its refusals."""

import numpy as np
import pytest

import keras_vit
from keras_vit.analysis import retrieval


def _brute(images, texts, image_of_text, k):
    """(text->image, image->text) recall@k by sorting every query's candidates in Python."""
    images = [v / np.linalg.norm(v) for v in images]
    texts = [v / np.linalg.norm(v) for v in texts]
    t2i = []
    for t, own in zip(texts, image_of_text):
        order = sorted(range(len(images)), key=lambda i: -float(np.dot(t, images[i])))
        t2i.append(own in order[:k])
    i2t = []
    for i, v in enumerate(images):
        order = sorted(range(len(texts)), key=lambda j: -float(np.dot(v, texts[j])))
        i2t.append(any(image_of_text[j] == i for j in order[:k]))
    return np.mean(t2i), np.mean(i2t)


def test_a_hand_worked_case():
    # three orthogonal images; text i is image i's caption. Text 0 points at image 0, text 1 between images 0 and
    # 2 (cosines 0.6, 0, 0.8), text 2 at image 1: texts 1 and 2 score their own image 0, tied with another image
    # or behind it, so third. Image 0 finds text 0 first; images 1 and 2 score their own text 0, third.
    images = np.eye(3, dtype="float32")
    texts = np.array([[1, 0, 0], [0.6, 0, 0.8], [0, 1, 0]], dtype="float32")
    m = retrieval.retrieval_metrics(images, texts, ks=(1, 2))
    assert m["text_to_image_R@1"] == pytest.approx(1 / 3) and m["text_to_image_R@2"] == pytest.approx(1 / 3)
    assert m["text_to_image_mean_rank"] == pytest.approx((1 + 3 + 3) / 3)
    assert m["image_to_text_R@1"] == pytest.approx(1 / 3) and m["image_to_text_R@2"] == pytest.approx(1 / 3)
    assert m["image_to_text_mean_rank"] == pytest.approx((1 + 3 + 3) / 3) and m["image_to_text_median_rank"] == 3


def test_recall_equals_a_brute_force_count_with_five_captions_per_image():
    rng = np.random.default_rng(0)
    images = rng.standard_normal((20, 8))
    image_of_text = np.repeat(np.arange(20), 5)
    texts = images[image_of_text] + 1.5 * rng.standard_normal((100, 8))  # noisy captions
    m = retrieval.retrieval_metrics(images * 3.0, texts, image_of_text, ks=(1, 5, 10), chunk=7)
    for k in (1, 5, 10):
        t2i, i2t = _brute(images, texts, list(image_of_text), k)
        assert m[f"text_to_image_R@{k}"] == pytest.approx(t2i) and m[f"image_to_text_R@{k}"] == pytest.approx(i2t)
    assert 0 < m["text_to_image_R@1"] < m["text_to_image_R@10"] <= 1  # the case is neither trivial nor hopeless


def test_one_caption_per_image_ranks_as_open_clips_metrics_define_them():
    rng = np.random.default_rng(1)
    images, texts = rng.standard_normal((30, 6)), rng.standard_normal((30, 6))
    m = retrieval.retrieval_metrics(images, texts)
    s = (images / np.linalg.norm(images, axis=1, keepdims=True)) @ (texts / np.linalg.norm(texts, axis=1)[:, None]).T
    # open_clip's get_clip_metrics: the 0-based position of the pair in a descending argsort of each row
    for name, logits in (("image_to_text", s), ("text_to_image", s.T)):
        position = np.array([list(np.argsort(-row)).index(i) for i, row in enumerate(logits)])
        assert m[f"{name}_mean_rank"] == pytest.approx(position.mean() + 1)
        assert m[f"{name}_median_rank"] == np.floor(np.median(position)) + 1
        for k in (1, 5, 10):
            assert m[f"{name}_R@{k}"] == pytest.approx(np.mean(position < k))


def test_a_tie_counts_against_the_match():
    images = np.array([[1.0, 0.0], [1.0, 0.0]])  # two identical images
    m = retrieval.retrieval_metrics(images, np.array([[1.0, 0.0], [1.0, 0.0]]), ks=(1, 2))
    assert m["text_to_image_R@1"] == 0.0 and m["text_to_image_R@2"] == 1.0


def test_search_returns_the_best_gallery_rows_in_order():
    rng = np.random.default_rng(2)
    queries, gallery = rng.standard_normal((5, 4)), rng.standard_normal((9, 4))
    indices, scores = keras_vit.search(queries, gallery, top=3, chunk=2)
    g = gallery / np.linalg.norm(gallery, axis=1, keepdims=True)
    for q, idx, sc in zip(queries, indices, scores):
        cos = g @ (q / np.linalg.norm(q))
        assert list(idx) == sorted(range(9), key=lambda j: -cos[j])[:3]
        np.testing.assert_allclose(sc, cos[idx], rtol=1e-5)
    assert keras_vit.search(queries, gallery, top=50)[0].shape == (5, 9)  # at most the gallery


@pytest.mark.parametrize(
    "images, texts, kwargs, message",
    [
        (np.ones((3, 4)), np.ones((3, 5)), {}, "width"),
        (np.ones((3, 4)), np.ones((4, 4)), {}, "say whose caption"),
        (np.ones((3, 4)), np.ones((3, 4)), dict(image_of_text=[0, 1, 3]), "images are 0..2"),
        (np.ones((3, 4)), np.ones((3, 4)), dict(image_of_text=[0, 1, 1]), "image 2 has no caption"),
        (np.ones((3, 4)), np.ones((3, 4)), dict(image_of_text=[0.0, 1.0, 2.0]), "one int per text"),
        (np.zeros((3, 4)), np.ones((3, 4)), {}, "all zeros"),
        (np.full((3, 4), np.nan), np.ones((3, 4)), {}, "NaN"),
        (np.ones((0, 4)), np.ones((0, 4)), {}, "non-empty"),
        (np.ones((3, 4)), np.ones((3, 4)), dict(ks=(0,)), "positive"),
    ],
)
def test_bad_input_is_refused_naming_it(images, texts, kwargs, message):
    with pytest.raises(ValueError, match=message):
        retrieval.retrieval_metrics(images, texts, **kwargs)


def test_search_refuses_a_bad_top_and_mismatched_widths():
    with pytest.raises(ValueError, match="top"):
        keras_vit.search(np.ones((1, 2)), np.ones((2, 2)), top=0)
    with pytest.raises(ValueError, match="embedding space"):
        keras_vit.search(np.ones((1, 2)), np.ones((2, 3)))
