"""Resumable checkpoints of a run (model, optimizer with its EMA, step), written by `tf.train.Checkpoint`.

Variables are keyed by their Keras path (`Transformer/encoderblock_0/MlpBlock_3/Dense_0/kernel`,
`adam_w/..._momentum`), never by position, so a checkpoint survives a reordering of variables and is
refused, with the path named, by a run of another config. `tf.train.CheckpointManager` writes each
variable from where it lives (mirrored and TPU variables included) and rotates old checkpoints; the rules
shared with the JAX engine's Orbax manager (`recipes.trainer.jax_checkpoints`) live in `GuardedCheckpoints`.
"""

from __future__ import annotations

import logging
import re
from typing import Dict, List, Optional

import numpy as np
import tensorflow as tf

from keras_vit.utils.validate import first_line as _first_line

logger = logging.getLogger("recipes")


class CheckpointError(ValueError):
    """A checkpoint that cannot serve this run: unreadable, non-finite, or from another config."""


class NonFiniteError(CheckpointError):
    """Refusing to write (or resume from) NaN / Inf state."""


_RNG = re.compile(r"^seed_generator(_\d+)?/seed_generator_state$")


def keyed_by_path(groups: Dict[str, List]) -> Dict[str, Dict[str, object]]:
    """{group: {key: variable}}, the key being the variable's Keras path made stable across processes.

    Keras numbers two names per process (`adam_w_1`, `seed_generator_7`), so a second model in one process
    would not find its own checkpoint: an optimizer variable is keyed without the optimizer's name
    (`embedding_kernel_momentum`), and a dropout RNG state, which has no path of its own, as `rng/<i>` in the
    network's order. Two variables with one key are an error.
    """
    out = {}
    for group, variables in groups.items():
        named, rng = {}, 0
        for v in variables:
            path = getattr(v, "path", None) or v.name.split(":")[0]
            if _RNG.match(path):
                path, rng = f"rng/{rng}", rng + 1
            elif group == "optimizer" and "/" in path:
                path = path.split("/", 1)[1]
            if path in named:
                raise ValueError(f"Two {group} variables share the path {path!r}; checkpoints key by path.")
            named[path] = v
        out[group] = named
    return out


class GuardedCheckpoints:
    """The guarantees every engine's checkpoints keep.

    A checkpoint is written whole or not at all, only when every value is finite, and only then are older
    ones rotated out. `restore` takes the newest readable, finite checkpoint, moving the unreadable ones after
    it aside as `<name>.unreadable` with a warning (when none is usable it raises and moves nothing); it reads and checks a file fully before assigning anything, and a
    file of another config (a path missing or a shape different) is an error, never a fallback.
    Subclasses provide `steps`, `path`, `_write`, `_read` (raising CheckpointError for damage), `_assign`
    and `_unreadable_files`.
    """

    def __init__(self, directory: str, keep: int):
        self.directory, self.keep = directory.rstrip("/"), keep
        self._reported = set()  # stray file names already warned about
        tf.io.gfile.makedirs(self.directory)

    def latest(self) -> Optional[int]:
        steps = self.steps()
        return steps[-1] if steps else None

    def save(self, step: int) -> str:
        """Writes checkpoint `step` after checking every value is finite, then drops the oldest beyond `keep`."""
        bad = self._non_finite()
        if bad:
            raise NonFiniteError(f"The state at step {step} holds NaN/Inf in {len(bad)} variable(s), first {bad[0]}.")
        return self._write(step)

    def restore(self, step: Optional[int] = None) -> Optional[int]:
        """Loads checkpoint `step`, or the newest usable one; returns its step, None if there is none."""
        candidates = [step] if step is not None else list(reversed(self.steps()))
        damaged = []
        for candidate in candidates:
            try:
                payload = self._read(candidate)
            except CheckpointError as e:
                if step is not None:
                    raise
                if self._interrupted(candidate):  # never finished: as if never written, not damage
                    self._move_aside(candidate, e)
                    continue
                damaged.append((candidate, e))
                continue
            for bad, error in damaged:  # set aside only once a good one will be used
                self._move_aside(bad, error)
            self._assign(candidate, payload)
            return candidate
        if damaged:
            raise CheckpointError(
                f"Every checkpoint in {self.directory} is unusable (steps {', '.join(str(s) for s, _ in damaged)}; "
                f"newest: {damaged[0][1]}). Nothing was moved or trained: start over deliberately with "
                "--config.restart=True (the old files are renamed, not deleted)."
            )
        return None

    def _interrupted(self, step: int) -> bool:
        """Whether checkpoint `step`'s write is known not to have finished (the engine's own evidence)."""
        return False

    def _move_aside(self, step: int, error: Exception) -> None:
        moved = []
        for name in self._unreadable_files(step):
            tf.io.gfile.rename(name, name + ".unreadable", overwrite=True)
            moved.append(name + ".unreadable")
        logger.warning("%s; moved it to %s and trying the previous checkpoint.", error, ", ".join(moved))

    def _report_stray(self, names: List[str], ours: "re.Pattern") -> None:
        """One warning per file that is neither ours, set aside, nor a writer's temporary."""
        for name in names:
            if ours.match(name) or name.endswith(".unreadable") or "tmp" in name or name in self._reported:
                continue
            self._reported.add(name)
            logger.warning("Ignoring %s/%s: not a checkpoint of this trainer.", self.directory, name)


