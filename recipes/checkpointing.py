"""Atomic, resumable checkpoints of every variable of a run (model, optimizer, step, EMA).

Each checkpoint is one `.npz` written to a temporary name and renamed into place,
so a run killed mid-write leaves the previous checkpoint as the latest good one.
Works on local disks and on GCS (tf.io.gfile), for any strategy.
"""

from __future__ import annotations

import io
import re
from typing import Dict, List, Optional

import numpy as np
import tensorflow as tf

from recipes.atomic import write_atomic

_NAME = re.compile(r"^ckpt-(\d{9})\.npz$")


class CheckpointManager:
    """Saves/restores named groups of variables, keeping the newest `keep` files."""

    def __init__(self, directory: str, groups: Dict[str, List], keep: int = 3):
        self.directory, self.groups, self.keep = directory, groups, keep
        tf.io.gfile.makedirs(directory)

    def _arrays(self) -> Dict[str, np.ndarray]:
        out = {}
        for group, variables in self.groups.items():
            for i, v in enumerate(variables):
                out[f"{group}/{i:05d}"] = np.asarray(v.numpy())
        return out

    def steps(self) -> List[int]:
        """Steps of the complete checkpoints on disk, oldest first."""
        names = tf.io.gfile.listdir(self.directory) if tf.io.gfile.exists(self.directory) else []
        return sorted(int(m.group(1)) for m in map(_NAME.match, names) if m)

    def latest(self) -> Optional[int]:
        steps = self.steps()
        return steps[-1] if steps else None

    def path(self, step: int) -> str:
        return f"{self.directory}/ckpt-{step:09d}.npz"

    def save(self, step: int) -> str:
        buffer = io.BytesIO()
        np.savez(buffer, **self._arrays())
        final = write_atomic(self.path(step), buffer.getvalue())
        for old in self.steps()[: -self.keep]:
            tf.io.gfile.remove(self.path(old))
        return final

    def restore(self, step: Optional[int] = None) -> Optional[int]:
        """Loads checkpoint `step` (default: the latest); returns its step, None if there is none."""
        step = self.latest() if step is None else step
        if step is None:
            return None
        with tf.io.gfile.GFile(self.path(step), "rb") as f:
            data = np.load(io.BytesIO(f.read()), allow_pickle=False)
            for group, variables in self.groups.items():
                for i, v in enumerate(variables):
                    value = data[f"{group}/{i:05d}"]
                    if tuple(value.shape) != tuple(v.shape):
                        raise ValueError(f"Checkpoint {self.path(step)} does not fit this run: {group} variable "
                                         f"{i} ({getattr(v, 'path', v.name)}) is {tuple(v.shape)}, file has "
                                         f"{value.shape}. Was the config changed?")
                    v.assign(value)
        return step
