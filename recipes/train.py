"""The one trainer: `python -m recipes.train --config=recipes/configs/X.py:variant --workdir=DIR`.

Pre-training and fine-tuning are configs, not scripts. This module holds what both engines share (model,
config checks, input stream, logging loop, evaluation, outputs) and the CLI; the engine is Keras' backend:
`recipes.tf_train` (a custom `strategy.run` loop in a compiled `tf.function`; Keras 3 `model.fit` breaks
under MultiWorkerMirroredStrategy, keras-team/keras#20585) or `recipes.jax_train` (a jitted stateless step
under `keras.distribution`). The run checkpoints every `checkpoint_every` steps and resumes from the latest
checkpoint in the workdir.
"""

from __future__ import annotations

import contextlib
import json
import logging as pylogging
import os
import re
import sys
import time
from typing import Callable, Iterator, List, Optional

import keras
import ml_collections
import tensorflow as tf

import keras_vit
from keras_vit import checkpoints as vit_checkpoints
from recipes import atomic, config_checks, data, distribute, lock, optim, steps
from recipes.checkpointing import NonFiniteError

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


SIZE_FIELDS = ("patch_size", "hidden_size", "mlp_dim", "num_heads", "num_layers")


def build_model(config, image_size: int, num_classes: int) -> keras.Model:
    """The classifier of `config.model` at `image_size`, emitting logits.

    `config.model.name` picks a row of the model table; any non-zero size field overrides
    that row's value (e.g. `--config.model.num_layers=2` for a quick check). With an empty
    name, the five size fields (and `resnet_layers` / `resnet_width` for a hybrid) define a custom model.
    """
    m = config.model
    kwargs = dict(input_shape=(image_size, image_size, 3), classes=num_classes, classifier_activation=None,
                  classifier=m.classifier, representation_size=m.representation_size or None,
                  dropout_rate=m.dropout_rate, attention_dropout_rate=m.attention_dropout_rate,
                  drop_path_rate=m.drop_path_rate, gelu_approximate=m.gelu_approximate, remat=m.remat)
    overrides = {f: int(m[f]) for f in SIZE_FIELDS if m[f]}
    if m.resnet_layers:
        overrides.update(resnet_layers=tuple(int(n) for n in m.resnet_layers), resnet_width=m.resnet_width)
    if m.name:
        sizes = keras_vit.get_config(m.name).model_kwargs()
        sizes.update(overrides)
        return keras_vit.VisionTransformer(**sizes, **kwargs)
    missing = [f for f in SIZE_FIELDS if f not in overrides]
    if missing:
        raise ValueError(f"config.model.name is empty, so config.model.{missing[0]} (and {missing}) must be set.")
    return keras_vit.VisionTransformer(**overrides, **kwargs)


def init_from_weights(model: keras.Model, config) -> None:
    """Fine-tuning start from `config.init_weights`: an official .npz or a release is read as it is, a .keras
    file through `keras_vit.load_model` (it carries its own architecture), a .weights.h5 as `config.model` at
    `init_image_size` with `init_classes`. The weights then follow the official rules: position embeddings
    resized to this run's grid, a new head zero-initialised when the class count differs."""
    path = config.init_weights
    if path.endswith(".weights.h5"):
        keras_vit.weights.check_weights_argument(path)
        source = build_model(config, config.init_image_size or model.image_size[0],
                             config.init_classes or model.classes)
        params = vit_checkpoints.model_params(keras_vit.load_weights(source, path))
    else:
        try:
            params = keras_vit.loading.source_params(path, model=config.model.name or None)
        except (ValueError, FileNotFoundError) as e:
            raise ValueError(f"config.init_weights={path!r}: {e}") from e
    vit_checkpoints.load_params(model, params, path)


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
    from keras_vit.fewshot import FewShotEvaluator
    from recipes.fewshot import extract
    from recipes.fewshot_callback import FewShotCallback

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

