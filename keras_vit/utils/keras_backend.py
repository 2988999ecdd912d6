"""Importing Keras with an answer in one line when its backend cannot load.

Keras picks its backend once, at its first import: `KERAS_BACKEND`, else the "backend" field of `keras.json` in
`$KERAS_HOME` (default `~/.keras`), else "tensorflow". When that backend's package is missing or broken, Keras
raises from deep inside its import and does not fall back to another backend; keras_vit says which backend was
tried, why it failed, and what fixes it.
"""

from __future__ import annotations

import importlib.util
import json
import os
from types import ModuleType
from typing import Tuple

BACKENDS = ("tensorflow", "jax", "torch")


def chosen_backend() -> Tuple[str, str]:
    """(the backend Keras' first import will load, where that choice came from), read as Keras reads it."""
    if os.environ.get("KERAS_BACKEND"):
        return os.environ["KERAS_BACKEND"], "KERAS_BACKEND"
    home = os.environ.get("KERAS_HOME") or os.path.join(os.path.expanduser("~"), ".keras")
    path = os.path.join(home, "keras.json")
    try:
        with open(path) as f:
            found = json.load(f).get("backend")
    except (OSError, ValueError, AttributeError):
        found = None
    if isinstance(found, str) and found:
        return found, path
    return "tensorflow", "Keras' default, with KERAS_BACKEND unset"


def import_keras() -> ModuleType:
    """`import keras`; an ImportError naming the backend tried, the cause and the fix where it fails."""
    try:
        import keras
    except ImportError as e:
        raise ImportError(_message(*chosen_backend(), e)) from None
    return keras


def _message(backend: str, where: str, error: Exception) -> str:
    others = [b for b in BACKENDS if b != backend and importlib.util.find_spec(b) is not None]
    fix = f"pip install 'keras-vision-transformer[{backend}]'" if backend in BACKENDS else "name a backend Keras has"
    if others:
        fix += " or set KERAS_BACKEND=" + " / ".join(others) + " (installed here)"
    return (
        f"keras_vit needs Keras, whose backend {backend!r} (from {where}) could not be imported: {error}. Keras does "
        f"not fall back to another backend: {fix}."
    )


keras = import_keras()
