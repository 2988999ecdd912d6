"""The record of the data a run trains on (`dataset.json` in the workdir): an image folder's or caption
dataset's fingerprint, class names, example count and undecodable files, with the decode check's result
(`decode_check.json`) and `class_names.txt`. A resume on other files, or on files that now decode otherwise, is
refused naming them; an eval split must hold the training split's classes."""

from __future__ import annotations

import os

from keras_vit.utils import records
from recipes import atomic, data, folder


def check_folder_splits(config, source) -> None:
    """An image folder's eval split must hold the training split's classes, and `dataset.num_classes` (when
    set) their number."""
    ds_cfg = config.dataset
    if ds_cfg.num_classes and ds_cfg.num_classes != source.num_classes:
        raise ValueError(
            f"config.dataset.num_classes={ds_cfg.num_classes}, but {ds_cfg.name!r} has "
            f"{source.num_classes} class folders ({', '.join(source.class_names[:5])}...): set it to 0."
        )
    if not ds_cfg.eval_split:
        return
    evaluation = data.load_source(ds_cfg.name, ds_cfg.eval_split, ds_cfg.data_dir or None)
    if evaluation.class_names != source.class_names:
        raise ValueError(
            f"{ds_cfg.name!r}: split {ds_cfg.eval_split!r} has classes {list(evaluation.class_names)}, "
            f"split {ds_cfg.train_split!r} {list(source.class_names)}."
        )


DATASET_RECORD = "dataset.json"
DATASET_KIND, DATASET_SCHEMA = "keras_vit.dataset", 1
_DATASET_FIELDS = {"name": str, "fingerprint": str, "class_names": list, "examples": int, "skipped": list}


def record_folder(config, source, outdir: str) -> None:
    """Writes `dataset.json` (the folder's fingerprint, classes, skipped files), `class_names.txt` and the
    decode check's record (`decode_check.json`, read back on a resume) in `outdir`; refuses a workdir whose
    earlier run trained on other files, or whose files decode differently now (rewritten in place)."""
    ds_cfg = config.dataset
    record = dict(
        name=ds_cfg.name,
        train_split=ds_cfg.train_split,
        fingerprint=source.fingerprint,
        class_names=list(source.class_names),
        examples=source.num_examples,
        skipped=list(source.skipped),
    )
    path = os.path.join(outdir, DATASET_RECORD)
    before = records.read_record(path, DATASET_KIND, DATASET_SCHEMA, _DATASET_FIELDS, fs=atomic.GFILE)
    if before is not None:
        if before["fingerprint"] != source.fingerprint:
            raise ValueError(
                f"config.dataset.name={ds_cfg.name!r}: the images (split {ds_cfg.train_split!r}) differ "
                f"from those the run in {outdir!r} started on (files added, removed or resized; "
                f"classes then: {before.get('class_names')}): resume on the same files, or use a new "
                "--workdir."
            )
        changed = sorted(set(map(str, before["skipped"])) ^ set(source.skipped))
        if changed:
            raise ValueError(
                f"config.dataset.name={ds_cfg.name!r}: {len(changed)} file(s) of split "
                f"{ds_cfg.train_split!r} decode differently from when the run in {outdir!r} started "
                f"(e.g. {changed[0]!r}, rewritten in place), so its batches would differ: restore "
                "them, or use a new --workdir."
            )
    records.write_record(path, DATASET_KIND, DATASET_SCHEMA, record, fs=atomic.GFILE)
    if source.check is not None:
        folder.write_check_record(outdir, source.check)
    if source.class_names:
        atomic.write_atomic(os.path.join(outdir, "class_names.txt"), "\n".join(source.class_names) + "\n")
