"""Low-rank adaptation (LoRA; Hu et al., 2021) of a `VisionTransformer`: adapters, freezing, merging.

A kernel W seen as a (d_in, d_out) matrix is used as W + (alpha / r) A B, A (d_in, r) random, B (r, d_out)
zero, so an adapted model starts equal to its base. Only A, B and the head train.

The attention projections are `keras_vit.nn.projection.Projection`, whose adapter is the paper's (d_in, r) and
(r, d_out) over the flattened kernel; the MLP's `Dense` kernels are already matrices and use Keras' own
`enable_lora`.

Saving follows Keras: `model.save` / `.weights.h5` store the merged kernels (W + (alpha/r) A B), so a saved
adapted model reloads as a plain one with the adapted outputs. The adapters alone (and the head) go through
`keras_vit.save_lora_weights` (`keras_vit.weights.lora_files`; this module does no file I/O).
"""

from __future__ import annotations

import hashlib
import math
from typing import Dict, Optional, Sequence

import keras
import numpy as np
from keras import ops

from keras_vit.utils import validate
from keras_vit.nn.projection import Projection, base_variable, merged_kernel  # noqa: F401 (used by LoRA)

# the layers an adapter can sit on, by the official checkpoint's names; the LoRA paper's default first
LORA_TARGETS = ("query", "value", "key", "out", "Dense_0", "Dense_1")
DEFAULT_LORA_TARGETS = ("query", "value")


