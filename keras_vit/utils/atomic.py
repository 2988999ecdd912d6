"""Atomic writes on the local file system: a file or directory appears whole or not at all.

Everything `keras_vit` and `hub_export` write goes through here (the recipes have a
tf.io.gfile twin in `recipes.atomic` so gs:// works). The content is written under a
temporary name in the same directory and renamed into place; a process killed
mid-write leaves the previous version (or nothing) and at most a `.tmp-<name>-<pid>-kvit*`
entry, which the next write to that path removes (only entries with that marker, of dead processes).

A directory writer owns exactly what it wrote: `MANIFEST` inside lists every entry, and a later write
replaces the directory only when it holds nothing else (a file a user added there stops it, named).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
from typing import Any, Callable, Union


MANIFEST = ".keras_vit_manifest.json"
MARK = "kvit"  # in the names of our temporaries, so the sweep never takes a user's file for one


def process_alive(pid: int) -> bool:
    """Whether process `pid` exists on this host (one owned by another user counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _sweep(parent: str, base: str) -> None:
    """Removes temporaries of `base` left by killed writers (`.tmp-<base>-<pid>-*`, `.old-<base>-<pid>-*`
    whose pid is gone); a live writer's are left alone."""
    pattern = re.compile(rf"^\.(tmp|old)-{re.escape(base)}-(\d+)-{MARK}")
    for name in os.listdir(parent):
        match = pattern.match(name)
        if match and not process_alive(int(match.group(2))):
            victim = os.path.join(parent, name)
            shutil.rmtree(victim, ignore_errors=True) if os.path.isdir(victim) else os.remove(victim)


def _umask() -> int:
    """The process's umask: read from /proc where Linux shows it (setting it to read it back would let another
    thread create a file under a wrong mask meanwhile), else set and restored."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _as_created(path: str, directory: bool) -> None:
    """Gives a temporary (mkstemp: 0600, mkdtemp: 0700) the mode any tool's new file or directory gets under the
    user's umask, before it is renamed into place, so that a serving process of another user reads exports as
    it reads any other file."""
    os.chmod(path, (0o777 if directory else 0o666) & ~_umask())


def _prepare(path: Union[str, os.PathLike]) -> tuple:
    path = os.path.abspath(os.fspath(path))
    parent = os.path.dirname(path)
    os.makedirs(parent, exist_ok=True)
    base = os.path.basename(path)
    _sweep(parent, base)
    return path, parent, base, f"{base}-{os.getpid()}-{MARK}"


def write_file(path: Union[str, os.PathLike], content: Union[str, bytes, Callable[[str], Any]]) -> str:
    """Writes `content` (text, bytes, or a function that writes a given temporary path) to `path`."""
    path, parent, base, tag = _prepare(path)
    fd, tmp = tempfile.mkstemp(prefix=f".tmp-{tag}", suffix=os.path.splitext(base)[1], dir=parent)
    try:
        if callable(content):
            os.close(fd)
            content(tmp)
        else:
            with os.fdopen(fd, "wb" if isinstance(content, bytes) else "w") as f:
                f.write(content)
        _as_created(tmp, directory=False)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    return path


def write_json(path: Union[str, os.PathLike], obj: Any) -> str:
    """`obj` as indented JSON, written atomically."""
    return write_file(path, json.dumps(obj, indent=2))


def _entries(root: str) -> list:
    """Every file and folder under `root` (relative, '/'-separated, sorted), the manifest excepted."""
    out = []
    for folder, dirs, files in os.walk(root):
        rel = os.path.relpath(folder, root)
        out += [name if rel == "." else f"{rel}/{name}".replace(os.sep, "/") for name in dirs + files]
    return sorted(e for e in out if e != MANIFEST)


def _digest(path: str) -> dict:
    """{"size", "sha256"} of the file at `path`."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return {"size": os.path.getsize(path), "sha256": h.hexdigest()}


def _manifest(root: str) -> dict:
    """What a writer leaves beside its output: every entry, and each file's size and sha256."""
    entries = _entries(root)
    files = {e: _digest(os.path.join(root, e)) for e in entries if os.path.isfile(os.path.join(root, e))}
    return {"writer": "keras_vit", "version": 2, "entries": entries, "files": files}


def foreign_entry(path: str, legacy: Callable[[str], bool] = lambda entry: False):
    """The first entry of directory `path` that is not exactly what its writer left (None when every entry is
    ours and unchanged, or the directory is empty): an entry its manifest does not list, or a file whose size
    or sha256 differs from the manifest's (a model card edited by hand, a manifest copied beside other files).
    A directory without such a manifest (written before manifests kept digests, or never by us) has nothing
    to check files against: there `legacy(entry)` says which entries its writer makes, and anything else is
    foreign."""
    try:
        with open(os.path.join(path, MANIFEST)) as f:
            manifest = json.load(f)
        ours, files = set(manifest["entries"]), dict(manifest["files"])
    except (OSError, ValueError, KeyError, TypeError):
        return next((e for e in _entries(path) if not legacy(e)), None)
    for entry in _entries(path):
        full = os.path.join(path, entry)
        if entry not in ours or (os.path.isfile(full) and (entry not in files or _digest(full) != files[entry])):
            return entry
    return None


def write_directory(
    path: Union[str, os.PathLike],
    fill: Callable[[str], Any],
    *,
    overwrite: bool = False,
    replaceable: Callable[[str], bool] = lambda existing: True,
    legacy: Callable[[str], bool] = lambda entry: False,
) -> str:
    """Builds a directory with `fill(tmp_dir)` and renames it to `path`.

    An existing `path` is replaced only with `overwrite=True`, when `replaceable(path)` says it is ours
    (e.g. an earlier export) and when it holds only what its manifest lists (`legacy`: the entries its writer
    made before manifests existed); the old one is removed only after the new one is in place.
    """
    path, parent, base, tag = _prepare(path)
    if os.path.lexists(path):
        if not overwrite:
            raise FileExistsError(f"{path} already exists; pass overwrite=True (--overwrite) to replace it.")
        if not os.path.isdir(path) or not replaceable(path):
            raise FileExistsError(
                f"{path} exists and is not an earlier output of ours; refusing to replace it "
                "(remove it yourself or choose another path)."
            )
        foreign = foreign_entry(path, legacy)
        if foreign is not None:
            raise FileExistsError(
                f"{path} holds {foreign!r}, which keras_vit did not write there or which was "
                "changed since; refusing to replace the directory (move that out, or choose "
                "another path)."
            )
    tmp = tempfile.mkdtemp(prefix=f".tmp-{tag}", dir=parent)
    try:
        fill(tmp)
        with open(os.path.join(tmp, MANIFEST), "w") as f:
            json.dump(_manifest(tmp), f, indent=1)
        _as_created(tmp, directory=True)
        if os.path.lexists(path):
            old = tempfile.mkdtemp(prefix=f".old-{tag}", dir=parent)
            os.rename(path, os.path.join(old, base))
            os.rename(tmp, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return path


def check_writable(path: Union[str, os.PathLike], what: str = "--out", *, directory: bool = False) -> str:
    """Checks, before any work, that `path` can be written (its nearest existing ancestor is a writable
    directory, and `path` itself is not a directory where a file is wanted or vice versa); creates nothing."""
    path = os.path.abspath(os.fspath(path))
    if os.path.exists(path) and os.path.isdir(path) != directory:
        raise ValueError(f"{what} {path} exists and is {'not ' if directory else ''}a directory.")
    ancestor = os.path.dirname(path)
    while not os.path.exists(ancestor):
        ancestor = os.path.dirname(ancestor)
    if not os.path.isdir(ancestor):
        raise ValueError(f"{what} {path} cannot be created: {ancestor} is a file, not a directory.")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise ValueError(f"{what} {path} cannot be written: no write permission in {ancestor}.")
    return path
