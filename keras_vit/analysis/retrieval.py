"""Image-text retrieval with a two-tower model's embeddings: search (the best matches of each query in a
gallery) and the retrieval benchmarks' scores, recall at k in both directions.

Embeddings are compared by cosine similarity (each row L2-normalised here, as `ImageTextModel.encode_*` return
them by default), which ranks as the model's similarity logits do (a positive scale and a shared bias change no
order).

Scores follow the benchmarks' definitions, where each text is a caption of one image and an image may have several
captions (MS-COCO and Flickr30k have five; `image_of_text` says whose caption each text is):
- text -> image recall@k: the share of texts whose image is among the k images most similar to the text;
- image -> text recall@k: the share of images with at least one of their captions among the k most similar texts
  (CLIP_benchmark's retrieval task);
- mean and median rank: the 1-based position of the (best) match, as open_clip's `get_clip_metrics` reports them.
With one caption per image these equal open_clip's R@k. A tie counts against the match: its position is the number
of other candidates scoring at least as high, plus one.
"""

from __future__ import annotations

from typing import Dict, Optional, Sequence, Tuple

import numpy as np
from numpy.typing import ArrayLike


def _positive_int(value, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}.")
    return int(value)


def _normalized(x, name: str) -> np.ndarray:
    x = np.asarray(x, dtype="float32")
    if x.ndim != 2 or x.shape[0] == 0 or x.shape[1] == 0:
        raise ValueError(f"{name} must be a non-empty (count, dim) array, got shape {x.shape}.")
    if not np.isfinite(x).all():
        raise ValueError(f"{name} holds NaN or infinite values.")
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    if (norms == 0).any():
        raise ValueError(f"{name} row {int(np.argmin(norms[:, 0]))} is all zeros: it has no direction to compare.")
    return x / norms


def search(queries: ArrayLike, gallery: ArrayLike, top: int = 5, chunk: int = 1024) -> Tuple[np.ndarray, np.ndarray]:
    """(indices, similarities), each (queries, top): the `top` gallery rows most similar to each query, best
    first (ties by gallery order). `queries` (Q, D) and `gallery` (G, D): text and image embeddings, either way
    round."""
    q, g = _normalized(queries, "queries"), _normalized(gallery, "gallery")
    if q.shape[1] != g.shape[1]:
        raise ValueError(f"queries have width {q.shape[1]} and the gallery {g.shape[1]}: not one embedding space.")
    top, chunk = min(_positive_int(top, "top"), g.shape[0]), _positive_int(chunk, "chunk")
    indices, scores = [], []
    for start in range(0, q.shape[0], chunk):
        s = q[start : start + chunk] @ g.T
        best = np.argsort(-s, axis=1, kind="stable")[:, :top]
        indices.append(best)
        scores.append(np.take_along_axis(s, best, axis=1))
    return np.concatenate(indices), np.concatenate(scores)


def _check_pairs(image_of_text, images: int, texts: int) -> np.ndarray:
    if image_of_text is None:
        if images != texts:
            raise ValueError(
                f"{images} images and {texts} texts: say whose caption each text is (image_of_text), or give one "
                "text per image in the same order."
            )
        return np.arange(texts)
    pairs = np.asarray(image_of_text)
    if pairs.shape != (texts,) or not np.issubdtype(pairs.dtype, np.integer):
        raise ValueError(f"image_of_text must hold one int per text ({texts}), got shape {pairs.shape} {pairs.dtype}.")
    if texts and (pairs.min() < 0 or pairs.max() >= images):
        raise ValueError(f"image_of_text holds {int(pairs.min())}..{int(pairs.max())}; images are 0..{images - 1}.")
    missing = np.setdiff1d(np.arange(images), pairs)
    if missing.size:
        raise ValueError(f"image {int(missing[0])} has no caption in image_of_text ({missing.size} such images).")
    return pairs


def retrieval_metrics(
    image_embeddings: ArrayLike,
    text_embeddings: ArrayLike,
    image_of_text: Optional[Sequence[int]] = None,
    ks: Sequence[int] = (1, 5, 10),
    chunk: int = 1024,
) -> Dict[str, float]:
    """Recall@k both ways and the mean / median rank of the match (module docstring), as
    {"text_to_image_R@1": ..., "image_to_text_R@1": ..., "text_to_image_mean_rank": ..., ...}.

    `image_embeddings` (N, D), `text_embeddings` (M, D); `image_of_text`: M ints, the image each text describes
    (default: text i describes image i). Every image needs at least one caption."""
    images = _normalized(image_embeddings, "image_embeddings")
    texts = _normalized(text_embeddings, "text_embeddings")
    if images.shape[1] != texts.shape[1]:
        raise ValueError(f"image embeddings have width {images.shape[1]} and text embeddings {texts.shape[1]}.")
    pairs = _check_pairs(image_of_text, images.shape[0], texts.shape[0])
    if not len(ks):
        raise ValueError("ks must name at least one k.")
    ks = [_positive_int(k, "each of ks") for k in ks]
    chunk = _positive_int(chunk, "chunk")
    # text -> image: the 1-based position of each text's own image among all images
    text_rank = np.empty(texts.shape[0], dtype=np.int64)
    for start in range(0, texts.shape[0], chunk):
        s = texts[start : start + chunk] @ images.T
        own = s[np.arange(s.shape[0]), pairs[start : start + chunk]]
        text_rank[start : start + chunk] = (s >= own[:, None]).sum(axis=1)  # itself included: 1-based
    # image -> text: the position of each image's best-placed caption (the texts above it are other images')
    image_rank = np.empty(images.shape[0], dtype=np.int64)
    for start in range(0, images.shape[0], chunk):
        s = images[start : start + chunk] @ texts.T
        mine = pairs[None, :] == np.arange(start, start + s.shape[0])[:, None]
        best = np.where(mine, s, -np.inf).max(axis=1)
        image_rank[start : start + chunk] = (np.where(mine, -np.inf, s) >= best[:, None]).sum(axis=1) + 1
    out = {}
    for direction, rank in (("text_to_image", text_rank), ("image_to_text", image_rank)):
        for k in ks:
            out[f"{direction}_R@{k}"] = float(np.mean(rank <= k))
        out[f"{direction}_mean_rank"] = float(rank.mean())
        out[f"{direction}_median_rank"] = float(np.floor(np.median(rank)))
    return out
