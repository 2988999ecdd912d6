"""`.lora.h5` files: a model's LoRA adapters and head, without the frozen base (keras-hub's suffix).

One HDF5 dataset per tensor, named as `VisionTransformer.lora_state()` names it
(`encoderblock_0/query/lora_kernel_a`, `head/kernel`), and the file's attributes: rank, alpha, the target
layers and the sha256 fingerprint of the base weights the adapters were trained on.
"""

from __future__ import annotations

import json
import os
from typing import Union

import h5py
import keras
import numpy as np

from keras_vit.utils import atomic
from keras_vit.vit.model import ensure_vit

SUFFIX = ".lora.h5"
FORMAT = "keras_vit.lora/1"


def _check_path(filepath) -> str:
    path = os.fspath(filepath)
    if not str(path).endswith(SUFFIX):
        raise ValueError(f"LoRA weights file {path!r} must end with {SUFFIX!r}.")
    return path


def save(model, filepath) -> str:
    """Writes `model.lora_state()` to `filepath` atomically; returns the path."""
    path = _check_path(filepath)
    arrays, meta = ensure_vit(model).lora_state()

    def write(tmp: str) -> None:
        with h5py.File(tmp, "w") as f:
            f.attrs["format"] = FORMAT
            f.attrs["meta"] = json.dumps(meta)
            for name, value in arrays.items():
                f.create_dataset(name, data=value)

    return atomic.write_file(path, write)


def _read(path: str) -> tuple:
    names = []
    try:
        with h5py.File(path, "r") as f:
            if f.attrs.get("format") != FORMAT:
                raise ValueError(
                    f"LoRA weights file {path!r} is not a keras_vit LoRA file "
                    f"(format {f.attrs.get('format')!r}, expected {FORMAT!r})."
                )
            meta = json.loads(f.attrs["meta"])
            f.visititems(lambda name, obj: names.append(name) if isinstance(obj, h5py.Dataset) else None)
            arrays = {name: np.asarray(f[name], dtype="float32") for name in names}
    except OSError as e:
        raise ValueError(f"LoRA weights file {path!r} cannot be read: {e}") from e
    return arrays, meta


def load(model, filepath) -> None:
    """Reads `filepath` into `model` (`VisionTransformer.set_lora_state`: checked whole before any change)."""
    path = _check_path(filepath)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"LoRA weights file {path!r} does not exist.")
    arrays, meta = _read(path)
    ensure_vit(model).set_lora_state(arrays, meta, source=path)


def save_lora_weights(model: keras.Model, filepath: Union[str, os.PathLike]) -> str:
    """Writes `model`'s LoRA adapters and head (not the frozen base) to `filepath` (`*.lora.h5`, keras-hub's
    suffix), atomically; a few MB for ViT-B/16. Returns the path."""
    return save(model, filepath)


def load_lora_weights(model: keras.Model, filepath: Union[str, os.PathLike]) -> None:
    """Reads a `save_lora_weights` file into `model` (enabling LoRA as saved if needed), all-or-nothing; refused
    when `model`'s base weights are not those the adapters were trained on."""
    load(model, filepath)