def _prepare(config, workdir: str, strategy, train_input, data_ways: Optional[int] = None) -> tuple:
    """Validates what can fail before anything is written; returns (outdir, source, classes, steps).
    `data_ways`: the JAX engine's batch split (the TF engine reads it from `strategy`)."""
    config_checks.check(config)  # bad values fail before anything touches the workdir
    _policy(config)
    if data_ways is None:
        distribute.per_replica_batch(config.batch_size, strategy)
    elif config.batch_size % data_ways:
        raise ValueError(f"config.batch_size={config.batch_size} is not divisible by the {data_ways} ways the "
                         "batch is split over the devices.")
    _check_workdir(workdir)
    outdir = _worker_dir(workdir)
    tf.io.gfile.makedirs(outdir)
    keras.utils.set_random_seed(config.seed)
    if config.deterministic:
        tf.config.experimental.enable_op_determinism()
    ds_cfg = config.dataset
    source = None
    if train_input is None:
        source = data.load_source(ds_cfg.name, ds_cfg.train_split, ds_cfg.data_dir or None, ds_cfg.download)
    num_classes = ds_cfg.num_classes or (source.num_classes if source else 0)
    if num_classes <= 0:
        raise ValueError("config.dataset.num_classes must be set when the dataset does not say it.")
    return outdir, source, num_classes, total_steps(config, source.num_examples if source else 0)


def _build(config, scope, num_classes: int, steps_total: int) -> tuple:
    """(classifier, trained network, loss_fn or None, optimizer), built under `scope` (the tf.distribute
    strategy's or the keras.distribution's: it decides where each variable lives) and the precision."""
    loss_fn = None
    with scope, precision(config):
        model = build_model(config, config.dataset.image_size, num_classes)
        net = model
        if config.mpp.enabled:
            from recipes import mpp
            net, loss_fn = mpp.build(model, config.mpp)
        optimizer = optim.make_optimizer(config.optimizer, steps_total, config.ema_decay, config.grad_accum_steps)
        optimizer.build(net.trainable_variables)
    return model, net, loss_fn, optimizer


def _log(step, steps_total, sums, last_log, t0, config, optimizer, writer, progbar, chief) -> dict:
    host = {k: float(v) for k, v in sums.items() if k != "nonfinite"}
    logs = {"loss": host["loss"] / host["count"], "accuracy": host["correct"] / host["count"],
            "grad_norm": host["grad_norm"] / max(step - last_log, 1),
            "img/s": (step - last_log) * config.batch_size / max(time.time() - t0, 1e-9),
            "lr": _learning_rate(optimizer, step)}
    with writer.as_default(step=step):
        for k, v in logs.items():
            tf.summary.scalar(k.replace("img/s", "img_per_sec"), v)
    if progbar is not None:
        progbar.update(step, [(k, v) for k, v in logs.items() if k not in ("lr", "grad_norm")])
    elif chief:
        logger.info("step %d/%d  loss %.4f  accuracy %.4f  %.1f img/s  lr %.3g", step, steps_total,
                    logs["loss"], logs["accuracy"], logs["img/s"], logs["lr"])
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
            "config.optimizer.learning_rate, set config.optimizer.clip_norm, or check the input data.")


def _loop(config, step_fn, dataset, start, steps_total, manager, optimizer, writer, cb, chief,
          before_callbacks: Optional[Callable[[], None]] = None) -> list:
    """Runs steps `start`..`steps_total`, logging every `log_every` and checkpointing every `checkpoint_every`;
    any non-finite step stops the run before the next log or checkpoint. `before_callbacks()` runs before
    a callback may look at the model (the JAX engine syncs its state into the Keras variables there)."""
    progbar = (keras.utils.Progbar(steps_total, stateful_metrics=["loss", "accuracy", "img/s"])
               if chief and sys.stdout.isatty() else None)
    sums, last_log, t0, history = None, start, time.time(), []
    nonfinite, checked = None, start
    iterator = iter(dataset)
    step = start
    while step < steps_total:
        out = step_fn(next(iterator))
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
        if before_callbacks is not None and config.fewshot.every and step % config.fewshot.every == 0:
            before_callbacks()
        cb.on_train_batch_end(step, logs)
        if step % config.checkpoint_every == 0 or step == steps_total:
            manager.save(step)
    return history


