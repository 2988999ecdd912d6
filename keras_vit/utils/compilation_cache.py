"""A persistent XLA compilation cache, so that a second process skips the compilation of the first.

On JAX every `predict`, `fit` step or `jax.jit` compiles with XLA the first time a shape is seen; JAX can keep the
compiled programs on disk and reuse them in later processes (`jax_compilation_cache_dir`). JAX keys each entry by
the program, the compile options, `XLA_FLAGS`, the jax / jaxlib versions and the devices, so an entry is only
ever used for the program it was compiled from; anything else recompiles.

On by default: `import keras_vit` on the JAX backend points JAX's cache at `default_directory()`
(`enable_by_default`), unless

- `KERAS_VIT_COMPILATION_CACHE=0` (or `false`, `no`, `off`) is set: keras_vit then turns no cache on by itself,
  neither at import nor in its commands;
- the process already has a cache directory (`JAX_COMPILATION_CACHE_DIR`, or `jax.config` set before the import):
  that one is kept;
- the directory cannot be written: the process runs without one.

The cache keeps programs that took `MIN_COMPILE_SECONDS` or more to compile and, where `filelock` is installed
(huggingface_hub's dependency), evicts the least recently used beyond `MAX_BYTES`; settings a user made before the
import are kept. `enable_compilation_cache(directory)` turns it on explicitly (another directory, or after
`KERAS_VIT_COMPILATION_CACHE=0`); the commands' `--no-compilation_cache` turns it off for their process.
TensorFlow has no such cache for the graphs it traces (its `predict` runs eagerly until a graph pays:
`keras_vit.vit.predict_function`), so on the other backends all of this does nothing.
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
JAX_MIN_COMPILE_SECONDS = 1.0  # JAX's own default: a value the user did not change
MAX_BYTES = 2 * 1024**3  # a ViT-B/16 prediction's entry is ~10 MB, its training step's ~20 MB
SWITCH = "KERAS_VIT_COMPILATION_CACHE"
_CACHE_SUFFIX, _ATIME_SUFFIX = "-cache", "-atime"  # JAX's entry files: the program, its last use
_OFF = ("0", "false", "no", "off")


def wanted_by_default() -> bool:
    """False when `KERAS_VIT_COMPILATION_CACHE` turns keras_vit's own cache off."""
    return os.environ.get(SWITCH, "").strip().lower() not in _OFF


def default_directory() -> str:
    """`xla_cache` in keras_vit's cache (`$KERAS_VIT_CACHE_DIR/keras_vit`, else under the Keras cache, `$KERAS_HOME`
    or ~/.keras: `keras_vit.utils.cache_home`)."""
    from keras_vit.utils.cache_home import cache_home

    return os.path.join(cache_home(), "xla_cache")


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
    jax.config.update("jax_enable_compilation_cache", True)
    _configure(jax, directory)
    compilation_cache.reset_cache()  # a process that already compiled has set its cache up without a directory
    logger.info("XLA compilation cache in %s", directory)
    return directory


def enable_by_default() -> Optional[str]:
    """What `import keras_vit` does: JAX's cache in `default_directory()`, unless the module docstring's
    exceptions apply. JAX creates the directory when it first stores a program; where it exists, entries another
    process left without a last-use time are dated (`_date_undated_entries`: one listing of the folder).

    Returns:
      The directory when this call turned the cache on, else None.
    """
    if keras.backend.backend() != "jax" or not wanted_by_default():
        return None
    import jax

    if jax.config.jax_compilation_cache_dir:  # the user's own cache
        return None
    directory = os.path.abspath(default_directory())
    if not _creatable(directory):
        logger.debug("no XLA compilation cache: %s cannot be written", directory)
        return None
    _configure(jax, directory)
    return directory


def _configure(jax, directory: str) -> None:
    """Both ways of turning the cache on set it up alike: programs from `MIN_COMPILE_SECONDS`, at most `MAX_BYTES`
    (where `filelock` is there; a user's own settings kept), in `directory`."""
    if jax.config.jax_persistent_cache_min_compile_time_secs == JAX_MIN_COMPILE_SECONDS:
        jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_COMPILE_SECONDS)
    if jax.config.jax_compilation_cache_max_size == -1 and _has_filelock():
        jax.config.update("jax_compilation_cache_max_size", MAX_BYTES)
    if jax.config.jax_compilation_cache_max_size != -1:
        _date_undated_entries(directory)
    jax.config.update("jax_compilation_cache_dir", directory)


def _date_undated_entries(directory: str) -> None:
    """Gives each entry without a last-use time (`<key>-atime`, 8 little-endian bytes of nanoseconds) its file's
    modification time. A process that caches without a size limit writes no such file, and one with a limit reads
    every entry's before it stores a program: one undated entry, and that process could store nothing more."""
    try:
        names = set(os.listdir(directory))
    except OSError:  # not there yet: JAX makes it
        return
    for name in names:
        if not name.endswith(_CACHE_SUFFIX):
            continue
        key = name[: -len(_CACHE_SUFFIX)]
        if key + _ATIME_SUFFIX in names:
            continue
        try:
            stamp = os.stat(os.path.join(directory, name)).st_mtime_ns
            with open(os.path.join(directory, key + _ATIME_SUFFIX), "wb") as f:
                f.write(int(stamp).to_bytes(8, "little"))
        except OSError as e:  # a speed-up only: the entry stays undated
            logger.debug("could not date the cache entry %s: %s", name, e)


def disable_compilation_cache() -> None:
    """No persistent cache for the rest of this process (JAX; nothing on the other backends)."""
    if keras.backend.backend() != "jax":
        return
    import jax

    jax.config.update("jax_enable_compilation_cache", False)


def _creatable(directory: str) -> bool:
    """Whether `directory` exists and can be written, or its nearest existing parent can (JAX makes the rest)."""
    path = directory
    while not os.path.exists(path):
        parent = os.path.dirname(path)
        if parent == path:
            return False
        path = parent
    return os.path.isdir(path) and os.access(path, os.W_OK | os.X_OK)


def _has_filelock() -> bool:
    import importlib.util

    return importlib.util.find_spec("filelock") is not None


def add_flag(parser: "argparse.ArgumentParser") -> None:
    """`--compilation_cache` / `--no-compilation_cache` on a command's parser (on by default)."""
    parser.add_argument(
        "--compilation_cache",
        action=argparse.BooleanOptionalAction,
        default=wanted_by_default(),
        help="JAX: keep XLA's compiled programs for the next run (keras_vit.enable_compilation_cache; default on "
        f"unless {SWITCH}=0)",
    )


def enable_for_command(wanted: bool) -> None:
    """A command's cache, when `wanted` (else none, not even the import's default): a speed-up only, so a
    directory that cannot be written is a warning on stderr and the command goes on without a cache."""
    import sys

    if not wanted:
        disable_compilation_cache()
        return
    try:
        enable_compilation_cache()
    except OSError as e:
        print(f"warning: no compilation cache ({e})", file=sys.stderr)
