"""Optional dependencies: a feature whose package is missing says which extra installs it, in one line.

`pip install keras-vision-transformer` brings the model, the weights and batch inference on any Keras backend;
the rest comes with extras (setup.cfg): `[tensorflow]`, `[jax]`, `[torch]` (a backend), `[train]` (the
recipes), `[export]` (the runtimes of the export formats), `[hub]` (`hf-hub:` handles), `[inference]`
(Parquet output), `[text]` (the tokenizers of image-text models). A bare `ModuleNotFoundError: No module named 'onnx'` does not say that.
"""

from __future__ import annotations

import importlib.util
from typing import Iterable


def missing(modules: Iterable[str]) -> list:
    """The top-level modules of `modules` that cannot be imported here (a module set to None in `sys.modules`,
    as a blocked import, counts as missing)."""
    out = []
    for name in modules:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            out.append(name)
    return out


def require(modules: Iterable[str], extra: str, what: str, then: str = "") -> None:
    """Raises ImportError naming `what`, the missing modules and `pip install 'keras-vision-transformer[extra]'`
    (followed by `then`, a further install step, where the extra cannot hold everything) when any of `modules`
    is missing; nothing otherwise."""
    absent = missing(modules)
    if absent:
        step = f", then {then}" if then else ""
        raise ImportError(f"{what} needs {', '.join(absent)}: pip install 'keras-vision-transformer[{extra}]'{step}")
