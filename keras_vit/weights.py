"""The one route for `weights=`: a release name, an official `.npz`, a `.keras` or a `.weights.h5` file.

Every load is all-or-nothing: a file that does not fit leaves every weight of the
model as it was.
"""

from __future__ import annotations

import os
import re
import warnings
import zipfile
from typing import Optional, Union

import keras
import numpy as np

from keras_vit import checkpoints, releases, safetensors_io

KERAS_SUFFIXES = (".keras", ".weights.h5")


def check_weights_argument(weights) -> Optional[str]:
    """`weights` as a string, after checking it names a release or an existing file."""
    if weights is None:
        return None
    if not isinstance(weights, (str, os.PathLike)):
        raise ValueError(f"weights must be None, a file path or a release name, got {type(weights).__name__}.")
    weights = os.fspath(weights)
    if not os.path.exists(weights) and releases.is_release_name(weights):  # a local file of that name wins
        return weights
    if not os.path.exists(weights):
        if re.match(r"^[A-Za-z0-9_]+_\d+-i(1k|21k)", os.path.basename(weights)):  # an AugReg name, misspelt
            from keras_vit import augreg

            augreg.parse_name(weights)  # raises, naming the scheme and the close recommended names
        if not weights.endswith((".npz", ".safetensors") + KERAS_SUFFIXES):  # meant as a name, not a file
            close = releases.close_matches(weights)
            hint = (f"did you mean {', '.join(map(repr, close))}?" if close else
                    f"dataset-style names: {', '.join(releases.dataset_names())} (all: keras_vit.releases."
                    "release_names()).")
            raise ValueError(f"weights={weights!r} is neither a file nor a release name; {hint}")
        raise FileNotFoundError(
            f"weights file {weights!r} does not exist (expected None, a path to a .keras, .weights.h5, .npz or "
            f".safetensors file, an AugReg filename, or a release name; see keras_vit.releases.release_names()).")
    if os.path.isdir(weights):
        if not safetensors_io.is_transformers_dir(weights):
            raise ValueError(f"weights directory {weights!r} is not a transformers ViT directory (no config.json).")
        return weights
    if not (weights.endswith((".npz", ".safetensors")) or weights.endswith(KERAS_SUFFIXES)):
        raise ValueError(f"Unsupported weights file {weights!r}: expected a .keras, .weights.h5, .npz or "
                         ".safetensors file, or a transformers directory.")
    return weights


def read_foreign(path: str, num_heads=None) -> tuple:
    """({official key: array}, constructor keywords the source implies) of a timm `.safetensors` file or a
    `transformers` directory."""
    if os.path.isdir(path):
        return safetensors_io.read_transformers(path)
    return safetensors_io.read_timm(path, num_heads)


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


def _load_h5(model: keras.Model, path: str) -> None:
    """Keras' own loader, after checking the file holds exactly the model's weights (Keras itself loads a
    file with extra blocks without a word)."""
    have, want = sorted(_h5_shapes(path)), sorted(tuple(v.shape) for v in model.weights)
    if have != want:
        raise ValueError(f"weights file {path!r} holds {len(have)} arrays, model {model.name!r} has {len(want)} "
                         f"weights{'' if len(have) != len(want) else ' of other shapes'}: it was saved from "
                         "another architecture (no weight was changed).")
    saved = [np.array(keras.ops.convert_to_numpy(v)) for v in model.weights]
    try:
        model.load_weights(path)
    except BaseException as e:
        for v, value in zip(model.weights, saved):
            v.assign(value)
        if isinstance(e, (ValueError, KeyError)):
            raise ValueError(f"weights file {path!r} does not fit model {model.name!r} "
                             f"(no weight was changed): {e}") from e
        raise


def read_keras_file(path: str) -> keras.Model:
    """The `keras_vit.VisionTransformer` saved in a `.keras` file, or a ValueError naming what it holds."""
    if not zipfile.is_zipfile(path):
        size = os.path.getsize(path)
        raise ValueError(f"{path!r} is not a .keras file: {'it is empty' if not size else 'not a zip archive'} "
                         f"({size} bytes; truncated or another format?).")
    try:
        source = keras.models.load_model(path, compile=False)
    except (ValueError, KeyError, OSError, zipfile.BadZipFile) as e:
        raise ValueError(f"{path!r} is not a readable .keras file: {e}") from e
    if not hasattr(source, "vit_config"):
        raise ValueError(f"{path!r} holds a {type(source).__name__}, not a keras_vit.VisionTransformer "
                         "(re-save it from a model built by keras_vit).")
    return source


def load_weights(model: keras.Model, weights: Union[str, os.PathLike], **npz_kwargs) -> keras.Model:
    """Loads `weights` (release name, `.npz`, `.keras`, `.weights.h5`) into `model`; all-or-nothing.

    `.npz` and `.keras` go through the official layout's rules (position embeddings resized, a
    different head zero-initialised with a warning); `.weights.h5` must match exactly.
    `npz_kwargs` (`resize_posemb`, `reset_head`, `old_grid`) go to `keras_vit.load_npz`.
    """
    weights = check_weights_argument(weights)
    if weights is None:
        return model
    if releases.is_release_name(weights):
        weights = releases.fetch(weights, model)
    if weights.endswith(".npz"):
        checkpoints.load_npz(model, weights, **npz_kwargs)  # validates everything before assigning
    elif weights.endswith(".safetensors") or os.path.isdir(weights):
        params, implied = read_foreign(weights, model.vit_config.num_heads)
        if implied["gelu_approximate"] != model.gelu_approximate:
            warnings.warn(f"{weights!r} was trained with {'tanh' if implied['gelu_approximate'] else 'exact'} "
                          f"GELU but model {model.name!r} uses the other form; build it with gelu_approximate="
                          f"{implied['gelu_approximate']} (keras_vit.load_model does) for the source's logits.")
        checkpoints.load_params(model, params, weights, **npz_kwargs)
    elif npz_kwargs:
        raise ValueError(f"{sorted(npz_kwargs)} apply to .npz checkpoints only, not {weights!r}.")
    elif weights.endswith(".keras"):  # through the official layout: same rules as an .npz, all-or-nothing
        source = read_keras_file(weights)  # its own grid is known: a (8, 2) file never lands raw in a (2, 8) model
        checkpoints.load_params(model, checkpoints.model_params(source), weights, old_grid=source.grid_size)
    else:
        _load_h5(model, weights)
    return model
