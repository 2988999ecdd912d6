"""The JSON records keras_vit writes beside its outputs (an inference run's `manifest.json`, ...): each carries its
kind and schema version, every setting that changes the results it describes, and a hash of each output file it
vouches for, taken when that file was written.

Reading a record checks it: a file that is not JSON, not an object, of another kind or schema (an unreleased 0.3
build's record has none), or that lacks a field, is refused naming the file and the field; a vouched-for file that
is missing or whose bytes changed is reported by name (`changed`), so a caller redoes or refuses it and never
counts it as written. The file system is pluggable (`FileSystem`: local by default; the recipes pass
`tf.io.gfile`'s), so this module imports nothing but the standard library.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any, Dict, Iterable, Optional, Tuple

from keras_vit.utils import atomic


class FileSystem:
    """Local files; a subclass (or any object with these methods) reads and writes elsewhere."""

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def read_bytes(self, path: str) -> bytes:
        with open(path, "rb") as f:
            return f.read()

    def write_bytes(self, path: str, data: bytes) -> None:
        atomic.write_file(path, data)


LOCAL = FileSystem()


def write_record(path: str, kind: str, schema: int, body: Dict[str, Any], fs: FileSystem = LOCAL) -> None:
    """`body` as the record `path`, stamped with its `kind` and `schema` version; written whole or not at all."""
    record = {"kind": kind, "schema": schema, **body}
    fs.write_bytes(path, (json.dumps(record, indent=1) + "\n").encode("utf-8"))


def read_record(
    path: str, kind: str, schema: int, fields: Dict[str, type], fs: FileSystem = LOCAL
) -> Optional[Dict[str, Any]]:
    """The record at `path` (None where there is none), checked: JSON, an object, of `kind` at `schema`, with each
    of `fields` present and of its type; a ValueError naming the file and what is wrong otherwise."""
    if not fs.exists(path):
        return None
    try:
        record = json.loads(fs.read_bytes(path).decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        raise ValueError(f"{path!r} is not a readable {kind} record (truncated or not JSON: {e}).") from None
    if not isinstance(record, dict):
        raise ValueError(f"{path!r} holds a JSON {type(record).__name__}, not a {kind} record.")
    if record.get("kind") != kind or record.get("schema") != schema:
        found = f"kind {record.get('kind')!r}, schema {record.get('schema')!r}"
        raise ValueError(
            f"{path!r} is not a {kind} record of schema {schema} ({found}): written by another tool or by an "
            "earlier keras_vit build, whose records lack what this one checks; start a new output."
        )
    for name, expected in fields.items():
        if name not in record:
            raise ValueError(f"{path!r}: the {kind} record lacks its field {name!r}.")
        if not isinstance(record[name], expected):
            raise ValueError(
                f"{path!r}: field {name!r} of the {kind} record is a {type(record[name]).__name__}, "
                f"expected {getattr(expected, '__name__', expected)}."
            )
    return record


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def vouch(directory: str, names: Iterable[str], fs: FileSystem = LOCAL) -> Dict[str, Dict[str, Any]]:
    """{name: {"bytes", "sha256"}} of the files `names` in `directory`, as written now."""
    out = {}
    for name in names:
        data = fs.read_bytes(os.path.join(directory, name))
        out[name] = dict(bytes=len(data), sha256=digest(data))
    return out


def read_vouched(
    directory: str, vouched: Dict[str, Dict[str, Any]], fs: FileSystem = LOCAL
) -> Tuple[Optional[str], Dict[str, bytes]]:
    """(the first vouched-for file of `directory` that is missing or whose bytes differ from its hash, with the
    reason, "part-00001.csv: missing", or None; {name: bytes} of the files read and found as written), each file
    read once, so a reader parses the very bytes that were checked."""
    found = {}
    for name, facts in vouched.items():
        path = os.path.join(directory, name)
        if not fs.exists(path):
            return f"{name}: missing", found
        data = fs.read_bytes(path)
        if not isinstance(facts, dict) or len(data) != facts.get("bytes") or digest(data) != facts.get("sha256"):
            return f"{name}: changed since it was written ({len(data)} bytes, recorded {facts.get('bytes')})", found
        found[name] = data
    return None, found


def changed(directory: str, vouched: Dict[str, Dict[str, Any]], fs: FileSystem = LOCAL) -> Optional[str]:
    """The first vouched-for file of `directory` that is missing or whose bytes differ from its hash, with the
    reason ("part-00001.csv: missing"); None when every one is as written."""
    return read_vouched(directory, vouched, fs)[0]


def check_same(path: str, what: str, recorded: Dict[str, Any], now: Dict[str, Any]) -> None:
    """Refuses continuing the record at `path` with settings `now` that differ from the `recorded` ones, naming
    each setting that differs (the first with both values)."""
    differ = [k for k in sorted(set(recorded) | set(now)) if recorded.get(k) != now.get(k)]
    if differ:
        key = differ[0]
        raise ValueError(
            f"{path!r} holds a {what} with other {', '.join(differ)} ({key}: {recorded.get(key)!r}, now "
            f"{now.get(key)!r}): continue with the same settings, or start a new output (nothing there was changed)."
        )
