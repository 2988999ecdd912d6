"""The trainer: `train_and_evaluate(config, workdir)` on the engine of Keras' backend.

Pre-training and fine-tuning are configs, not scripts. Both engines share `common` (config -> model, the
checks made before anything is written, input stream, logging loop, evaluation, outputs), `config_checks`,
`optim` (optimizers and schedules), `losses`, `lock` (one live run per workdir), `checkpoints` (the guarded,
path-keyed checkpoint rules) and `fewshot_callback`. The TensorFlow engine is `tf_run` + `tf_step` (a custom
`strategy.run` step in a compiled `tf.function` under `distribute`'s tf.distribute strategies; Keras 3
`model.fit` breaks under MultiWorkerMirroredStrategy, keras-team/keras#20585) with tf.train checkpoints; the
JAX engine is `jax_run` + `jax_step` (a jitted stateless step under `keras.distribution`) with Orbax
checkpoints (`jax_checkpoints`). A run checkpoints every `checkpoint_every` steps and resumes from the latest
checkpoint in the workdir. The CLI is `python -m recipes.train`.
"""

from __future__ import annotations

from typing import Callable, List, Optional

from keras_vit.utils.extras import require

require(("tensorflow", "ml_collections", "absl", "tensorflow_datasets"), "train", "the recipes (recipes.train)")

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402


def train_and_evaluate(
    config,
    workdir: str,
    *,
    strategy: Optional[tf.distribute.Strategy] = None,
    distribution=None,
    train_input: Optional[Callable] = None,
    eval_input: Optional[Callable] = None,
    callbacks: Optional[List[keras.callbacks.Callback]] = None,
    init_checkpoint=None,
) -> dict:
    """Trains per `config` in `workdir` (resuming if it holds checkpoints) and evaluates.

    The engine is Keras' backend: TensorFlow runs under `strategy` (tf.distribute), JAX under
    `distribution` ("auto", "none", "data", "model" or a `keras.distribution.Distribution`).
    `train_input` / `eval_input`: optional `(global_batch, image_size, training) -> tf.data.Dataset`
    of (images in [-1, 1], int labels) replacing the config's dataset (VTAB uses this).
    `init_checkpoint`: `config.init_weights` already read (`keras_vit.weights.read_checkpoint`), so a suite
    that fine-tunes one source many times reads it once. Returns the summary also written to
    `workdir/summary.json`.
    """
    if keras.backend.backend() == "jax":
        if strategy is not None:
            raise ValueError("strategy= is for the TensorFlow engine; on JAX pass distribution=.")
        from recipes.trainer import jax_run

        return jax_run.train_and_evaluate(
            config,
            workdir,
            distribution=distribution or "auto",
            train_input=train_input,
            eval_input=eval_input,
            callbacks=callbacks,
            init_checkpoint=init_checkpoint,
        )
    if keras.backend.backend() != "tensorflow":
        raise ValueError(f"The trainer runs on the tensorflow and jax backends, not {keras.backend.backend()!r}.")
    if distribution is not None:
        raise ValueError("distribution= is for the JAX engine (KERAS_BACKEND=jax); on TensorFlow pass strategy=.")
    from recipes.trainer import tf_run

    return tf_run.train_and_evaluate(
        config,
        workdir,
        strategy=strategy or tf.distribute.get_strategy(),
        train_input=train_input,
        eval_input=eval_input,
        callbacks=callbacks,
        init_checkpoint=init_checkpoint,
    )
