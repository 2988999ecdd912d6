"""A persistent XLA compilation cache, so that a second process skips the compilation of the first.

On JAX every `predict`, `fit` step or `jax.jit` compiles with XLA the first time a shape is seen; JAX can keep the compiled programs on disk and reuse them in later
processes (`jax_compilation_cache_dir`). `enable_compilation_cache()` turns that on for the JAX backend; the
`python -m keras_vit.predict` CLI does so by default. TensorFlow's first `predict` is spent tracing the Python
function into a graph, which no cache keeps, so on other backends this does nothing and returns None.
"""

from __future__ import annotations

import argparse
import logging
import os
from typing import Optional

import keras

logger = logging.getLogger("keras_vit")

# programs that compile faster than this are not worth a file (JAX's default is 1 s, which would miss some
# ViT predictions on a fast machine)
MIN_COMPILE_SECONDS = 0.2


def default_directory() -> str:
    """`$KERAS_VIT_CACHE_DIR/keras_vit/xla_cache`, else under the Keras cache (`$KERAS_HOME`, ~/.keras), where
    keras_vit keeps downloaded releases too."""
    root = os.environ.get("KERAS_VIT_CACHE_DIR") or os.environ.get("KERAS_HOME") or os.path.expanduser("~/.keras")
    return os.path.join(root, "keras_vit", "xla_cache")


def enable_compilation_cache(directory: Optional[str] = None) -> Optional[str]:
    """Keeps XLA's compiled programs in `directory` (default: `default_directory()`) for later processes.

    Args:
      directory: where the cache lives; created if missing. Entries are keyed by the program, the JAX version
        and the device, so a stale or foreign entry is never used, only recompiled.
    Returns:
      The directory on the JAX backend; None on the others (nothing to cache there).
    """
    if keras.backend.backend() != "jax":
        return None
    import jax
    from jax.experimental.compilation_cache import compilation_cache

    directory = os.path.abspath(directory or default_directory())
    os.makedirs(directory, exist_ok=True)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_COMPILE_SECONDS)
    jax.config.update("jax_compilation_cache_dir", directory)
    compilation_cache.reset_cache()  # a process that already compiled has set its cache up without a directory
    logger.info("XLA compilation cache in %s", directory)
    return directory


def add_flag(parser: "argparse.ArgumentParser") -> None:
    """`--compilation_cache` / `--no-compilation_cache` on a command's parser (on by default)."""
    parser.add_argument(
        "--compilation_cache",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="JAX: keep XLA's compiled programs for the next run (keras_vit.enable_compilation_cache)",
    )


def enable_for_command(wanted: bool) -> None:
    """A command's cache, when `wanted`: a speed-up only, so a directory that cannot be written is a warning on
    stderr and the command goes on without a cache."""
    import sys

    if not wanted:
        return
    try:
        enable_compilation_cache()
    except OSError as e:
        print(f"warning: no compilation cache ({e})", file=sys.stderr)
