"""The trainer on the TensorFlow backend: a compiled `strategy.run` step (`recipes.trainer.tf_step`) under tf.distribute,
checkpoints by `tf.train.CheckpointManager` (`recipes.trainer.checkpoints`). Multi-worker tasks other than the
chief write into `workdir/worker_<i>`."""

from __future__ import annotations

import logging
import os
from typing import Callable, List, Optional

import keras
import tensorflow as tf

from recipes import data
from recipes.trainer import common, config_checks, family, lock, run_record, tf_step, xla_choice
from recipes.trainer.checkpoints import CheckpointManager

logger = logging.getLogger("recipes")


def train_and_evaluate(
    config,
    workdir: str,
    *,
    strategy: tf.distribute.Strategy,
    train_input: Optional[Callable] = None,
    eval_input: Optional[Callable] = None,
    callbacks: Optional[List[keras.callbacks.Callback]] = None,
    init_checkpoint=None,
) -> dict:
    """`recipes.trainer.train_and_evaluate` on the TensorFlow engine."""
    config_checks.check(config)  # the fields' own checks first, then what this engine does not do
    if config.contrastive.enabled and config.contrastive.chunked:
        raise ValueError(
            "config.contrastive.chunked passes texts around a ring of devices on the JAX engine; on TensorFlow the "
            "replicas all-gather them (the same loss): set --config.contrastive.chunked=False, or --backend=jax."
        )
    outdir, source, num_classes, steps_total = common.prepare(config, workdir, strategy, train_input)
    with lock.hold(outdir):  # a second live run on this workdir is refused here
        return _train(
            config,
            workdir,
            outdir,
            source,
            num_classes,
            steps_total,
            strategy,
            train_input,
            eval_input,
            callbacks,
            init_checkpoint,
        )


def _train(
    config,
    workdir,
    outdir,
    source,
    num_classes,
    steps_total,
    strategy,
    train_input,
    eval_input,
    callbacks,
    init_checkpoint,
) -> dict:
    run_record.prepare(config, outdir, "tensorflow")  # another config's run is refused before anything is read
    model, net, loss_fn, optimizer, init_checkpoint = common.build(
        config, strategy.scope(), num_classes, steps_total, init_checkpoint, source.class_names if source else ()
    )
    manager = CheckpointManager(
        os.path.join(outdir, "checkpoints"),
        {"model": net.variables, "optimizer": optimizer.variables},
        keep=config.keep_checkpoints,
    )
    restored = manager.restore()
    run_record.after_restore(config, outdir, "tensorflow", steps_total, restored)
    if restored is None and config.init_weights:
        common.init_from_weights(model, config, init_checkpoint)
    start = int(optimizer.iterations.numpy())
    logger.info("%s at step %d of %d", "Resuming" if restored is not None else "Starting", start, steps_total)

    def build_train(global_batch, rows=None):
        return common.train_stream(
            config, source, train_input, start, global_batch, family.normalizer(model), rows, outdir=outdir
        )

    replicas = strategy.num_replicas_in_sync
    multi = replicas > 1 or isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)
    dataset = data.distribute(strategy, build_train, config.batch_size) if multi else build_train(config.batch_size)
    devices = [d.device_type for d in tf.config.list_logical_devices()]
    xla, why = xla_choice.use_xla(config.jit_compile, config.precision, devices, xla_choice.cpu_flags())
    logger.info("training step %s: %s", "with XLA" if xla else "without XLA", why)
    step_fn = tf_step.build_train_step(
        net,
        optimizer,
        num_classes=num_classes,
        global_batch_size=config.batch_size,
        strategy=strategy,
        label_smoothing=config.label_smoothing,
        clip_norm=config.optimizer.clip_norm,
        jit_compile=xla and not multi,
        loss_fn=loss_fn,
    )
    chief = outdir == workdir
    writer, cb = common.logging_and_callbacks(config, outdir, chief, model, callbacks)
    cb.on_train_begin()
    history = common.loop(
        config, step_fn, dataset, start, steps_total, manager, optimizer, writer, cb, chief, source=source
    )
    cb.on_train_end()
    if config.ema_decay:
        optimizer.finalize_variable_values(net.trainable_variables)
    summary = dict(
        steps=steps_total,
        resumed_from=restored,
        num_classes=num_classes,
        image_size=config.dataset.image_size,
        replicas=replicas,
        final_train=history[-1] if history else None,
    )
    return common.finish(config, model, outdir, writer, summary, eval_input, steps_total, net=net, source=source)
