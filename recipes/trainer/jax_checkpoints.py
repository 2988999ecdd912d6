"""Resumable checkpoints for the JAX engine, written by Orbax with the guarantees of the TF engine's.

The state ({"model": {path: array}, "optimizer": {path: array}}) is saved as Orbax's standard pytree:
each process writes its own shards, Orbax commits the step directory atomically, and a restore lays
every array out as this run's variables are laid out, so a run saved on 2 devices resumes on 4.
"""

from __future__ import annotations

import os
import re
from typing import List

import jax
import jax.numpy as jnp
import orbax.checkpoint as ocp
import tensorflow as tf

from recipes.trainer.checkpoints import CheckpointError, GuardedCheckpoints, NonFiniteError, _check_shape, _first_line
from recipes.trainer.jax_step import host


@jax.jit
def _finite(tree):
    return jax.tree.map(
        lambda a: jnp.all(jnp.isfinite(a)) if jnp.issubdtype(a.dtype, jnp.floating) else jnp.bool_(True), tree
    )


def non_finite_paths(state) -> List[str]:
    """ "group/path" of every array of `state` holding NaN/Inf (one compiled reduction, any layout)."""
    return [f"{g}/{k}" for g, named in _finite(state).items() for k, ok in named.items() if not bool(host(ok))]


class OrbaxCheckpoints(GuardedCheckpoints):
    """JAX engine: `<directory>/<step>/` Orbax checkpoints of `engine.state()`, the newest `keep` kept."""

    _OURS = re.compile(r"^\d+$")

    def __init__(self, directory: str, engine, keep: int = 3):
        super().__init__(directory, keep)
        self.engine = engine
        options = ocp.CheckpointManagerOptions(max_to_keep=keep, enable_async_checkpointing=False, create=True)
        # the handler named up front: a fresh manager otherwise knows no item and reads no metadata
        self._manager = ocp.CheckpointManager(
            os.path.abspath(self.directory) if "://" not in directory else directory,
            options=options,
            item_handlers=ocp.StandardCheckpointHandler(),
        )

    def steps(self) -> List[int]:
        names = (
            [n.rstrip("/") for n in tf.io.gfile.listdir(self.directory)] if tf.io.gfile.exists(self.directory) else []
        )
        self._report_stray(names, self._OURS)
        self._manager.reload()
        return sorted(int(s) for s in self._manager.all_steps())

    def path(self, step: int) -> str:
        return f"{self.directory}/{step}"

    def _non_finite(self) -> List[str]:
        return non_finite_paths(self.engine.state())

    def _write(self, step: int) -> str:
        self._manager.save(step, args=ocp.args.StandardSave(self.engine.state()), force=True)
        self._manager.wait_until_finished()
        return self.path(step)

    def _abstract(self):
        return jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=a.sharding), self.engine.state())

    def _read(self, step: int):
        """The whole checkpoint as new arrays, laid out as this run's; nothing of the run is changed."""
        where = self.path(step)
        try:
            metadata = self._manager.item_metadata(step)
            saved = metadata.tree if hasattr(metadata, "tree") else metadata
        except Exception as e:  # missing or damaged metadata: the step directory is not usable
            raise CheckpointError(f"{where} is unreadable ({type(e).__name__}: {_first_line(e)})") from e
        if saved is None:
            raise CheckpointError(f"{where} is unreadable (no metadata)")
        for group, named in self.engine.state().items():
            for path, array in named.items():
                if group not in saved or path not in saved[group]:
                    raise ValueError(
                        f"Checkpoint {where} does not fit this run: it has no {group} variable "
                        f"{path!r}. Was the config changed?"
                    )
                _check_shape(where, f"{group} variable {path!r}", array.shape, saved[group][path].shape)
        try:
            restored = self._manager.restore(step, args=ocp.args.StandardRestore(self._abstract()))
        except Exception as e:
            raise CheckpointError(f"{where} is unreadable ({type(e).__name__}: {_first_line(e)})") from e
        bad = non_finite_paths(restored)
        if bad:
            raise NonFiniteError(f"Checkpoint {where} holds NaN/Inf in {bad[0]}.")
        return restored

    def _assign(self, step: int, payload) -> None:
        self.engine.set_state(payload)

    def _unreadable_files(self, step: int) -> List[str]:
        return [self.path(step)] if jax.process_index() == 0 else []

    def _move_aside(self, step: int, error: Exception) -> None:
        super()._move_aside(step, error)
        self._manager.reload()

    def close(self) -> None:
        self._manager.wait_until_finished()
        self._manager.close()