def _evaluate(config, model, eval_input, writer, steps_total, evaluate=None) -> Optional[float]:
    ds_cfg = config.dataset
    if eval_input is not None:
        eval_ds = eval_input(config.batch_size, ds_cfg.image_size, False)
    elif ds_cfg.eval_split:
        eval_source = data.load_source(ds_cfg.name, ds_cfg.eval_split, ds_cfg.data_dir or None)
        eval_ds = data.make_dataset(eval_source, min(config.batch_size, 256), ds_cfg.image_size, training=False)
    else:
        return None
    accuracy = evaluate(eval_ds) if evaluate is not None else steps.evaluate(model, eval_ds)
    with writer.as_default(step=steps_total):
        tf.summary.scalar("eval_accuracy", accuracy)
    return accuracy


def train_and_evaluate(config, workdir: str, *, strategy: Optional[tf.distribute.Strategy] = None,
                       distribution=None, train_input: Optional[Callable] = None,
                       eval_input: Optional[Callable] = None,
                       callbacks: Optional[List[keras.callbacks.Callback]] = None) -> dict:
    """Trains per `config` in `workdir` (resuming if it holds checkpoints) and evaluates.

    The engine is Keras' backend: TensorFlow runs under `strategy` (tf.distribute), JAX under
    `distribution` ("auto", "none", "data", "model" or a `keras.distribution.Distribution`).
    `train_input` / `eval_input`: optional `(global_batch, image_size, training) -> tf.data.Dataset`
    of (images in [-1, 1], int labels) replacing the config's dataset (VTAB uses this).
    Returns the summary also written to `workdir/summary.json`.
    """
    if keras.backend.backend() == "jax":
        if strategy is not None:
            raise ValueError("strategy= is for the TensorFlow engine; on JAX pass distribution=.")
        from recipes import jax_train
        return jax_train.train_and_evaluate(config, workdir, distribution=distribution or "auto",
                                            train_input=train_input, eval_input=eval_input, callbacks=callbacks)
    if keras.backend.backend() != "tensorflow":
        raise ValueError(f"The trainer runs on the tensorflow and jax backends, not {keras.backend.backend()!r}.")
    if distribution is not None:
        raise ValueError("distribution= is for the JAX engine (KERAS_BACKEND=jax); on TensorFlow pass strategy=.")
    from recipes import tf_train
    return tf_train.train_and_evaluate(config, workdir, strategy=strategy or tf.distribute.get_strategy(),
                                       train_input=train_input, eval_input=eval_input, callbacks=callbacks)


def train_stream(config, source, train_input: Optional[Callable], start: int, global_batch: int):
    """The training batches from step `start` on: `train_input`'s, or the config's dataset (keyed by seed and
    step, so a resumed run sees the batches an uninterrupted one would)."""
    size, ds_cfg = config.dataset.image_size, config.dataset
    if train_input is not None:
        return train_input(global_batch, size, True).skip(start)
    return data.make_dataset(source, global_batch, size, True, seed=config.seed, start_step=start,
                             cache=ds_cfg.cache, crop_area=(ds_cfg.crop_area_min, 1.0), flip=ds_cfg.flip)


def logging_and_callbacks(config, outdir: str, chief: bool, model: keras.Model, callbacks) -> tuple:
    """(TensorBoard writer, CallbackList): the chief writes `outdir/tb` and runs the few-shot probe."""
    writer = tf.summary.create_file_writer(os.path.join(outdir, "tb")) if chief else tf.summary.create_noop_writer()
    callbacks = list(callbacks or [])
    if config.fewshot.every and chief:
        callbacks.append(_fewshot_callback(config, outdir))
    return writer, keras.callbacks.CallbackList(callbacks, model=model)


def finish(config, model: keras.Model, outdir: str, writer, summary: dict, eval_input, steps_total: int, *,
           evaluate=None, chief: bool = True) -> dict:
    """Evaluates, then (the chief) writes `model.keras` and `summary.json` atomically; returns the summary."""
    accuracy = _evaluate(config, model, eval_input, writer, steps_total, evaluate)
    if accuracy is not None:
        summary["eval_accuracy"] = accuracy
    writer.flush()
    if chief:
        _save_model(model, os.path.join(outdir, "model.keras"))
        summary["model"] = os.path.join(outdir, "model.keras")
        atomic.write_json(os.path.join(outdir, "summary.json"), summary)
    return summary


# ----------------------------------------------------------------------------- CLI