class LoRA:
    """`enable_lora`, `merge_lora` and the adapter state of a `VisionTransformer` (mixed into it)."""

    def save_lora_weights(self, filepath: str) -> str:
        """The model reads and writes no files: `keras_vit.save_lora_weights(model, filepath)` does."""
        raise AttributeError(
            "model.save_lora_weights(path) is keras_vit.save_lora_weights(model, path): the model class writes no files."
        )

    def load_lora_weights(self, filepath: str) -> None:
        """The model reads and writes no files: `keras_vit.load_lora_weights(model, filepath)` does."""
        raise AttributeError(
            "model.load_lora_weights(path) is keras_vit.load_lora_weights(model, path): the model class reads no files."
        )

    def lora_layers(self) -> Dict[str, keras.layers.Layer]:
        """{"encoderblock_<i>/<name>": layer} of every layer that holds an adapter, in block order."""
        return {key: layer for key, layer in self._lora_candidates().items() if layer.lora_enabled}

    def _lora_candidates(self) -> Dict[str, keras.layers.Layer]:
        out = {}
        for i, block in enumerate(self.encoder.blocks):
            parts = getattr(block, "branches", None)  # parallel branches: each branch's attention and MLP
            for prefix, part in ((f"branch_{j}/", b) for j, b in enumerate(parts)) if parts else (("", block),):
                for name in LORA_TARGETS:
                    holder = part.mlp if name.startswith("Dense") else part.attention
                    out[f"encoderblock_{i}/{prefix}{name}"] = getattr(holder, _attribute(name))
        return out

    @property
    def lora_rank(self) -> Optional[int]:
        """The adapters' rank; None when LoRA is not enabled."""
        layers = list(self.lora_layers().values())
        return layers[0].lora_rank if layers else None

    def enable_lora(
        self, rank: int, target_layer_names: Optional[Sequence[str]] = None, alpha: Optional[float] = None
    ) -> None:
        """Adds rank-`rank` adapters to `target_layer_names` of every block and freezes all but the adapters
        and the head (keras-hub's name and keywords).

        Args:
          rank: r, the adapters' rank.
          target_layer_names: any of "query", "key", "value", "out" (attention) and "Dense_0", "Dense_1"
            (MLP); default ("query", "value"), as in the LoRA paper.
          alpha: the update is scaled by alpha / r; default r (scale 1).
        """
        rank = validate.integer("rank", rank)
        names = tuple(DEFAULT_LORA_TARGETS if target_layer_names is None else target_layer_names)
        unknown = [n for n in names if n not in LORA_TARGETS]
        if isinstance(target_layer_names, str) or unknown or not names:
            raise ValueError(
                f"target_layer_names={target_layer_names!r}: expected a list drawn from "
                f"{list(LORA_TARGETS)}" + (f" ({unknown[0]!r} is not one)." if unknown else ".")
            )
        if self.lora_layers():
            raise ValueError(f"LoRA is already enabled on {self.name!r} (rank {self.lora_rank}).")
        quantized = sorted(set(self.quantized_layers().values()))
        if quantized:
            raise ValueError(
                f"Model {self.name!r} is quantized ({', '.join(quantized)}): enable LoRA on the float model."
            )
        if alpha is not None:
            alpha = validate.number("alpha", alpha, positive=True)
        for variable in self.weights:
            variable.trainable = False
        for key, layer in self._lora_candidates().items():
            if key.split("/")[1] in names:
                layer.enable_lora(rank, lora_alpha=alpha if alpha is not None else rank)
        if self.head is not None:
            for variable in self.head.weights:
                variable.trainable = True
        # Keras caches its compiled predict/train/test functions: traced before the adapters, they would ignore them
        self.predict_function = self.train_function = self.test_function = None

    def _adapter_ids(self) -> set:
        """ids of the adapters' variables (A and B of every adapted layer)."""
        return {id(v) for layer in self.lora_layers().values() for v in (layer.lora_kernel_a, layer.lora_kernel_b)}

    def _lora_targets(self) -> list:
        """The target names that hold adapters, in `LORA_TARGETS` order."""
        return sorted({key.split("/")[1] for key in self.lora_layers()}, key=LORA_TARGETS.index)

    def _lora_owned(self) -> set:
        """ids of the variables a LoRA file holds: the adapters and the head."""
        return self._adapter_ids() | ({id(v) for v in self.head.weights} if self.head is not None else set())

    def lora_base_fingerprint(self) -> str:
        """sha256 of every weight but the adapters and the head: adapters are refused on another base."""
        digest, owned = hashlib.sha256(), self._lora_owned()
        for variable in self.weights:
            if id(variable) not in owned:
                digest.update(np.ascontiguousarray(ops.convert_to_numpy(variable), dtype="float32").tobytes())
        return digest.hexdigest()

    def lora_state(self) -> tuple:
        """({name: float32 array} of the adapters and the head, {rank, alpha, targets, base}): what
        `save_lora_weights` writes."""
        layers = self.lora_layers()
        if not layers:
            raise ValueError(f"Model {self.name!r} has no LoRA adapters (model.enable_lora(...) first).")
        arrays = {}
        for key, layer in layers.items():
            arrays[key + "/lora_kernel_a"] = ops.convert_to_numpy(layer.lora_kernel_a)
            arrays[key + "/lora_kernel_b"] = ops.convert_to_numpy(layer.lora_kernel_b)
        if self.head is not None:
            arrays["head/kernel"], arrays["head/bias"] = (
                ops.convert_to_numpy(v) for v in (self.head.kernel, self.head.bias)
            )
        first = next(iter(layers.values()))
        meta = dict(
            rank=int(first.lora_rank),
            alpha=float(first.lora_alpha),
            targets=self._lora_targets(),
            base=self.lora_base_fingerprint(),
        )
        return {k: np.asarray(v, dtype="float32") for k, v in arrays.items()}, meta

    def set_lora_state(self, arrays: Dict[str, np.ndarray], meta: dict, source: str = "LoRA state") -> None:
        """Puts `lora_state()`'s output back (enabling LoRA as it was if needed). Every name, shape and value is
        checked first, and the base the adapters were trained on must be this model's: nothing changes on a
        refusal."""
        rank, targets = int(meta["rank"]), list(meta["targets"])
        if self.lora_layers() and (self.lora_rank != rank or self._lora_targets() != targets):
            raise ValueError(
                f"{source}: adapters of rank {rank} on {targets}, but {self.name!r} has rank "
                f"{self.lora_rank} on {self._lora_targets()}."
            )
        expected = _expected_shapes(self, rank, targets)
        for name, value in arrays.items():
            if name not in expected:
                raise ValueError(f"{source}: tensor {name!r} has no place in {self.name!r} (no weight was changed).")
            if tuple(value.shape) != expected[name]:
                raise ValueError(
                    f"{source}: {name} has shape {tuple(value.shape)}, {self.name!r} needs "
                    f"{expected[name]} (no weight was changed)."
                )
            if not np.all(np.isfinite(value)):
                raise ValueError(f"{source}: {name} holds NaN/Inf (no weight was changed).")
        missing = sorted(set(expected) - set(arrays))
        if missing:
            raise ValueError(f"{source}: {missing[0]} is missing ({len(missing)} in all; no weight was changed).")
        if meta["base"] != self.lora_base_fingerprint():
            raise ValueError(
                f"{source}: the adapters were trained on another base model (its weights differ from "
                f"{self.name!r}'s): load the same pretrained weights first (no weight was changed)."
            )
        if not self.lora_layers():
            self.enable_lora(rank, targets, alpha=meta["alpha"])
        layers = self.lora_layers()
        for name, value in arrays.items():
            key, part = name.rsplit("/", 1)
            owner = self.head if key == "head" else layers[key]
            getattr(owner, part).assign(value)

    def merge_lora(self) -> "keras.Model":
        """A new model of the same config whose kernels hold W + (alpha / r) A B, without adapters (for
        export, `save_npz`, quantization). This model is unchanged."""
        layers = self.lora_layers()
        if not layers:
            raise ValueError(f"Model {self.name!r} has no LoRA adapters to merge (model.enable_lora(...) first).")
        merged_kernels = {id(layer._kernel): merged_kernel(layer) for layer in layers.values()}
        adapters = self._adapter_ids()
        config = {**self.get_config(), "trainable": True}
        config.pop("name", None)
        new = type(self).from_config(config)
        values = [merged_kernels.get(id(v), v) for v in self.weights if id(v) not in adapters]
        if len(values) != len(new.weights):
            raise RuntimeError(f"merge_lora: {len(values)} weights to copy into {len(new.weights)}.")
        for target, value in zip(new.weights, values):
            target.assign(ops.convert_to_numpy(value).astype(keras.backend.standardize_dtype(target.dtype)))
        return new


def _expected_shapes(model, rank: int, targets: Sequence[str]) -> Dict[str, tuple]:
    """{name: shape} a LoRA state of `rank` on `targets` has for `model`."""
    unknown = [t for t in targets if t not in LORA_TARGETS]
    if unknown:
        raise ValueError(f"LoRA targets {unknown} are not among {list(LORA_TARGETS)}.")
    out = {}
    for key, layer in model._lora_candidates().items():
        if key.split("/")[1] in targets:
            shape = tuple(base_variable(layer).shape)
            axes = getattr(layer, "input_axes", 1)
            out[key + "/lora_kernel_a"] = (math.prod(shape[:axes]), rank)
            out[key + "/lora_kernel_b"] = (rank, math.prod(shape[axes:]))
    if model.head is not None:
        out["head/kernel"], out["head/bias"] = tuple(model.head.kernel.shape), tuple(model.head.bias.shape)
    return out


def _attribute(name: str) -> str:
    """The Python attribute of a target's layer on its block's attention or MLP."""
    return {"Dense_0": "dense_0", "Dense_1": "dense_1"}.get(name, name)
