"""The contrastive losses image-text towers are trained with, over a batch of matching (image, text) pairs.

- CLIP's (`clip_loss`): logits `t * I T^T` with the learned temperature t = exp(logit_scale); the mean of the
  cross-entropy of each image over the texts and of each text over the images, the matching pair the label.
- SigLIP's (`siglip_loss`): every pair an independent binary decision, logits `t * I T^T + b`, label +1 on the
  diagonal and -1 elsewhere; `-sum(log sigmoid(label * logit)) / batch`. `text_chunks` > 1 computes it over
  blocks of texts one at a time (big_vision's chunked form, which its devices run in turn): the same sum.

`contrastive_losses` gives either loss per example, from logits the model already computed, with a matrix of
positive pairs: a batch may hold the same caption twice (captions generated from class names, as LiT on a labelled
dataset makes them), and two images with one caption are both its match. With the diagonal as the only positives
it sums to the losses above.

Embeddings are L2-normalised by the caller (`ImageTextModel.encode_*`); `logit_scale` is the log-temperature
weight, as the model holds it. open_clip's `ClipLoss` / `SigLipLoss` take the same inputs (with the
temperature exponentiated) and give the same numbers (tests/test_contrastive.py).
"""

from __future__ import annotations

from keras import ops


def _logits(image_embeddings, text_embeddings, logit_scale, logit_bias=None):
    logits = ops.exp(ops.cast(logit_scale, "float32")) * ops.matmul(
        ops.cast(image_embeddings, "float32"), ops.transpose(ops.cast(text_embeddings, "float32"))
    )
    return logits + ops.cast(logit_bias, "float32") if logit_bias is not None else logits


def clip_loss(image_embeddings, text_embeddings, logit_scale):
    """CLIP's symmetric cross-entropy over the batch (row i of each is a matching pair)."""
    logits = _logits(image_embeddings, text_embeddings, logit_scale)
    labels = ops.arange(ops.shape(logits)[0])
    per_image = ops.sparse_categorical_crossentropy(labels, logits, from_logits=True)
    per_text = ops.sparse_categorical_crossentropy(labels, ops.transpose(logits), from_logits=True)
    return (ops.mean(per_image) + ops.mean(per_text)) / 2


def siglip_loss(image_embeddings, text_embeddings, logit_scale, logit_bias, text_chunks: int = 1):
    """SigLIP's sigmoid loss over the batch, summed over every (image, text) pair and divided by the batch."""
    n = ops.shape(image_embeddings)[0]
    chunks = int(text_chunks)
    if chunks < 1:
        raise ValueError(f"text_chunks={text_chunks}: at least one chunk.")
    total = 0.0
    bounds = [round(i * int(n) / chunks) for i in range(chunks + 1)] if chunks > 1 else [0, n]
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        logits = _logits(image_embeddings, text_embeddings[lo:hi], logit_scale, logit_bias)
        rows, cols = ops.arange(n)[:, None], ops.arange(lo, hi)[None, :]
        labels = ops.where(ops.equal(rows, cols), 1.0, -1.0)
        total = total + ops.sum(ops.log_sigmoid(labels * logits))
    return -total / ops.cast(n, "float32")


def same_rows(token_ids):
    """(batch, batch) bool: row i and row j hold the same token ids (the same caption)."""
    ids = ops.convert_to_tensor(token_ids)
    return ops.all(ops.equal(ids[:, None, :], ids[None, :, :]), axis=-1)


def contrastive_losses(logits, kind: str = "clip", positives=None, text_logits=None):
    """Per-example losses (batch,) whose sum divided by the batch is the batch's loss.

    logits: (batch images, texts), the model's `exp(logit_scale) * cos (+ logit_bias)`: the batch's texts, or every
      replica's texts when the loss is spread over devices (the batch is then one replica's part of the global
      batch, and the sum over replicas is the global batch's loss).
    kind: "clip": example i's loss is half its image's cross-entropy over the texts plus half its text's over the
      images, the target spread evenly over the positives; "sigmoid" (SigLIP): the sum over the texts of
      -log sigmoid(+-logit), + for a positive pair.
    positives: (batch, texts) bool, True for a matching (image, text) pair; None: the diagonal. Each row and
      column must hold at least one (the diagonal always does when texts are compared with `same_rows`).
    text_logits: CLIP across replicas only: (every replica's images, batch texts), each batch text's column over
      all images (its positives: `positives` transposed). Default: `logits`, a square batch.
    """
    logits = ops.cast(logits, "float32")
    n = ops.shape(logits)[0]
    if positives is None:
        positives = ops.equal(ops.arange(n)[:, None], ops.arange(n)[None, :])
    positive = ops.cast(positives, "float32")
    if kind == "clip":
        per_image = -ops.sum(positive * ops.log_softmax(logits, axis=1), axis=1) / ops.sum(positive, axis=1)
        columns, column_positive = logits, positive
        if text_logits is not None:
            columns, column_positive = ops.cast(text_logits, "float32"), ops.transpose(positive)
        per_text = -ops.sum(column_positive * ops.log_softmax(columns, axis=0), axis=0) / ops.sum(
            column_positive, axis=0
        )
        return (per_image + per_text) / 2
    if kind == "sigmoid":
        return -ops.sum(ops.log_sigmoid((2 * positive - 1) * logits), axis=1)
    raise ValueError(f"kind={kind!r}: 'clip' (softmax, CLIP) or 'sigmoid' (SigLIP).")
