"""File or name -> variables: every weight source keras_vit reads or writes.

- `releases` / `augreg`: the released checkpoints (2020, AugReg, SAM), their names and download.
- `keys`: the official keys every source is brought to, and what the PyTorch-layout readers share.
- `big_vision`, `transformers_vit`, `timm/`: one reader (and writer) per framework's layout.
- `official`: the official `.npz` layout <-> a model's variables, the architecture read off a file's shapes,
  the fine-tuning rules (position embeddings resized, head re-initialised).
- `safetensors_files`: `save_safetensors`, a model written for timm or `transformers`.
- `keras_files`: Keras' own `.keras` and `.weights.h5` files.
- `lora_files`: `.lora.h5` files (a model's LoRA adapters and head).
- `sources`: the table of weight sources: what each recognises, how it is read, what data config it states.
- `load`: resolving a source through that table: `load_weights`, `load_model`, `source_params`.
"""

from __future__ import annotations

import warnings

from keras_vit.weights.lora_files import load_lora_weights, save_lora_weights
from keras_vit.weights import sources
from keras_vit.weights.load import (
    SOURCE_KINDS,
    Checkpoint,
    check_source,
    load_model,
    load_weights,
    read_checkpoint,
    source_kind,
    source_params,
)


# names this module had when it was one file (keras_vit/weights.py), kept for one release
_OLD_NAMES = {
    "check_weights_argument": "check_source",
    "read_keras_file": None,
    "read_foreign": None,
    "KERAS_SUFFIXES": None,
}


def _read_foreign(path, num_heads=None) -> tuple:
    checkpoint = read_checkpoint(path, num_heads=num_heads)
    return checkpoint.params, dict(checkpoint.assumed, **checkpoint.implied)


def __getattr__(name: str):
    if name not in _OLD_NAMES:
        raise AttributeError(f"module 'keras_vit.weights' has no attribute {name!r}")
    new = _OLD_NAMES[name]
    warnings.warn(
        f"keras_vit.weights.{name} is deprecated" + (f"; use keras_vit.weights.{new}." if new else "."),
        DeprecationWarning,
        stacklevel=2,
    )
    if name == "read_keras_file":
        from keras_vit.weights.keras_files import read_keras_file

        return read_keras_file
    if name == "read_foreign":
        return _read_foreign
    if name == "KERAS_SUFFIXES":
        return (".keras", ".weights.h5")
    return check_source


__all__ = [
    "SOURCE_KINDS",
    "sources",
    "Checkpoint",
    "check_source",
    "load_model",
    "load_lora_weights",
    "load_weights",
    "read_checkpoint",
    "save_lora_weights",
    "source_kind",
    "source_params",
]
