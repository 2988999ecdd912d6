"""The contrastive losses image-text towers are trained with, over a batch of matching (image, text) pairs.

- CLIP's (`clip_loss`): logits `t * I T^T` with the learned temperature t = exp(logit_scale); the mean of the
  cross-entropy of each image over the texts and of each text over the images, the matching pair the label.
- SigLIP's (`siglip_loss`): every pair an independent binary decision, logits `t * I T^T + b`, label +1 on the
  diagonal and -1 elsewhere; `-sum(log sigmoid(label * logit)) / batch`. `text_chunks` > 1 computes it over
  blocks of texts one at a time (big_vision's chunked form, which its devices run in turn): the same sum.

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
