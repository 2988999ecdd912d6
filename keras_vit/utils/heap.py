"""Giving the C heap's free pages back to the operating system while a training step compiles.

XLA's compiler (TensorFlow's and JAX's alike) allocates and frees several hundred MB while it compiles a
ViT-B/16 training step. glibc keeps what is freed in its arenas for later reuse, but the step's own large
buffers are then mapped fresh from the kernel, so the compiler's freed pages stay resident for the whole run
and add to its peak (0.22–0.27 GB of a ViT-B/16 batch-16 step's 5.3 GB on TensorFlow, 0.1–0.15 GB on JAX;
docs/benchmarks-history.md, "Training memory"). glibc's `malloc_trim` returns them; TensorFlow and JAX do not call it.

`trim()` calls it once. `returning_freed_memory()` calls it every `interval` seconds from a daemon thread
while a block runs, and once more at the end, so that what the compilation frees is given back before the
first execution takes its own buffers. Where the C library has no `malloc_trim` (macOS, musl, Windows)
both do nothing. Numbers computed inside are not affected.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from typing import Callable, Iterator, Optional

DEFAULT_INTERVAL = 0.1  # seconds: short against a compilation (seconds), long against one trim (~3 ms)


@functools.lru_cache(maxsize=None)
def _malloc_trim() -> Optional[Callable[[int], int]]:
    """glibc's `malloc_trim(pad)`, or None where the C library has none. (`ctypes` is imported here, on first
    use: `import keras_vit` imports nothing beyond Keras.)"""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        function = libc.malloc_trim
    except (OSError, AttributeError):
        return None
    function.argtypes, function.restype = [ctypes.c_size_t], ctypes.c_int
    return function


def available() -> bool:
    """Whether this process's C library can give free heap pages back (glibc's `malloc_trim`)."""
    return _malloc_trim() is not None


def trim() -> bool:
    """Gives every free page of every malloc arena back to the operating system, once.

    Returns:
      True when glibc released memory, False when there was nothing to release or no `malloc_trim`.
    """
    function = _malloc_trim()
    return bool(function(0)) if function is not None else False


def _check_interval(interval: float) -> None:
    if not interval > 0:
        raise ValueError(f"interval must be > 0 seconds, got {interval!r}")


@contextlib.contextmanager
def returning_freed_memory(interval: float = DEFAULT_INTERVAL) -> Iterator[None]:
    """While the block runs, gives freed heap pages back every `interval` seconds; once more when it ends.

    Meant for the first call of a compiled training step, whose compilation frees memory that would
    otherwise stay resident beside the step's buffers. A no-op without `malloc_trim`.

    Args:
      interval: seconds between two trims, > 0.
    """
    _check_interval(interval)
    if not available():
        yield
        return
    done = threading.Event()

    def keep_trimming():
        while not done.wait(interval):
            trim()

    thread = threading.Thread(target=keep_trimming, name="keras_vit-heap-trim", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
        trim()


def first_call_returning_freed_memory(function: Callable, interval: float = DEFAULT_INTERVAL) -> Callable:
    """`function`, whose first call runs inside `returning_freed_memory(interval)` (the call that compiles).

    Later calls go straight to `function`. The wrapper keeps `function` as `__wrapped__`. A bad `interval` is
    refused here, not at the first call.
    """
    _check_interval(interval)
    first = [True]

    @functools.wraps(function)
    def call(*args, **kwargs):
        if not first[0]:
            return function(*args, **kwargs)
        with returning_freed_memory(interval):
            result = function(*args, **kwargs)
        first[0] = False
        return result

    return call
