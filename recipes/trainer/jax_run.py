"""The trainer on the JAX backend: the same configs, input, schedules, logs and guarantees as on TensorFlow.

Only the engine differs: `recipes.trainer.jax_step` (a jitted stateless step under `keras.distribution`) and
Orbax checkpoints (`recipes.trainer.jax_checkpoints`). Several hosts join through `keras.distribution.initialize`;
process 0 holds the workdir lock and writes TensorBoard, the model and `summary.json`, and every process
writes its shards of each checkpoint.
"""

from __future__ import annotations

import contextlib
import logging
import os
from typing import Callable, List, Optional

import jax
import keras
from recipes.trainer import common, config_checks, family, jax_step, lock, run_record
from recipes.trainer.jax_checkpoints import OrbaxCheckpoints
from recipes.trainer.jax_chunked_sigmoid import chunked_sigmoid_loss

logger = logging.getLogger("recipes")


def initialize(
    job_addresses: Optional[str] = None, num_processes: Optional[int] = None, process_id: Optional[int] = None
) -> None:
    """Joins a multi-process run (`keras.distribution.initialize`) when flags or $KERAS_DISTRIBUTION_* say so."""
    given = (job_addresses, num_processes, process_id)
    from_env = os.environ.get("KERAS_DISTRIBUTION_NUM_PROCESSES")
    if all(v is None for v in given) and not from_env:
        return
    jax.config.update("jax_cpu_collectives_implementation", "gloo")  # CPU processes talk over gloo (GPU/TPU: unused)
    keras.distribution.initialize(job_addresses, num_processes, process_id)


def model_sizes(config):
    """The ViTConfig of `config.model` (a table row with overrides, or the custom sizes): what the layout
    map needs before any variable exists."""
    import keras_vit

    m = config.model
    sizes = keras_vit.vit_config(m.name).model_kwargs() if m.name else {}
    sizes.update({f: int(m[f]) for f in common.TRANSFORMER_FIELDS if m[f]})
    return keras_vit.ViTConfig(name=m.name or "custom", **{f: sizes[f] for f in common.TRANSFORMER_FIELDS})


def _distribution(spec, config):
    if not isinstance(spec, str):  # a keras.distribution.DataParallel / ModelParallel built by the caller
        return spec
    return jax_step.make_distribution(spec, model_sizes(config), config.model_parallel)


def train_and_evaluate(
    config,
    workdir: str,
    *,
    distribution="auto",
    train_input: Optional[Callable] = None,
    eval_input: Optional[Callable] = None,
    callbacks: Optional[List[keras.callbacks.Callback]] = None,
    init_checkpoint=None,
) -> dict:
    """`recipes.trainer.train_and_evaluate` on the JAX engine."""
    config_checks.check(config)  # before the mesh is built from config.model_parallel
    dist = _distribution(distribution, config)
    ways = jax_step.data_ways(dist)
    outdir, source, num_classes, steps_total = common.prepare(config, workdir, None, train_input, data_ways=ways)
    chief = jax.process_index() == 0
    held = lock.hold(outdir) if chief else contextlib.nullcontext()
    with held:
        return _train(
            config,
            workdir,
            outdir,
            source,
            num_classes,
            steps_total,
            dist,
            train_input,
            eval_input,
            callbacks,
            chief,
            init_checkpoint,
        )


def _train(
    config,
    workdir,
    outdir,
    source,
    num_classes,
    steps_total,
    dist,
    train_input,
    eval_input,
    callbacks,
    chief,
    init_checkpoint,
) -> dict:
    run_record.prepare(config, outdir, "jax", writer=chief)  # another config's run is refused before anything is read
    scope = dist.scope() if dist is not None else contextlib.nullcontext()
    model, net, loss_fn, optimizer, init_checkpoint = common.build(
        config, scope, num_classes, steps_total, init_checkpoint, source.class_names if source else ()
    )
    if config.contrastive.enabled and config.contrastive.chunked and dist is not None:
        loss_fn = chunked_sigmoid_loss(net, jax_step.jax_mesh(dist), dist.batch_dim_name)
    engine = jax_step.JaxEngine.for_config(config, net, optimizer, dist, num_classes, loss_fn)
    manager = OrbaxCheckpoints(os.path.join(outdir, "checkpoints"), engine, keep=config.keep_checkpoints)
    restored = manager.restore()
    if chief:
        run_record.after_restore(config, outdir, "jax", steps_total, restored)
    if restored is None and config.init_weights:
        common.init_from_weights(model, config, init_checkpoint)
        engine.reload()
    start = engine.step()
    logger.info(
        "%s at step %d of %d on %d device(s), %s",
        "Resuming" if restored is not None else "Starting",
        start,
        steps_total,
        jax.device_count(),
        type(dist).__name__ if dist else "one device",
    )
    dataset = common.train_stream(
        config,
        source,
        train_input,
        start,
        config.batch_size,
        family.normalizer(model),
        engine.stream_rows(),
        outdir=outdir if chief else None,  # one process writes the captions' ids (the others tokenize)
    )
    writer, cb = common.logging_and_callbacks(config, outdir, chief, model, callbacks)
    cb.on_train_begin()
    engine.release_variables()
    history = common.loop(
        config,
        engine,
        dataset,
        start,
        steps_total,
        manager,
        optimizer,
        writer,
        cb,
        chief,
        before_callbacks=engine.sync,
        source=source,
    )
    manager.close()
    engine.sync()
    cb.on_train_end()
    if config.ema_decay:
        optimizer.finalize_variable_values(net.trainable_variables)
        engine.reload()

    summary = dict(
        steps=steps_total,
        resumed_from=restored,
        num_classes=num_classes,
        image_size=config.dataset.image_size,
        replicas=jax_step.data_ways(dist),
        devices=jax.device_count(),
        processes=jax.process_count(),
        engine="jax",
        distribution=type(dist).__name__ if dist else "none",
        final_train=history[-1] if history else None,
    )
    return common.finish(
        config,
        model,
        outdir,
        writer,
        summary,
        eval_input,
        steps_total,
        evaluate=engine.evaluate,
        chief=chief,
        net=net,
        source=source,
    )
