"""The classification loss in `keras.ops`, so both engines' steps compute it the same way."""

from __future__ import annotations

from keras import ops


def cross_entropy(labels, logits, num_classes: int, label_smoothing: float = 0.0):
    """Per-example softmax cross-entropy on (optionally smoothed) one-hot targets, in float32."""
    logits = ops.cast(logits, "float32")
    targets = ops.one_hot(labels, num_classes)
    if label_smoothing:
        targets = targets * (1.0 - label_smoothing) + label_smoothing / num_classes
    return -ops.sum(targets * ops.log_softmax(logits, axis=-1), axis=-1)
