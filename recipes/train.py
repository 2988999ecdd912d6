"""The training CLI: `python -m recipes.train --config=<name>[:<variant>] --workdir=DIR` (a config by name, e.g.
`finetune:folder`, or a file: `recipes/configs/finetune.py:folder`).

Flags choose the config, the workdir and the engine (`--backend`, `--strategy`, `--distribution`); the run
itself is `recipes.trainer.train_and_evaluate`. The trainer's names are re-exported here, where they lived
before 0.3 (`recipes.train.train_and_evaluate`, `build_model`, `init_from_weights`, ...).
"""

from __future__ import annotations

import json
import logging as pylogging
import re
import sys
from typing import List

import keras

from recipes.trainer import distribute, lock, train_and_evaluate
from recipes.trainer.common import (
    PRECISIONS,
    TRANSFORMER_FIELDS,
    build_model,
    finish,
    init_from_weights,
    logging_and_callbacks,
    precision,
    total_steps,
    train_stream,
)

SIZE_FIELDS = TRANSFORMER_FIELDS  # the name before 0.3
__all__ = [
    "PRECISIONS",
    "SIZE_FIELDS",
    "TRANSFORMER_FIELDS",
    "build_model",
    "finish",
    "init_from_weights",
    "logging_and_callbacks",
    "main",
    "precision",
    "run",
    "total_steps",
    "train_and_evaluate",
    "train_stream",
]


# ----------------------------------------------------------------------------- CLI


def main(argv) -> None:
    from absl import flags

    FLAGS = flags.FLAGS
    if len(argv) > 1:
        raise app_usage_error(f"Unexpected arguments: {argv[1:]}")
    pylogging.getLogger("recipes").setLevel(pylogging.INFO)
    try:
        if FLAGS.backend != keras.backend.backend():
            raise ValueError(
                f"--backend={FLAGS.backend} but Keras was already loaded with the "
                f"{keras.backend.backend()} backend; set KERAS_BACKEND={FLAGS.backend} instead."
            )
        _refuse_other_engines_flags(FLAGS, keras.backend.backend())
        if keras.backend.backend() == "jax":
            from recipes.trainer import jax_run

            pylogging.getLogger("absl").setLevel(pylogging.WARNING)  # Orbax's per-save INFO lines
            jax_run.initialize(FLAGS.job_addresses, FLAGS.num_processes, FLAGS.process_id)
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


ENGINE_FLAGS = {
    "tensorflow": ("strategy", "tpu"),
    "jax": ("distribution", "job_addresses", "num_processes", "process_id"),
}


def _refuse_other_engines_flags(FLAGS, backend: str) -> None:
    """A flag only the other engine reads is an error, not silently ignored (--strategy=tpu on JAX would train
    on the CPU)."""
    for engine, names in ENGINE_FLAGS.items():
        given = [n for n in names if FLAGS[n].present]
        if engine != backend and given and not (given == ["distribution"] and FLAGS.distribution in ("auto", "none")):
            takes = ", ".join(f"--{n}" for n in ENGINE_FLAGS[backend])
            raise ValueError(
                f"--{given[0]} is the {engine} engine's flag; this run is on {backend} "
                f"(--backend), which takes {takes}."
            )
    if backend == "tensorflow" and FLAGS["tpu"].present and FLAGS.strategy != "tpu":
        raise ValueError(f"--tpu={FLAGS.tpu} is read with --strategy=tpu only (this run: --strategy={FLAGS.strategy}).")


def app_usage_error(message: str):
    from absl import app

    return app.UsageError(message)


def run() -> None:
    from absl import app, flags
    from ml_collections import config_flags

    from recipes import configs

    config_flags.DEFINE_config_file(
        "config",
        None,
        "Experiment config by name, <name>[:<variant>] (finetune:folder; "
        f"shipped: {', '.join(configs.names())}), or a file: <path>.py[:<variant>].",
        lock_config=True,
    )
    flags.DEFINE_string("workdir", None, "Directory for checkpoints, TensorBoard logs, the model and summary.json.")
    flags.DEFINE_enum("strategy", "cpu", list(distribute.STRATEGIES), "tf.distribute strategy.")
    flags.DEFINE_string("tpu", None, "TPU name or grpc:// address for --strategy=tpu ('local' on a TPU VM).")
    flags.DEFINE_enum(
        "backend",
        keras.backend.backend(),
        ["tensorflow", "jax"],
        "Engine: tensorflow (tf.distribute) or jax (keras.distribution). Read before Keras loads.",
    )
    flags.DEFINE_enum(
        "distribution",
        "auto",
        ["auto", "none", "data", "model"],
        "JAX engine: DataParallel over every device (data), ModelParallel with keras_vit.layout_map "
        "on a (devices/config.model_parallel) x config.model_parallel mesh (model), one device "
        "(none); auto: data when there are several devices.",
    )
    flags.DEFINE_string(
        "job_addresses",
        None,
        "JAX multi-process: the coordinator's host:port "
        "(keras.distribution.initialize; or $KERAS_DISTRIBUTION_JOB_ADDRESSES).",
    )
    flags.DEFINE_integer("num_processes", None, "JAX multi-process: how many processes in all.")
    flags.DEFINE_integer("process_id", None, "JAX multi-process: this process's index, 0 the coordinator.")
    flags.mark_flags_as_required(["config", "workdir"])
    app.run(main, flags_parser=_parse_flags)


def _parse_flags(argv: List[str]) -> List[str]:
    """absl's parsing, with one clear line (not a traceback) for a `--config.<field>` the config lacks."""
    from absl import flags

    from recipes import configs

    argv = [f"--config={configs.resolve(a[len('--config=') :])}" if a.startswith("--config=") else a for a in argv]
    # `--config.batch_size=auto`: the config's batch per update, split to fit (config.auto_batch)
    argv = ["--config.auto_batch=True" if a == "--config.batch_size=auto" else a for a in argv]
    sys.argv[1:] = argv[1:]  # ml_collections' config_flags finds the override flags in sys.argv
    try:
        return flags.FLAGS(argv)
    except (AttributeError, KeyError) as e:
        found = re.search(r"[A-Za-z_][A-Za-z0-9_]*", str(e))
        key = found.group(0) if found else str(e)
        given = [a.split("=")[0] for a in argv if a.startswith("--config.") and key in a.split("=")[0].split(".")]
        flag = given[0] if given else f"--config.<...>.{key}"
        hint = re.search(r'Did you mean "([^"]+)"', str(e))
        print(
            f"error: {flag}: the config has no field {key!r}"
            f"{f' (did you mean {hint.group(1)!r}?)' if hint else ''}; every field and its default: "
            "recipes/configs/base.py.",
            file=sys.stderr,
        )
        sys.exit(2)
    except flags.Error as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":  # run the importable module's copy, the one the engines import
    from recipes.train import run as _run

    _run()
