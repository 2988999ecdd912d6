"""Keras' own files as weight sources: a saved `.keras` model and a `.weights.h5` weights file.

Readers only: which reader a source goes to is decided in `keras_vit.weights.load`.
"""

from __future__ import annotations

import json
import os
import zipfile
from typing import Optional

import keras

from keras_vit.vit.model import all_or_nothing


def read_keras_file(path: str) -> keras.Model:
    """The `keras_vit.VisionTransformer` saved in a `.keras` file, or a ValueError naming what it holds."""
    if not zipfile.is_zipfile(path):
        size = os.path.getsize(path)
        raise ValueError(
            f"{path!r} is not a .keras file: {'it is empty' if not size else 'not a zip archive'} "
            f"({size} bytes; truncated or another format?)."
        )
    try:
        source = keras.models.load_model(path, compile=False)
    except (ValueError, KeyError, OSError, zipfile.BadZipFile) as e:
        raise ValueError(f"{path!r} is not a readable .keras file: {e}") from e
    if not hasattr(source, "vit_config"):
        raise ValueError(
            f"{path!r} holds a {type(source).__name__}, not a keras_vit.VisionTransformer "
            "(re-save it from a model built by keras_vit)."
        )
    return source


def saved_data_config(path: str) -> Optional[dict]:
    """The `data_config` a `.keras` file's model records (from its `config.json`, without building the model);
    None for a file that records none (saved before keras_vit 0.3) or is not a readable `.keras` file."""
    try:
        with zipfile.ZipFile(path) as archive:
            config = json.loads(archive.read("config.json"))
    except (OSError, KeyError, ValueError, zipfile.BadZipFile):
        return None
    inner = config.get("config") if isinstance(config, dict) else None
    return inner.get("data_config") if isinstance(inner, dict) else None


def _h5_shapes(path: str) -> list:
    """Shapes of every array stored in a Keras `.weights.h5` file."""
    import h5py

    shapes = []
    try:
        with h5py.File(path, "r") as f:
            f.visititems(lambda _, obj: shapes.append(tuple(obj.shape)) if isinstance(obj, h5py.Dataset) else None)
    except OSError as e:
        raise ValueError(f"weights file {path!r} is not a readable .weights.h5 file: {e}") from e
    return shapes


def load_weights_h5(model: keras.Model, path: str) -> keras.Model:
    """Keras' own loader, after checking the file holds exactly the model's weights (Keras itself loads a
    file with extra blocks without a word); all-or-nothing."""
    have, want = sorted(_h5_shapes(path)), sorted(tuple(v.shape) for v in model.weights)
    if have != want:
        raise ValueError(
            f"weights file {path!r} holds {len(have)} arrays, model {model.name!r} has {len(want)} "
            f"weights{'' if len(have) != len(want) else ' of other shapes'}: it was saved from "
            "another architecture (no weight was changed)."
        )

    def load() -> None:
        try:
            keras.Model.load_weights(model, path)
        except (ValueError, KeyError) as e:
            raise ValueError(
                f"weights file {path!r} does not fit model {model.name!r} (no weight was changed): {e}"
            ) from e

    return all_or_nothing(model, load, path)
