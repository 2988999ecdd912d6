"""What a workdir's run is: `run_config.json`, written when a run starts from step 0, compared field by field
when one resumes, so a checkpoint never continues under another config.

Resuming may change only what does not change the training itself: how often it logs, checkpoints or keeps
checkpoints, where the data lives, compilation and determinism, few-shot probes, the init fields (read at step
0 only), the model-parallel layout (checkpoints are resharded) and the schedule's length, which may grow (to
extend a run) but not shrink. Anything else (optimizer, model, precision, data, batch, LoRA, seed, engine) is
refused naming the field. A fresh start never overwrites a finished `model.keras`, and `config.restart=True`
moves the old checkpoints and model aside (renamed, not deleted) to start over deliberately.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Optional

import tensorflow as tf

from keras_vit.utils import records
from recipes import atomic

logger = logging.getLogger("recipes")

RUN_CONFIG = "run_config.json"
KIND, SCHEMA = "keras_vit.run", 1
_FIELDS = {"engine": str, "steps_total": int, "config": dict}
FREE_FIELDS = (
    "restart",
    "auto_batch",  # what it chose (batch_size, grad_accum_steps, ...) is recorded and compared
    "log_every",
    "checkpoint_every",
    "keep_checkpoints",
    "dataset.data_dir",
    "dataset.download",
    "dataset.cache",
    "dataset.eval_split",
    "jit_compile",
    "deterministic",
    "init_weights",
    "init_image_size",
    "init_classes",
    "model_parallel",
    "total_steps",
    "num_epochs",
    "dataset.train_examples",
)
FREE_PREFIXES = ("fewshot.",)
RESTART = "--config.restart=True"  # the flag that starts over deliberately


def _flat(tree: dict, prefix: str = "") -> dict:
    out = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = list(value) if isinstance(value, tuple) else value
    return out


def _record(config, engine: str, steps_total: int) -> dict:
    return dict(engine=engine, steps_total=int(steps_total), config=_flat(config.to_dict()))


def _read(outdir: str) -> Optional[dict]:
    """The workdir's run record, checked (`keras_vit.utils.records`): None where there is none; a truncated,
    foreign or earlier build's file, or a field of another type, is refused naming the file and the field."""
    try:
        return records.read_record(os.path.join(outdir, RUN_CONFIG), KIND, SCHEMA, _FIELDS, fs=atomic.GFILE)
    except ValueError as e:
        raise ValueError(
            f"{e} It records the run this workdir holds: restore it, or start over with {RESTART}."
        ) from None


def _write(outdir: str, config, engine: str, steps_total: int) -> None:
    records.write_record(
        os.path.join(outdir, RUN_CONFIG), KIND, SCHEMA, _record(config, engine, steps_total), fs=atomic.GFILE
    )


def _difference(saved: dict, config, engine: str) -> Optional[str]:
    """The first reason the saved run is not this command's run, None when it is."""
    if saved.get("engine") != engine:
        return (
            f"holds a run of the {saved.get('engine')} engine; this is the {engine} engine (--backend). "
            f"Resume it with --backend={saved.get('engine')}"
        )
    now = _flat(config.to_dict())
    for field in sorted(set(now) | set(saved["config"])):
        if field in FREE_FIELDS or field.startswith(FREE_PREFIXES):
            continue
        if now.get(field) != saved["config"].get(field):
            return (
                f"holds a run with config.{field}={saved['config'].get(field)!r}; this command says "
                f"{now.get(field)!r}. A run resumes with its own config: use another --workdir"
            )
    return None


def prepare(config, outdir: str, engine: str, writer: bool = True) -> None:
    """Before any checkpoint is read: a workdir whose run was another config or engine is refused, naming the
    first field that differs (a workdir with checkpoints and no run_config.json is refused once they are read,
    `after_restore`). With `config.restart=True` the old
    run's checkpoints, model and records are renamed aside instead, once: a restarted run that is itself resumed
    (the same command after a preemption) carries on. Only the `writer` process (the chief) renames."""
    saved = _read(outdir)
    if config.restart:
        if saved is not None and saved["config"].get("restart") and _difference(saved, config, engine) is None:
            return
        if writer:
            _move_aside(outdir)
        return
    if saved is not None:
        reason = _difference(saved, config, engine)
        if reason:
            raise ValueError(f"--workdir {outdir} {reason}, or start over with {RESTART}.")


def _move_aside(outdir: str) -> None:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for name in ("model.keras", "checkpoints", "summary.json", RUN_CONFIG):
        old = os.path.join(outdir, name)
        if tf.io.gfile.exists(old):
            tf.io.gfile.rename(old, f"{old}.before-restart-{stamp}")
            logger.warning("config.restart: moved %s aside to %s.before-restart-%s", old, old, stamp)


def after_restore(config, outdir: str, engine: str, steps_total: int, restored: Optional[int]) -> None:
    """Once the checkpoints are read. At step 0 a finished `model.keras` is never overwritten by a run that did
    not start from it, and this run's record is written. On resume the schedule must reach past the checkpoint
    and not be shorter than the saved one; a longer one is recorded."""
    saved = _read(outdir)
    if restored is None:
        model = os.path.join(outdir, "model.keras")
        if tf.io.gfile.exists(model):
            raise ValueError(
                f"{outdir} holds a finished model.keras and no checkpoint to resume from; a new run "
                f"would overwrite it. Use another --workdir, or start over with {RESTART} (the old "
                "files are renamed, not deleted)."
            )
        _write(outdir, config, engine, steps_total)
        return
    if saved is None:
        raise ValueError(
            f"--workdir {outdir} holds a checkpoint at step {restored} but no {RUN_CONFIG}: the config "
            "that run had cannot be compared with this command's (a changed batch size or schedule "
            f"would pass unnoticed). Put its {RUN_CONFIG} back, use another --workdir, or start over "
            f"with {RESTART}."
        )
    if steps_total < restored or steps_total < saved.get("steps_total", 0):
        was = saved.get("steps_total", restored)
        raise ValueError(
            f"--workdir {outdir} holds a run at step {restored} of {was}; this command's schedule is "
            f"{steps_total} steps (config.total_steps / num_epochs). A schedule may grow to extend a "
            "run, not shrink below it."
        )
    if steps_total > saved.get("steps_total", 0):
        _write(outdir, config, engine, steps_total)
