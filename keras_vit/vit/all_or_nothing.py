"""All-or-nothing weight assignment: a load that fails, or leaves NaN/Inf behind, changes no weight."""

from __future__ import annotations

from typing import Callable

import keras
import numpy as np


def all_or_nothing(model: keras.Model, load: Callable[[], None], source) -> keras.Model:
    """Runs `load()`, which assigns `model`'s weights; if it raises, or leaves a weight holding NaN/Inf, every
    weight is put back as it was before the error propagates. The one snapshot-and-restore of the package."""
    saved = [np.array(keras.ops.convert_to_numpy(v)) for v in model.weights]

    def restore() -> None:
        for variable, value in zip(model.weights, saved):
            variable.assign(value)

    try:
        load()
    except BaseException:
        restore()
        raise
    bad = [v.path for v in model.weights if not np.all(np.isfinite(keras.ops.convert_to_numpy(v)))]
    if bad:
        restore()
        raise ValueError(
            f"weights file {source!r}: {len(bad)} array(s) hold non-finite values (NaN/Inf), e.g. "
            f"{bad[0]} -- a diverged or damaged file (no weight was changed)."
        )
    return model
