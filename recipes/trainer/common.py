"""What both training engines share: config -> model, the checks made before anything is written, the input
stream, the logging loop, evaluation and the run's outputs (`model.keras`, `summary.json`).

The engines (`recipes.trainer.tf_run`, `recipes.trainer.jax_run`) import this module; it imports neither.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import logging as pylogging
import os
import sys
import time
import warnings
from typing import Callable, Iterator, Optional, Tuple

import keras
import ml_collections
import tensorflow as tf

import keras_vit
from keras_vit.utils import progress
from keras_vit.weights import official
from recipes import atomic, data
from recipes.trainer import config_checks, distribute, family, memory, optim, tf_step
from recipes.trainer.checkpoints import NonFiniteError
from recipes.trainer.dataset_record import check_folder_splits, record_folder

logger = pylogging.getLogger("recipes")


# ----------------------------------------------------------------------------- model

PRECISIONS = {"float32": "float32", "bfloat16": "mixed_bfloat16"}


def _policy(config: ml_collections.ConfigDict) -> str:
    if config.precision not in PRECISIONS:
        raise ValueError(f"config.precision={config.precision!r}; expected one of {', '.join(PRECISIONS)}.")
    return PRECISIONS[config.precision]


@contextlib.contextmanager
def precision(config: ml_collections.ConfigDict) -> Iterator[None]:
    """Builds layers under `config.precision`: "bfloat16" computes in bf16 with float32 variables,
    softmax and LayerNorm (no loss scaling: bf16 has float32's exponent range)."""
    previous = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy(_policy(config))
    try:
        yield
    finally:
        keras.mixed_precision.set_global_policy(previous)


# the Transformer's five sizes in `config.model` (the table's `SIZE_FIELDS` add the ResNet stem's two)
TRANSFORMER_FIELDS = ("patch_size", "hidden_size", "mlp_dim", "num_heads", "num_layers")


def build_model(
    config, image_size: int, num_classes: int, checkpoint=None, class_names: Tuple[str, ...] = ()
) -> keras.Model:
    """The classifier of `config.model` at `image_size`, emitting logits.

    `config.model.name` picks a row of the model table, or a timm architecture (`keras_vit.list_models("timm")`);
    any non-zero size field overrides that row's value (e.g. `--config.model.num_layers=2` for a quick check).
    With an empty name, the five size fields (and `resnet_layers` / `resnet_width` for a hybrid) define a custom
    model; with no sizes either, `config.init_weights`' own architecture (`checkpoint`, read) is built, its
    family's parts included (`recipes.trainer.family`). The init source's data config is recorded on the model,
    with `class_names` (an image folder's) as its labels, so the model names what its head predicts.
    """
    m = config.model
    kwargs = dict(
        input_shape=(image_size, image_size, 3),
        classes=num_classes,
        classifier_activation=None,
        dropout_rate=m.dropout_rate,
        attention_dropout_rate=m.attention_dropout_rate,
        drop_path_rate=m.drop_path_rate,
        remat=m.remat,
        data_config=_with_labels(family.data_config(config), class_names),
    )
    overrides = {f: int(m[f]) for f in TRANSFORMER_FIELDS if m[f]}
    known = family.family_keywords(config, checkpoint)
    if known is not None:
        return keras_vit.VisionTransformer(**{**known, **overrides}, **kwargs)
    kwargs.update(
        classifier=m.classifier,
        representation_size=m.representation_size or None,
        activation="gelu_tanh" if m.gelu_approximate else "gelu",  # the config's 0.2 spelling
    )
    if m.resnet_layers:
        overrides.update(resnet_layers=tuple(int(n) for n in m.resnet_layers), resnet_width=m.resnet_width)
    if m.name:
        sizes = keras_vit.vit_config(m.name).model_kwargs()
        sizes.update(overrides)
        return keras_vit.VisionTransformer(**sizes, **kwargs)
    missing = [f for f in TRANSFORMER_FIELDS if f not in overrides]
    if missing:
        raise ValueError(
            f"config.model.name is empty, so config.model.{missing[0]} (and {missing}) must be set, "
            "or config.init_weights given to train its own architecture."
        )
    return keras_vit.VisionTransformer(**overrides, **kwargs)


def read_init(config):
    """`config.init_weights` read once (`keras_vit.weights.read_checkpoint`), errors naming the flag."""

    def source_model() -> keras.Model:  # only a .weights.h5 source asks for it
        return build_model(
            config,
            config.init_image_size or config.dataset.image_size,
            config.init_classes or config.dataset.num_classes,
        )

    try:
        return keras_vit.weights.read_checkpoint(
            config.init_weights, model_name=config.model.name or None, build=source_model
        )
    except (ValueError, FileNotFoundError) as e:
        raise ValueError(f"config.init_weights={config.init_weights!r}: {e}") from e


def init_from_weights(model: keras.Model, config, checkpoint=None) -> None:
    """Fine-tuning start from `config.init_weights` (any source `keras_vit.load_model` takes), or from
    `checkpoint` when the caller has read it already (`read_init`; VTAB reads its source once per run). A
    `.weights.h5` file is read as `config.model` at `init_image_size` with `init_classes`. The weights then
    follow the official rules: position embeddings resized to this run's grid, a new head zero-initialised when
    the class count differs (without a word in a contrastive run, whose two towers leave the head out)."""
    checkpoint = read_init(config) if checkpoint is None else checkpoint
    with warnings.catch_warnings():
        if config.contrastive.enabled:
            warnings.filterwarnings("ignore", message=r".*the checkpoint's head has \d+ classes")
        official.load_params(model, checkpoint.params, checkpoint.path, old_grid=checkpoint.old_grid)


# ----------------------------------------------------------------------------- helpers


def _check_workdir(workdir: str) -> None:
    try:
        tf.io.gfile.makedirs(workdir)
        probe = os.path.join(workdir, f".write-test-{os.getpid()}")  # per process: workers share the workdir
        with tf.io.gfile.GFile(probe, "w") as f:
            f.write("ok")
        tf.io.gfile.remove(probe)
    except (OSError, tf.errors.OpError) as e:
        raise ValueError(f"--workdir={workdir!r} is not writable: {e}") from e


def _worker_dir(workdir: str) -> str:
    """Chief writes to workdir; other multi-worker tasks to workdir/worker_<i>."""
    task = json.loads(os.environ.get("TF_CONFIG", "{}")).get("task", {})
    if task.get("type") == "worker" and task.get("index", 0) > 0:
        return os.path.join(workdir, f"worker_{task['index']}")
    return workdir


def _save_model(model: keras.Model, path: str) -> None:
    """`model.keras` written atomically, on local disks and on gs:// alike."""
    atomic.write_with(path, model.save, suffix=".keras")


def _fewshot_callback(config, outdir: str):
    """Few-shot probe on `config.fewshot.dataset` every `config.fewshot.every` steps."""
    from keras_vit.analysis.fewshot import FewShotEvaluator
    from recipes.fewshot import extract
    from recipes.trainer.fewshot_callback import FewShotCallback

    f, size = config.fewshot, config.dataset.image_size
    name = f.dataset or config.dataset.name
    train_src = data.load_source(name, f.train_split or "train", config.dataset.data_dir or None)
    test_src = data.load_source(name, f.test_split or "test", config.dataset.data_dir or None)
    identity = lambda images: images  # noqa: E731  (collect the pre-processed images once)
    x, y = extract(identity, train_src, size)
    xt, yt = extract(identity, test_src, size)
    evaluator = FewShotEvaluator(identity, {name: (x, y, xt, yt)}, shots=tuple(f.shots), seeds=f.seeds)
    return FewShotCallback(evaluator, f.every, os.path.join(outdir, "tb"))


def total_steps(config, train_examples: int) -> int:
    if config.total_steps:
        return int(config.total_steps)
    examples = config.dataset.train_examples or train_examples
    if not config.num_epochs or examples <= 0:
        raise ValueError("Set config.total_steps, or config.num_epochs with a known number of training examples.")
    return max(1, int(config.num_epochs * examples // config.batch_size))


# ----------------------------------------------------------------------------- the run


def prepare(config, workdir: str, strategy, train_input, data_ways: Optional[int] = None) -> tuple:
    """Validates what can fail before anything is written; returns (outdir, source, classes, steps).
    `data_ways`: the JAX engine's batch split (the TF engine reads it from `strategy`)."""
    config_checks.check(config)  # bad values fail before anything touches the workdir
    _policy(config)
    if data_ways is None:
        distribute.per_replica_batch(config.batch_size, strategy)
    elif config.batch_size % data_ways:
        raise ValueError(
            f"config.batch_size={config.batch_size} is not divisible by the {data_ways} ways the "
            "batch is split over the devices."
        )
    ds_cfg = config.dataset
    source = None
    if train_input is None:  # a missing dataset or a bad image folder fails before the workdir is touched
        source = data.load_source(
            ds_cfg.name,
            ds_cfg.train_split,
            ds_cfg.data_dir or None,
            ds_cfg.download,
            workdir=workdir if tf.io.gfile.isdir(workdir) else None,
        )
        if source.fingerprint:
            check_folder_splits(config, source)
    # a run the machine cannot hold is refused before the workdir is touched: the host's memory on a CPU, each
    # device's on an accelerator (Keras' JAX backend; not checked where the device states no size)
    accelerator = _on_accelerator()
    replicas = data_ways or (strategy.num_replicas_in_sync if strategy is not None else 1)
    classes = ds_cfg.num_classes or (source.num_classes if source else 0) or 1000
    there = memory.memory_there(replicas, accelerator)  # read once for both
    chosen = memory.choose_batch(config, classes, replicas, there, accelerator)
    if chosen:
        logger.info(chosen)
    memory.check_fits(config, classes, replicas, there, accelerator)
    captioned = bool(source and source.captions)
    if captioned and not config.contrastive.enabled:
        raise ValueError(
            f"config.dataset.name={ds_cfg.name!r} holds image-caption pairs, which train a two-tower model: set "
            "--config.contrastive.enabled=True."
        )
    if config.contrastive.enabled and not captioned:  # a word per class, refused before the workdir is touched
        from recipes import contrastive

        names = source.class_names if source else ()
        contrastive.class_words(config.contrastive, names, ds_cfg.num_classes or (source.num_classes if source else 0))
    _check_workdir(workdir)
    outdir = _worker_dir(workdir)
    tf.io.gfile.makedirs(outdir)
    keras.utils.set_random_seed(config.seed)
    if config.deterministic:
        tf.config.experimental.enable_op_determinism()
    num_classes = ds_cfg.num_classes or (source.num_classes if source else 0)
    if captioned:  # no classes: the image model's head is left out of the two towers, so one unit will do
        num_classes = 1
    if num_classes <= 0:
        raise ValueError("config.dataset.num_classes must be set when the dataset does not say it.")
    if source is not None and source.fingerprint:
        record_folder(config, source, outdir)
    return outdir, source, num_classes, total_steps(config, source.num_examples if source else 0)


def _on_accelerator() -> bool:
    """Whether the step runs on a GPU or TPU (`recipes.trainer.memory` estimates one such device's peak)."""
    if keras.backend.backend() == "jax":
        import jax

        return jax.default_backend() != "cpu"
    return bool(tf.config.list_physical_devices("GPU") or tf.config.list_physical_devices("TPU"))


def _with_labels(data_config, class_names: Tuple[str, ...]):
    if not class_names:
        return data_config
    return dataclasses.replace(keras_vit.DataConfig.from_dict(data_config), labels=tuple(class_names))


def build(
    config, scope, num_classes: int, steps_total: int, init_checkpoint=None, class_names: Tuple[str, ...] = ()
) -> tuple:
    """(classifier, trained network, loss_fn or None, optimizer, init checkpoint or None), built under `scope`
    (the tf.distribute strategy's or the keras.distribution's: it decides where each variable lives) and the
    precision. The init source is read here when the run trains its architecture (`family`), once."""
    loss_fn = None
    if init_checkpoint is None and family.wants_source_architecture(config):
        init_checkpoint = read_init(config)
    with scope, precision(config):
        model = build_model(config, config.dataset.image_size, num_classes, init_checkpoint, class_names)
        if config.lora.rank:  # before the optimizer sees the trainable variables: adapters and head only
            model.enable_lora(
                config.lora.rank, [t for t in config.lora.targets.split(",") if t], alpha=config.lora.alpha or None
            )
        net = model
        if config.mpp.enabled:
            from recipes import mpp

            net, loss_fn = mpp.build(model, config.mpp)
        if config.contrastive.enabled:
            from recipes import contrastive

            net, loss_fn = contrastive.build(model, config.contrastive)
        scales = optim.layer_decay_scales(
            net.trainable_variables, model.vit_config.num_layers, config.optimizer.layer_decay
        )
        optimizer = optim.make_optimizer(
            config.optimizer, steps_total, config.ema_decay, config.grad_accum_steps, lr_scales=scales
        )
        optimizer.build(net.trainable_variables)
    return model, net, loss_fn, optimizer, init_checkpoint


def _log(step, steps_total, sums, last_log, t0, config, optimizer, writer, progbar, chief) -> dict:
    host = {k: float(v) for k, v in sums.items() if k != "nonfinite"}
    logs = {
        "loss": host["loss"] / host["count"],
        "accuracy": host["correct"] / host["count"],
        "grad_norm": host["grad_norm"] / max(step - last_log, 1),
        "img/s": (step - last_log) * config.batch_size / max(time.time() - t0, 1e-9),
        "lr": _learning_rate(optimizer, step),
    }
    with writer.as_default(step=step):
        for k, v in logs.items():
            tf.summary.scalar(k.replace("img/s", "img_per_sec"), v)
    if progbar is not None:
        progbar.update(step, [(k, v) for k, v in logs.items() if k not in ("lr", "grad_norm")])
    elif chief:
        logger.info(
            "step %d/%d  loss %.4f  accuracy %.4f  %.1f img/s  lr %.3g",
            step,
            steps_total,
            logs["loss"],
            logs["accuracy"],
            logs["img/s"],
            logs["lr"],
        )
    return logs


def _learning_rate(optimizer, step: int) -> float:
    """The rate the schedule gives at `step` (read from the schedule, not the optimizer's counter, which the
    JAX engine updates only when it syncs)."""
    schedule = optimizer._learning_rate
    if isinstance(schedule, keras.optimizers.schedules.LearningRateSchedule):
        return float(schedule(step))
    return float(optimizer.learning_rate)


def _check_finite(nonfinite, checked: int, step: int, manager) -> None:
    """Stops the run, before anything is written, if a step since `checked` had a NaN/Inf loss or gradient."""
    if nonfinite is not None and float(nonfinite) > 0:
        last = manager.latest()
        raise NonFiniteError(
            f"Training diverged: a non-finite loss or gradient norm between steps {checked + 1} and {step}. "
            f"Nothing was written after that; the last good checkpoint is "
            f"{manager.path(last) if last is not None else 'none (no checkpoint yet)'}. Lower "
            "config.optimizer.learning_rate, set config.optimizer.clip_norm, or check the input data."
        )


def loop(
    config,
    step_fn,
    dataset,
    start,
    steps_total,
    manager,
    optimizer,
    writer,
    cb,
    chief,
    before_callbacks: Optional[Callable[[], None]] = None,
    source=None,
) -> list:
    """Runs steps `start`..`steps_total`, logging every `log_every` and checkpointing every `checkpoint_every`;
    any non-finite step stops the run before the next log or checkpoint. `before_callbacks()` runs after every
    step where there are callbacks, before they may look at the model (the JAX engine gives the Keras variables
    its values there, sharing the arrays: no copy). `source`: the config's dataset split, whose input errors
    are explained by name (`data.input_error`)."""
    progbar = (
        keras.utils.Progbar(steps_total, stateful_metrics=["loss", "accuracy", "img/s"])
        if chief and sys.stdout.isatty()
        else None
    )
    sums, last_log, t0, history = None, start, time.time(), []
    nonfinite, checked = None, start
    iterator = iter(dataset)
    step = start
    while step < steps_total:
        try:
            batch = next(iterator)
        except tf.errors.OpError as e:  # e.g. an image rewritten since the decode check: name it
            explained = data.input_error(source, e)
            if explained is e:
                raise
            raise explained from e
        out = step_fn(batch)
        step += 1
        sums = out if sums is None else {k: sums[k] + out[k] for k in out}
        nonfinite = out["nonfinite"] if nonfinite is None else nonfinite + out["nonfinite"]
        logs = None
        boundary = step % config.log_every == 0 or step % config.checkpoint_every == 0 or step == steps_total
        if boundary:
            _check_finite(nonfinite, checked, step, manager)
            nonfinite, checked = None, step
        if step % config.log_every == 0 or step == steps_total:
            logs = _log(step, steps_total, sums, last_log, t0, config, optimizer, writer, progbar, chief)
            history.append(dict(step=step, **logs))
            sums, last_log, t0 = None, step, time.time()
        if before_callbacks is not None and cb.callbacks:
            before_callbacks()
        cb.on_train_batch_end(step, logs)
        if step % config.checkpoint_every == 0 or step == steps_total:
            began = time.time()
            manager.save(step)
            logger.info("Checkpoint of step %d written in %.1f s", step, time.time() - began)
    return history


def _eval_source(config) -> Optional[data.Source]:
    """The config's eval split (None without one), read once per evaluation."""
    ds_cfg = config.dataset
    return data.load_source(ds_cfg.name, ds_cfg.eval_split, ds_cfg.data_dir or None) if ds_cfg.eval_split else None


def _evaluate(config, model, eval_input, writer, steps_total, evaluate=None, eval_source=None) -> Optional[float]:
    """`eval_input`'s stream, else the eval split's (`eval_source`, read here when not given), evaluated."""
    ds_cfg = config.dataset
    if eval_input is None and eval_source is None:
        eval_source = _eval_source(config)
    if eval_input is not None:
        eval_ds = eval_input(config.batch_size, ds_cfg.image_size, False)
    elif eval_source is not None:
        eval_ds = data.make_dataset(
            eval_source,
            min(config.batch_size, 256),
            ds_cfg.image_size,
            training=False,
            normalize=family.normalizer(model),
        )
    else:
        return None
    batches = int(eval_ds.cardinality()) if hasattr(eval_ds, "cardinality") else -1
    eval_ds = progress.counted(eval_ds, "evaluating", batches if batches >= 0 else None, "batches", log=logger.info)
    accuracy = evaluate(eval_ds) if evaluate is not None else tf_step.evaluate(model, eval_ds)
    with writer.as_default(step=steps_total):
        tf.summary.scalar("eval_accuracy", accuracy)
    return accuracy


def train_stream(
    config,
    source,
    train_input: Optional[Callable],
    start: int,
    global_batch: int,
    normalize: Optional[Callable] = None,
    rows: Optional[Tuple[int, int]] = None,
    outdir: Optional[str] = None,
):
    """The training batches from step `start` on: `train_input`'s, or the config's dataset (keyed by seed and
    step, so a resumed run sees the batches an uninterrupted one would), normalised by `normalize` (the
    model's data config; default [-1, 1]). `rows=(index, count)`: only this input pipeline's rows of each
    global batch (the config's dataset decodes no other). `outdir`: where a caption run keeps its captions' ids
    for its later starts."""
    stream = _stream(config, source, train_input, start, global_batch, normalize, rows)
    if not config.contrastive.enabled:
        return stream
    from recipes import contrastive

    if source is not None and source.captions:  # each example's own caption (its label is its row)
        return contrastive.with_captions(stream, contrastive.tokenize(config.contrastive, source.captions, outdir), 1)
    words = contrastive.class_words(
        config.contrastive, source.class_names if source else (), config.dataset.num_classes
    )
    table = contrastive.caption_table(config.contrastive, words)
    first = rows[0] * (global_batch // rows[1]) if rows is not None else 0  # this pipeline's part of the batch
    return contrastive.with_captions(stream, table, len(config.contrastive.templates), first)


def _stream(config, source, train_input, start, global_batch, normalize, rows):
    size, ds_cfg = config.dataset.image_size, config.dataset
    if train_input is not None:
        ds = train_input(global_batch, size, True).skip(start)
        if rows is None:
            return ds
        lo, local = rows[0] * (global_batch // rows[1]), global_batch // rows[1]
        return ds.map(lambda x, y: (x[lo : lo + local], y[lo : lo + local]))
    return data.make_dataset(
        source,
        global_batch,
        size,
        True,
        seed=config.seed,
        start_step=start,
        cache=ds_cfg.cache,
        crop_area=(ds_cfg.crop_area_min, 1.0),
        flip=ds_cfg.flip,
        normalize=normalize,
        rows=rows,
    )


def logging_and_callbacks(config, outdir: str, chief: bool, model: keras.Model, callbacks) -> tuple:
    """(TensorBoard writer, CallbackList): the chief writes `outdir/tb` and runs the few-shot probe."""
    writer = tf.summary.create_file_writer(os.path.join(outdir, "tb")) if chief else tf.summary.create_noop_writer()
    callbacks = list(callbacks or [])
    if config.fewshot.every and chief:
        callbacks.append(_fewshot_callback(config, outdir))
    return writer, keras.callbacks.CallbackList(callbacks, model=model)


def finish(
    config,
    model: keras.Model,
    outdir: str,
    writer,
    summary: dict,
    eval_input,
    steps_total: int,
    *,
    evaluate=None,
    chief: bool = True,
    net: Optional[keras.Model] = None,
    source: Optional[data.Source] = None,
) -> dict:
    """Evaluates, then (the chief) writes `model.keras` (LoRA merged into the kernels, as Keras saves it),
    `adapters.lora.h5` for a LoRA run, and `summary.json`, each atomically; returns the summary. A contrastive
    run (`net`: its two towers) is evaluated zero-shot with the class names of the training `source`, or by
    retrieval when `source` holds image-caption pairs (the eval split's images and their captions,
    `eval_accuracy` the image-to-text recall@1), and saves the two-tower model."""
    class_names = source.class_names if source else ()
    captioned = bool(source and source.captions)
    trained, retrieval, eval_source = model, None, None
    if config.contrastive.enabled:
        from recipes import contrastive

        trained = net
        if captioned:  # the eval split's images and, in their order, its captions
            retrieval, eval_source = {}, _eval_source(config) if eval_input is None else None
            captions = eval_source.captions if eval_source is not None else ()
            kept = outdir if chief else None  # one process writes the captions' ids
            evaluate = contrastive.retrieval_evaluator(net, config.contrastive, captions, retrieval, kept)
        else:
            words = contrastive.class_words(config.contrastive, class_names)
            evaluate = contrastive.zero_shot_evaluator(net, config.contrastive, words)
            summary["class_words"] = list(words)
    accuracy = _evaluate(config, model, eval_input, writer, steps_total, evaluate, eval_source)
    summary["trainable_parameters"] = int(sum(math.prod(v.shape) for v in trained.trainable_variables))
    if accuracy is not None:
        summary["eval_accuracy"] = accuracy
        if retrieval:
            summary["retrieval"] = retrieval
        elif config.contrastive.enabled:
            summary["zero_shot_accuracy"] = accuracy
    writer.flush()
    if chief:
        if config.contrastive.enabled:
            model = contrastive.standalone(net, model)
        elif model.lora_layers():  # the adapters alone, beside the merged model Keras' save writes
            summary["lora_weights"] = keras_vit.save_lora_weights(model, os.path.join(outdir, "adapters.lora.h5"))
        _save_model(model, os.path.join(outdir, "model.keras"))
        summary["model"] = os.path.join(outdir, "model.keras")
        atomic.write_json(os.path.join(outdir, "summary.json"), summary)
    return summary
