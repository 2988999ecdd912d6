"""Atomic writes: a file appears whole or not at all (temp file + rename), locally or on gs://.

A run killed mid-write leaves at most a `<path>.tmp` behind, never a truncated `<path>`.
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any, Callable, Union

import tensorflow as tf

from keras_vit.utils import records


def write_atomic(path: str, data: Union[str, bytes]) -> str:
    """Writes `data` (text or bytes) to `path` through `<path>.tmp` and a rename."""
    tmp = path + ".tmp"
    with tf.io.gfile.GFile(tmp, "wb" if isinstance(data, bytes) else "w") as f:
        f.write(data)
    tf.io.gfile.rename(tmp, path, overwrite=True)
    return path


def write_json(path: str, obj: Any) -> str:
    """`obj` as indented, key-sorted JSON, written atomically."""
    return write_atomic(path, json.dumps(obj, indent=2, sort_keys=True))


def write_with(path: str, write: Callable[[str], Any], suffix: str = "") -> str:
    """`write(local_tmp_path)` makes the file locally; it is then copied to `path` (local or gs://) atomically."""
    with tempfile.TemporaryDirectory() as tmpdir:
        local = os.path.join(tmpdir, "file" + suffix)
        write(local)
        tmp = path + ".tmp"
        tf.io.gfile.copy(local, tmp, overwrite=True)
        tf.io.gfile.rename(tmp, path, overwrite=True)
    return path


class GFileSystem(records.FileSystem):
    """`keras_vit.utils.records`' file system on `tf.io.gfile` (local paths and gs://), with the atomic writes
    above: how the recipes read and write their records."""

    def exists(self, path: str) -> bool:
        return tf.io.gfile.exists(path)

    def read_bytes(self, path: str) -> bytes:
        with tf.io.gfile.GFile(path, "rb") as f:
            return f.read()

    def write_bytes(self, path: str, data: bytes) -> None:
        write_atomic(path, data)


GFILE = GFileSystem()
