"""Importing Keras with an answer in one line when its backend cannot load.

Keras picks its backend once, at its first import: `KERAS_BACKEND`, else the "backend" field of `keras.json` in
`$KERAS_HOME` (default `~/.keras`), else "tensorflow". When that backend's package is missing or broken, Keras
raises from deep inside its import and does not fall back to another backend; keras_vit says which backend was
tried, why it failed, and what fixes it.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import sys
import tempfile
from types import ModuleType
from typing import Iterator, Tuple

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


# keras_vit's command-line programs, as `python -m <module>` or their console scripts (setup.cfg)
CLI_MODULES = (
    "keras_vit.predict",
    "keras_vit.inference",
    "keras_vit.analysis.predict",
    "keras_vit.analysis.inference",
    "keras_vit.zero_shot",
    "keras_vit.analysis.zero_shot",
    "hub_export",
    "hub_export.__main__",
    "recipes.train",
)
CLI_SCRIPTS = ("keras-vit-train", "keras-vit-export", "keras-vit-predict", "keras-vit-inference")


def running_a_cli() -> bool:
    """Whether this process is one of keras_vit's command-line programs (read from the command line it was
    started with, before any of its code runs)."""
    return main_module() in CLI_MODULES or os.path.basename(sys.argv[0] if sys.argv else "") in CLI_SCRIPTS


def main_module() -> str:
    """The module this process runs as `python -m <module>`, "" otherwise: the interpreter's own options are what
    the original command line holds before the program's arguments (`sys.argv` after its first entry)."""
    argv = list(getattr(sys, "orig_argv", []))
    options = argv[1 : len(argv) - len(sys.argv) + 1]
    return options[-1] if len(options) >= 2 and options[-2] == "-m" else ""


# the start-up notes TensorFlow's CUDA build writes to stderr on a machine without a GPU; its absl logging writes
# them before it reads `TF_CPP_MIN_LOG_LEVEL` ("All log messages before absl::InitializeLog() ...")
START_UP_NOTES = (
    "All log messages before absl::InitializeLog()",
    "cudart_stub.cc",
    "cpu_feature_guard.cc",
    "To enable the following instructions",
    "rebuild TensorFlow with the appropriate compiler flags",
    "oneDNN custom operations are on",
)


def quiet_in_a_cli() -> None:
    """In keras_vit's own command-line programs only (a library import changes no process-wide logging):
    TensorFlow's C++ log off unless `TF_CPP_MIN_LOG_LEVEL` says otherwise (read at TensorFlow's first import, the
    only time it is read: it silences the `failed call to cuInit` error a CUDA build logs on a machine without a
    GPU, whose own errors still reach the user as Python exceptions)."""
    if running_a_cli():
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


@contextlib.contextmanager
def without_start_up_notes(active: bool) -> Iterator[None]:
    """Runs the block (Keras' first import) with the process's stderr (file descriptor 2, where TensorFlow's C++
    code writes) captured, then writes back every line but `START_UP_NOTES`; everything when the block raises.
    Inactive (`active=False`) it does nothing."""
    if not active:
        yield
        return
    sys.stderr.flush()
    saved, captured = os.dup(2), tempfile.TemporaryFile()
    os.dup2(captured.fileno(), 2)
    failed = True
    try:
        yield
        failed = False
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        captured.seek(0)
        lines = captured.read().decode("utf-8", "replace").splitlines(keepends=True)
        captured.close()
        kept = lines if failed else [line for line in lines if not any(n in line for n in START_UP_NOTES)]
        if kept:
            sys.stderr.write("".join(kept))
            sys.stderr.flush()


quiet_in_a_cli()
with without_start_up_notes(running_a_cli()):
    keras = import_keras()
