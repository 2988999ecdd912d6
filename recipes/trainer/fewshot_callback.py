"""A Keras callback that runs the linear few-shot evaluator during training (big_vision style)."""

from __future__ import annotations

import logging
from typing import Optional

import keras
import tensorflow as tf

from keras_vit.analysis.fewshot import FewShotEvaluator

logger = logging.getLogger("recipes")


class FewShotCallback(keras.callbacks.Callback):
    """Every `every_n_steps` steps: few-shot accuracy of the current model's pre-logits,
    logged to TensorBoard as `a/<dataset>_<shots>shot` (mean over seeds)."""

    def __init__(self, evaluator: FewShotEvaluator, every_n_steps: int, log_dir: Optional[str] = None):
        super().__init__()
        if every_n_steps <= 0:
            raise ValueError(f"every_n_steps must be positive, got {every_n_steps}.")
        self.evaluator, self.every = evaluator, int(every_n_steps)
        self.writer = tf.summary.create_file_writer(log_dir) if log_dir else None
        self.history = []

    def evaluate(self, step: int) -> dict:
        self.evaluator.set_feature_fn(self.model)
        results = self.evaluator.evaluate()
        self.history.append((step, results))
        if self.writer is not None:
            with self.writer.as_default(step=step):
                for name, (mean, _) in results.items():
                    tf.summary.scalar(f"a/{name}", mean)
            self.writer.flush()
        logger.info("step %d few-shot: %s", step, ", ".join(f"{k} {100 * m:.1f}%" for k, (m, _) in results.items()))
        return results

    def on_train_batch_end(self, batch, logs=None):
        step = int(batch)
        if step % self.every == 0:
            self.evaluate(step)