def _check_shape(path: str, key: str, expected, found) -> None:
    if tuple(expected) != tuple(found):
        raise ValueError(
            f"Checkpoint {path} does not fit this run: {key} is {tuple(expected)} here, "
            f"{tuple(found)} in the file. Was the config changed?"
        )


class CheckpointManager(GuardedCheckpoints):
    """TF engine: `tf.train.Checkpoint` of `groups` ({"model": variables, "optimizer": variables}), each
    variable keyed by its path, saved as `ckpt-<step>` (.index + .data) by `tf.train.CheckpointManager`."""

    _OURS = re.compile(r"^(checkpoint|ckpt-\d+\.(index|data-\d{5}-of-\d{5}))$")
    _INDEX = re.compile(r"^ckpt-(\d+)\.index$")

    def __init__(self, directory: str, groups: Dict[str, List], keep: int = 3):
        super().__init__(directory, keep)
        self.named = keyed_by_path(groups)
        # what tf.train tracks: the tf.Variable (mirrored / TPU variable under a strategy) behind each Keras variable
        tracked = {
            g: {k: v if isinstance(v, tf.Variable) else v.value for k, v in named.items()}
            for g, named in self.named.items()
        }
        self.checkpoint = tf.train.Checkpoint(**tracked)
        self._manager = tf.train.CheckpointManager(
            self.checkpoint, self.directory, max_to_keep=keep, checkpoint_name="ckpt"
        )

    def steps(self) -> List[int]:
        """Steps of the checkpoints on disk (by their index file), oldest first; other files are reported."""
        names = tf.io.gfile.listdir(self.directory) if tf.io.gfile.exists(self.directory) else []
        self._report_stray([n.rstrip("/") for n in names], self._OURS)
        return sorted(int(m.group(1)) for m in map(self._INDEX.match, names) if m)

    def path(self, step: int) -> str:
        return f"{self.directory}/ckpt-{step}"

    def _non_finite(self) -> List[str]:
        return [
            f"{g}/{k}"
            for g, named in self.named.items()
            for k, v in named.items()
            if tf.as_dtype(v.dtype).is_floating and not np.isfinite(v.numpy()).all()
        ]

    def _write(self, step: int) -> str:
        return self._manager.save(checkpoint_number=step)

    def _interrupted(self, step: int) -> bool:
        """TensorFlow writes `ckpt-<step>_temp/` first, then merges it into `ckpt-<step>.index` and `.data-*` and
        deletes it: a run killed during the merge leaves a truncated index beside the temporary folder."""
        return tf.io.gfile.exists(f"{self.path(step)}_temp")

    @staticmethod
    def _key(group: str, path: str) -> str:
        return f"{group}/{path.replace('.', '..').replace('/', '.S')}/.ATTRIBUTES/VARIABLE_VALUE"

    def _read(self, step: int) -> None:
        """Reads every tensor of `ckpt-<step>` once (CRC-checked by TF), checking keys, shapes and finiteness."""
        prefix = self.path(step)
        try:
            reader = tf.train.load_checkpoint(prefix)
            shapes, dtypes = reader.get_variable_to_shape_map(), reader.get_variable_to_dtype_map()
        except Exception as e:  # OpError, or TF's own error translation failing (IndexError): not usable
            raise CheckpointError(f"{prefix} is unreadable ({type(e).__name__}: {_first_line(e)})") from e
        for group, named in self.named.items():
            for path, v in named.items():
                key = self._key(group, path)
                if key not in shapes:
                    raise ValueError(
                        f"Checkpoint {prefix} does not fit this run: it has no {group} variable "
                        f"{path!r}. Was the config changed?"
                    )
                _check_shape(prefix, f"{group} variable {path!r}", v.shape, shapes[key])
                if tf.as_dtype(v.dtype) != dtypes[key]:
                    raise ValueError(
                        f"Checkpoint {prefix} does not fit this run: {group} variable {path!r} is "
                        f"{tf.as_dtype(v.dtype).name} here, {dtypes[key].name} in the file."
                    )
                try:
                    value = reader.get_tensor(key)
                except Exception as e:
                    raise CheckpointError(
                        f"{prefix} is unreadable ({type(e).__name__} reading {path}: {_first_line(e)})"
                    ) from e
                if np.issubdtype(np.asarray(value).dtype, np.floating) and not np.isfinite(value).all():
                    raise NonFiniteError(f"Checkpoint {prefix} holds NaN/Inf in {group} variable {path!r}.")

    def _assign(self, step: int, payload) -> None:
        self.checkpoint.read(self.path(step)).assert_existing_objects_matched()

    def _unreadable_files(self, step: int) -> List[str]:
        stem = f"ckpt-{step}."
        return [
            f"{self.directory}/{n}"
            for n in tf.io.gfile.listdir(self.directory)
            if n.startswith(stem) and not n.endswith(".unreadable")
        ]
