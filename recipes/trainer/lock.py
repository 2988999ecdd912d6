"""One live run per workdir: `workdir/.lock` names its holder; a lock left by a killed run is taken over.

Two runs writing one workdir interleave checkpoints until one dies on a rename; this lock refuses
the second at start. The lock is a file created with O_EXCL (atomic on local disks) holding the
holder's host and pid. A lock whose pid is dead on this host is stale and taken over. Remote
workdirs (gs://) have no atomic create, so they are not locked (a warning says so).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import time
from typing import Iterator

from keras_vit.utils.atomic import process_alive

logger = logging.getLogger("recipes")
LOCK_NAME = ".lock"


class WorkdirBusy(RuntimeError):
    """Another live run holds the workdir."""


def _create(path: str) -> bool:
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w") as f:
        json.dump(dict(host=socket.gethostname(), pid=os.getpid(), since=time.strftime("%Y-%m-%dT%H:%M:%S")), f)
    return True


def _holder(path: str) -> dict:
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}  # half-written by a killed process: treat as stale


def acquire(workdir: str) -> str:
    """Takes `workdir`'s lock, or raises WorkdirBusy naming the live holder. Returns the lock's path."""
    path = os.path.join(workdir, LOCK_NAME)
    if os.path.lexists(path) and not os.path.isfile(path):
        raise WorkdirBusy(
            f"--workdir={workdir!r}: {path} is not a lock file (a directory or another kind of "
            "entry); it is not the trainer's, so it is left alone: remove or rename it, or use "
            "another workdir."
        )
    for _ in range(3):
        if _create(path):
            return path
        holder = _holder(path)
        same_host = holder.get("host") == socket.gethostname()
        pid = holder.get("pid")
        if holder and (not same_host or (isinstance(pid, int) and process_alive(pid))):
            if pid == os.getpid() and same_host:
                raise WorkdirBusy(f"--workdir={workdir!r} is already in use by this process (pid {pid}).")
            raise WorkdirBusy(
                f"--workdir={workdir!r} is in use by a live run: pid {pid} on {holder.get('host')} "
                f"since {holder.get('since')} (lock file {path}). Wait for it, or use another "
                "workdir; delete the lock only if that run is really gone."
            )
        logger.warning("Taking over the stale lock %s left by %s.", path, holder or "an unreadable lock file")
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)
    raise WorkdirBusy(f"--workdir={workdir!r}: could not take {path} (another run is starting on it).")


def release(path: str) -> None:
    """Drops the lock if it is still ours."""
    holder = _holder(path)
    if holder.get("pid") == os.getpid() and holder.get("host") == socket.gethostname():
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)


@contextlib.contextmanager
def hold(workdir: str) -> Iterator[None]:
    """Holds `workdir`'s lock for the block (no-op with a warning on remote file systems)."""
    if "://" in workdir:
        logger.warning("%s is remote: runs on it are not locked against each other.", workdir)
        yield
        return
    path = acquire(workdir)
    try:
        yield
    finally:
        release(path)