def main(argv) -> None:
    from absl import flags

    FLAGS = flags.FLAGS
    if len(argv) > 1:
        raise app_usage_error(f"Unexpected arguments: {argv[1:]}")
    pylogging.getLogger("recipes").setLevel(pylogging.INFO)
    try:
        if FLAGS.backend != keras.backend.backend():
            raise ValueError(f"--backend={FLAGS.backend} but Keras was already loaded with the "
                             f"{keras.backend.backend()} backend; set KERAS_BACKEND={FLAGS.backend} instead.")
        if keras.backend.backend() == "jax":
            from recipes import jax_train

            pylogging.getLogger("absl").setLevel(pylogging.WARNING)  # Orbax's per-save INFO lines
            jax_train.initialize(FLAGS.job_addresses, FLAGS.num_processes, FLAGS.process_id)
            summary = train_and_evaluate(FLAGS.config, FLAGS.workdir, distribution=FLAGS.distribution)
        else:
            if FLAGS.distribution not in ("auto", "none"):
                raise ValueError("--distribution is the JAX engine's (--backend=jax); TensorFlow takes --strategy.")
            strategy = distribute.get_strategy(FLAGS.strategy, FLAGS.tpu)
            summary = train_and_evaluate(FLAGS.config, FLAGS.workdir, strategy=strategy)
    except (ValueError, FileNotFoundError, lock.WorkdirBusy) as e:  # NonFiniteError is a ValueError
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    print(json.dumps(summary, indent=2))


def app_usage_error(message: str):
    from absl import app

    return app.UsageError(message)


def run() -> None:
    from absl import app, flags
    from ml_collections import config_flags

    config_flags.DEFINE_config_file("config", None, "Experiment config: recipes/configs/<file>.py[:<variant>].",
                                    lock_config=True)
    flags.DEFINE_string("workdir", None, "Directory for checkpoints, TensorBoard logs, the model and summary.json.")
    flags.DEFINE_enum("strategy", "cpu", list(distribute.STRATEGIES), "tf.distribute strategy.")
    flags.DEFINE_string("tpu", None, "TPU name or grpc:// address for --strategy=tpu ('local' on a TPU VM).")
    flags.DEFINE_enum("backend", keras.backend.backend(), ["tensorflow", "jax"],
                      "Engine: tensorflow (tf.distribute) or jax (keras.distribution). Read before Keras loads.")
    flags.DEFINE_enum("distribution", "auto", ["auto", "none", "data", "model"],
                      "JAX engine: DataParallel over every device (data), ModelParallel with keras_vit.layout_map "
                      "on a (devices/config.model_parallel) x config.model_parallel mesh (model), one device "
                      "(none); auto: data when there are several devices.")
    flags.DEFINE_string("job_addresses", None, "JAX multi-process: the coordinator's host:port "
                        "(keras.distribution.initialize; or $KERAS_DISTRIBUTION_JOB_ADDRESSES).")
    flags.DEFINE_integer("num_processes", None, "JAX multi-process: how many processes in all.")
    flags.DEFINE_integer("process_id", None, "JAX multi-process: this process's index, 0 the coordinator.")
    flags.mark_flags_as_required(["config", "workdir"])
    app.run(main, flags_parser=_parse_flags)


def _parse_flags(argv: List[str]) -> List[str]:
    """absl's parsing, with one clear line (not a traceback) for a `--config.<field>` the config lacks."""
    from absl import flags

    try:
        return flags.FLAGS(argv)
    except (AttributeError, KeyError) as e:
        found = re.search(r"[A-Za-z_][A-Za-z0-9_]*", str(e))
        key = found.group(0) if found else str(e)
        given = [a.split("=")[0] for a in argv if a.startswith("--config.") and key in a.split("=")[0].split(".")]
        flag = given[0] if given else f"--config.<...>.{key}"
        hint = re.search(r'Did you mean "([^"]+)"', str(e))
        print(f"error: {flag}: the config has no field {key!r}"
              f"{f' (did you mean {hint.group(1)!r}?)' if hint else ''}; every field and its default: "
              "recipes/configs/base.py.", file=sys.stderr)
        sys.exit(2)
    except flags.Error as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":  # run the importable module's copy, the one the engines import
    from recipes.train import run as _run

    _run()
