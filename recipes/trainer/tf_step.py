"""The compiled training and evaluation steps.

One `tf.function` holds forward, backward, gradient all-reduce, global-norm
clipping and the optimizer update (XLA-compiled on a single device), so a step is
one device call with no host synchronisation; metrics stay on the device until
the loop asks for them. The training step's first call (the one that compiles) gives
the memory the compilation freed back to the OS (`keras_vit.utils.heap`).
"""

from __future__ import annotations

import logging
from typing import Callable, Optional

import keras
import tensorflow as tf

from keras_vit.utils import heap
from recipes.trainer import losses

logger = logging.getLogger("recipes")


def _statistics(per_example, logits, targets, norm, replicas: int) -> dict:
    """One replica's sums for the log: loss, correct predictions, examples, gradient norm, non-finite flag."""
    predictions = tf.argmax(tf.cast(logits, tf.float32), axis=-1, output_type=targets.dtype)
    loss_sum = tf.reduce_sum(per_example)
    finite = tf.logical_and(tf.math.is_finite(tf.cast(loss_sum, tf.float32)), tf.math.is_finite(norm))
    return {
        "loss": loss_sum,
        "correct": tf.reduce_sum(tf.cast(tf.equal(predictions, targets), tf.float32)),
        "count": tf.cast(tf.size(targets), tf.float32),
        "grad_norm": norm / replicas,
        "nonfinite": 1.0 - tf.cast(finite, tf.float32),
    }


def _rows_once(gradient: tf.IndexedSlices) -> tf.IndexedSlices:
    """An embedding lookup's sparse gradient (a text tower's) with each row once, its repeats summed. As the tape
    gives it, a token seen twice has two rows, and `tf.clip_by_global_norm` would count them as two: a norm above
    the dense gradient's (the clipping and the logged norm then differ from JAX's and from N replicas')."""
    rows, where = tf.unique(gradient.indices)
    values = tf.math.unsorted_segment_sum(gradient.values, where, tf.shape(rows)[0])
    return tf.IndexedSlices(values, rows, gradient.dense_shape)


def build_train_step(
    model: keras.Model,
    optimizer: keras.optimizers.Optimizer,
    *,
    num_classes: int,
    global_batch_size: int,
    strategy: Optional[tf.distribute.Strategy] = None,
    label_smoothing: float = 0.0,
    clip_norm: float = 0.0,
    jit_compile: Optional[bool] = True,
    loss_fn: Optional[Callable] = None,
) -> Callable:
    """Returns `step(inputs) -> {"loss", "correct", "count", "grad_norm", "nonfinite"}` (sums over replicas).

    `grad_norm` is the global norm of the all-reduced gradient (before clipping); `nonfinite` is
    > 0 when the loss or that norm is NaN/Inf, which the loop checks before any checkpoint.

    The loss is summed per replica and divided by the global batch, gradients are
    all-reduced explicitly and clipped by their global norm (`clip_norm` > 0) on the
    full gradient, so N replicas compute exactly the update of one device on the
    same global batch. `loss_fn(outputs, images, labels)` may replace the classification
    loss (it gets the network's outputs and returns per-example losses, logits and their
    targets); masked patch prediction uses that.
    """
    strategy = strategy or tf.distribute.get_strategy()
    variables = model.trainable_variables
    replicas = strategy.num_replicas_in_sync

    def classification(images, labels):
        logits = model(images, training=True)
        return losses.cross_entropy(labels, logits, num_classes, label_smoothing), logits, labels

    def replica_step(images, labels):
        with tf.GradientTape() as tape:
            if loss_fn is None:
                per_example, logits, targets = classification(images, labels)
            else:
                per_example, logits, targets = loss_fn(model(images, training=True), images, labels)
            loss = tf.reduce_sum(per_example) / global_batch_size
        grads = [_rows_once(g) if isinstance(g, tf.IndexedSlices) else g for g in tape.gradient(loss, variables)]
        ctx = tf.distribute.get_replica_context()
        if replicas > 1:
            # each replica's sparse gradient holds the rows of the tokens it saw, a different count on each: the
            # collective sums tensors of one shape, so it is summed dense
            grads = [tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g for g in grads]
            grads = ctx.all_reduce(tf.distribute.ReduceOp.SUM, grads)
        if clip_norm:
            grads, norm = tf.clip_by_global_norm(grads, clip_norm)
        else:
            norm = tf.linalg.global_norm(grads)
        if replicas > 1:  # Keras' optimizer sums over replicas again: hand it 1/N of the full gradient
            grads = [g / replicas for g in grads]
        optimizer.apply(grads, variables)
        return _statistics(per_example, logits, targets, norm, replicas)

    def step(inputs):
        out = strategy.run(replica_step, args=inputs)
        return {k: strategy.reduce(tf.distribute.ReduceOp.SUM, v, axis=None) for k, v in out.items()}

    if replicas > 1 and jit_compile:
        logger.info(
            "jit_compile disabled under %s (XLA cannot place mirrored variables across devices here)",
            type(strategy).__name__,
        )
        jit_compile = False
    if jit_compile:
        compiled = tf.function(replica_step, jit_compile=True)
        step_fn = tf.function(lambda inputs: compiled(*inputs))
    else:
        step_fn = tf.function(step)
    # the first call traces and compiles; what that frees goes back to the OS before the step's buffers are taken
    return heap.first_call_returning_freed_memory(step_fn)


def build_eval_step(model: keras.Model) -> Callable:
    """Returns `step(images, labels) -> (correct, count)`, compiled, single device."""

    @tf.function
    def step(images, labels):
        logits = model(images, training=False)
        predictions = tf.argmax(tf.cast(logits, tf.float32), axis=-1, output_type=labels.dtype)
        return (tf.reduce_sum(tf.cast(tf.equal(predictions, labels), tf.float32)), tf.cast(tf.size(labels), tf.float32))

    return step


def evaluate(model: keras.Model, dataset: tf.data.Dataset) -> float:
    """Top-1 accuracy of `model` on a finite dataset of (images, labels)."""
    step = build_eval_step(model)
    correct = count = 0.0
    for images, labels in dataset:
        c, n = step(images, labels)
        correct, count = correct + float(c), count + float(n)
    if not count:
        raise ValueError("The evaluation dataset is empty.")
    return correct / count
