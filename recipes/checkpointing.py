"""Atomic, resumable checkpoints of every variable of a run (model, optimizer, step, EMA).

Each checkpoint is one `.npz` written to a temporary name and renamed into place,
so a run killed mid-write leaves the previous checkpoint as the latest good one; a
damaged newest file is moved aside and the previous one used.
Works on local disks and on GCS (tf.io.gfile), for any strategy.
"""

from __future__ import annotations

import io
import logging
import re
import zipfile
from typing import Dict, List, Optional

import numpy as np
import tensorflow as tf

from recipes.atomic import write_atomic

logger = logging.getLogger("recipes")
_NAME = re.compile(r"^ckpt-(\d{9})\.npz$")


class CheckpointError(ValueError):
    """A checkpoint that cannot serve this run: unreadable, non-finite, or from another config."""


class NonFiniteError(CheckpointError):
    """Refusing to write (or resume from) NaN / Inf state."""


def _finite_or_raise(arrays: Dict[str, np.ndarray], what: str) -> None:
    bad = [k for k, a in arrays.items() if np.issubdtype(a.dtype, np.floating) and not np.isfinite(a).all()]
    if bad:
        raise NonFiniteError(f"{what} holds NaN/Inf in {len(bad)} variable(s), first {bad[0]}.")


class CheckpointManager:
    """Saves/restores named groups of variables, keeping the newest `keep` files.

    Guarantees: a checkpoint is written whole or not at all, only when every value is finite,
    and only then are older ones rotated out; `restore` takes the newest readable, finite
    checkpoint, moving unreadable ones aside as `<name>.unreadable` with a warning.
    """

    def __init__(self, directory: str, groups: Dict[str, List], keep: int = 3):
        self.directory, self.groups, self.keep = directory, groups, keep
        self._reported = set()
        tf.io.gfile.makedirs(directory)

    def _arrays(self) -> Dict[str, np.ndarray]:
        out = {}
        for group, variables in self.groups.items():
            for i, v in enumerate(variables):
                out[f"{group}/{i:05d}"] = np.asarray(v.numpy())
        return out

    def steps(self) -> List[int]:
        """Steps of the complete checkpoints on disk, oldest first; other files are reported and ignored."""
        names = tf.io.gfile.listdir(self.directory) if tf.io.gfile.exists(self.directory) else []
        found = []
        for name in names:
            match = _NAME.match(name)
            if match:
                found.append(int(match.group(1)))
            elif not name.endswith((".tmp", ".unreadable")) and name not in self._reported:
                self._reported.add(name)
                logger.warning("Ignoring %s/%s: not a checkpoint of this trainer (ckpt-<9 digits>.npz).",
                               self.directory, name)
        return sorted(found)

    def latest(self) -> Optional[int]:
        steps = self.steps()
        return steps[-1] if steps else None

    def path(self, step: int) -> str:
        return f"{self.directory}/ckpt-{step:09d}.npz"

    def save(self, step: int) -> str:
        """Writes checkpoint `step` (after checking every value is finite), then drops the oldest."""
        arrays = self._arrays()
        _finite_or_raise(arrays, f"The state at step {step}")
        buffer = io.BytesIO()
        np.savez(buffer, **arrays)
        final = write_atomic(self.path(step), buffer.getvalue())
        for old in self.steps()[: -self.keep]:
            tf.io.gfile.remove(self.path(old))
        return final

    def _read(self, step: int) -> Dict[str, np.ndarray]:
        """Every array of checkpoint `step`, checked against the run's variables; nothing is assigned."""
        path = self.path(step)
        try:
            with tf.io.gfile.GFile(path, "rb") as f:
                raw = io.BytesIO(f.read())
            if not zipfile.is_zipfile(raw):
                raise CheckpointError(f"{path} is unreadable (not a zip archive, {len(raw.getvalue())} bytes)")
            with np.load(raw, allow_pickle=False) as data:
                arrays = {k: data[k] for k in data.files}
        except CheckpointError:
            raise
        except Exception as e:  # zip, CRC, header and pickle-refusal errors alike: the file is not usable
            raise CheckpointError(f"{path} is unreadable ({type(e).__name__}: {e})") from e
        for group, variables in self.groups.items():
            for i, v in enumerate(variables):
                key = f"{group}/{i:05d}"
                if key not in arrays:
                    raise CheckpointError(f"{path} is unreadable: it lacks {key}")
                if tuple(arrays[key].shape) != tuple(v.shape):
                    raise ValueError(f"Checkpoint {path} does not fit this run: {group} variable {i} "
                                     f"({getattr(v, 'path', v.name)}) is {tuple(v.shape)}, file has "
                                     f"{arrays[key].shape}. Was the config changed?")
        _finite_or_raise(arrays, f"Checkpoint {path}")
        return arrays

    def restore(self, step: Optional[int] = None) -> Optional[int]:
        """Loads checkpoint `step`, or the newest usable one; returns its step, None if there is none.

        All-or-nothing: a file is fully read and checked before any variable is assigned. A file
        from another config (shapes differ) is an error, not a fallback.
        """
        candidates = [step] if step is not None else list(reversed(self.steps()))
        for candidate in candidates:
            try:
                arrays = self._read(candidate)
            except CheckpointError as e:
                if step is not None:
                    raise
                aside = self.path(candidate) + ".unreadable"
                tf.io.gfile.rename(self.path(candidate), aside, overwrite=True)
                logger.warning("%s; moved it to %s and trying the previous checkpoint.", e, aside)
                continue
            for group, variables in self.groups.items():
                for i, v in enumerate(variables):
                    v.assign(arrays[f"{group}/{i:05d}"])
            return candidate
        return None
