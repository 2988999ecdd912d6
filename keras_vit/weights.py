"""The one route for `weights=`: a release name, an official `.npz`, a `.keras` or a `.weights.h5` file.

Every load is all-or-nothing: a file that does not fit leaves every weight of the
model as it was.
"""

from __future__ import annotations

import os
from typing import Optional, Union

import keras
import numpy as np

from keras_vit import checkpoints, releases

KERAS_SUFFIXES = (".keras", ".weights.h5")


def check_weights_argument(weights) -> Optional[str]:
    """`weights` as a string, after checking it names a release or an existing file."""
    if weights is None:
        return None
    if not isinstance(weights, (str, os.PathLike)):
        raise ValueError(f"weights must be None, a file path or a release name, got {type(weights).__name__}.")
    weights = os.fspath(weights)
    if releases.is_release_name(weights):
        return weights
    if not os.path.exists(weights):
        raise FileNotFoundError(
            f"weights file {weights!r} does not exist (expected None, a path to a .keras, .weights.h5 or .npz "
            f"file, or one of the release names {', '.join(releases.release_names())}).")
    if not (weights.endswith(".npz") or weights.endswith(KERAS_SUFFIXES)):
        raise ValueError(f"Unsupported weights file {weights!r}: expected a .keras, .weights.h5 or .npz file.")
    return weights


def _all_or_nothing(model: keras.Model, load) -> None:
    """Runs `load()`; if it raises, puts every variable of `model` back as it was."""
    saved = [np.array(keras.ops.convert_to_numpy(v)) for v in model.weights]
    try:
        load()
    except BaseException:
        for v, value in zip(model.weights, saved):
            v.assign(value)
        raise


def load_weights(model: keras.Model, weights: Union[str, os.PathLike], **npz_kwargs) -> keras.Model:
    """Loads `weights` (release name, `.npz`, `.keras`, `.weights.h5`) into `model`; all-or-nothing.

    `npz_kwargs` (`resize_posemb`, `reset_head`, `old_grid`) go to `keras_vit.load_npz`.
    """
    weights = check_weights_argument(weights)
    if weights is None:
        return model
    if releases.is_release_name(weights):
        weights = releases.fetch(weights, model)
    if weights.endswith(".npz"):
        checkpoints.load_npz(model, weights, **npz_kwargs)  # validates everything before assigning
    else:
        if npz_kwargs:
            raise ValueError(f"{sorted(npz_kwargs)} apply to .npz checkpoints only, not {weights!r}.")
        try:
            _all_or_nothing(model, lambda: model.load_weights(weights))
        except (ValueError, KeyError) as e:
            raise ValueError(f"weights file {weights!r} does not fit model {model.name!r} "
                             f"(no weight was changed): {e}") from e
    return model
