"""The module paths of keras_vit 0.2, kept working for one release with a DeprecationWarning.

0.3 moved the flat package into rooms (`vit/`, `weights/`, `analysis/`, `utils/`). Importing an old path
(`import keras_vit.checkpoints`, `from keras_vit.loading import load_model`, `python -m keras_vit.inspect`)
gives a module that forwards every attribute to the new modules listed here, in order.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
import warnings
from typing import Optional

MOVED = {
    "keras_vit.arguments": ("keras_vit.vit.arguments",),
    "keras_vit.attention": ("keras_vit.vit.attention",),
    "keras_vit.configs": ("keras_vit.vit.table",),
    "keras_vit.initializers": ("keras_vit.vit.initializers",),
    "keras_vit.layers": ("keras_vit.vit.layers",),
    "keras_vit.models": ("keras_vit.vit.model", "keras_vit.applications"),
    "keras_vit.position_embedding": ("keras_vit.vit.position_embedding",),
    "keras_vit.resnet": ("keras_vit.vit.resnet",),
    "keras_vit.sharding": ("keras_vit.vit.sharding",),
    "keras_vit.augreg": ("keras_vit.weights.augreg",),
    "keras_vit.checkpoints": ("keras_vit.weights.official", "keras_vit.weights.releases"),
    "keras_vit.layouts": ("keras_vit.weights.layouts",),
    "keras_vit.loading": ("keras_vit.weights.load",),
    "keras_vit.releases": ("keras_vit.weights.releases",),
    "keras_vit.safetensors_io": ("keras_vit.weights.safetensors_files",),
    "keras_vit.fewshot": ("keras_vit.analysis.fewshot",),
    "keras_vit.images": ("keras_vit.analysis.images",),
    "keras_vit.inspect": ("keras_vit.analysis.inspect",),
    "keras_vit.plots": ("keras_vit.analysis.plots",),
    "keras_vit.summary": ("keras_vit.analysis.summary",),
    "keras_vit.atomic": ("keras_vit.utils.atomic",),
    "keras_vit.validate": ("keras_vit.utils.validate",),
}


def _warn(old: str) -> None:
    new = " and ".join(MOVED[old])
    warnings.warn(f"{old} is deprecated and will be removed in keras_vit 0.4; use {new}.", DeprecationWarning,
                  stacklevel=3)


class _Forwarder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds the old paths; their modules forward attribute look-ups to the new ones."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in MOVED:
            return None
        origin = importlib.util.find_spec(MOVED[fullname][0]).origin
        return importlib.machinery.ModuleSpec(fullname, self, origin=origin)

    def create_module(self, spec):
        return types.ModuleType(spec.name)

    def exec_module(self, module) -> None:
        targets = [importlib.import_module(name) for name in MOVED[module.__name__]]
        module.__doc__ = f"Deprecated alias of {' and '.join(MOVED[module.__name__])}."

        def forward(attribute: str):
            for target in targets:
                if hasattr(target, attribute):
                    return getattr(target, attribute)
            raise AttributeError(f"module {module.__name__!r} has no attribute {attribute!r}")

        module.__getattr__ = forward
        module.__dir__ = lambda: sorted({a for t in targets for a in dir(t)})
        _warn(module.__name__)

    def get_code(self, fullname):
        """`python -m <old path>` runs the new module as `__main__`."""
        _warn(fullname)
        return importlib.util.find_spec(MOVED[fullname][0]).loader.get_code(MOVED[fullname][0])


_FORWARDER = _Forwarder()


def install() -> None:
    """Puts the forwarder on `sys.meta_path` (once)."""
    if _FORWARDER not in sys.meta_path:
        sys.meta_path.append(_FORWARDER)


def resolve(name: str) -> Optional[types.ModuleType]:
    """The (deprecated) module of an old path, imported on first use; None for any other name."""
    return importlib.import_module(name) if name in MOVED else None
