"""Progress of a long step (a decode check, a batch-inference run, an evaluation): a bar on a terminal, a line
every few seconds in a log, each with the rate and the time left.

A run of hours in a notebook or under a scheduler shows where it is without a dependency: on a terminal the
bar is redrawn in place on stderr; elsewhere (a log file, a pipe) one line is written per `every` seconds,
so logs stay short.
"""

from __future__ import annotations

import sys
import time
from typing import Callable, Iterable, Iterator, Optional


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


class Progress:
    """Counts work done out of `total` (None: unknown) and reports it with a rate and an ETA.

    Args:
        what: what is being done, e.g. "embedding photos/".
        total: the number of units in all, or None.
        unit: the units' name ("images", "batches").
        every: seconds between two reports.
        log: where lines go (e.g. `logger.info`); default stderr, redrawn in place on a terminal.
        done: units already done before this run (a resumed run): counted in the total, not in the rate.
    """

    def __init__(
        self,
        what: str,
        total: Optional[int],
        unit: str = "items",
        every: float = 10.0,
        log: Optional[Callable[[str], None]] = None,
        done: int = 0,
    ):
        self.what, self.total, self.unit, self.every, self.log = what, total, unit, every, log
        self.done = self._start_done = done
        self._start = self._last = time.monotonic()
        self._bar = log is None and sys.stderr.isatty()

    def rate(self) -> float:
        """Units per second since this run started."""
        elapsed = time.monotonic() - self._start
        return (self.done - self._start_done) / elapsed if elapsed > 0 else 0.0

    def line(self) -> str:
        rate = self.rate()
        text = f"{self.what}: {self.done:,}" + (f" of {self.total:,}" if self.total is not None else "")
        text += f" {self.unit}, {rate:,.1f} {self.unit}/s"
        if self.total is not None and rate > 0 and self.done < self.total:
            text += f", {_duration((self.total - self.done) / rate)} left"
        return text

    def update(self, count: int = 1) -> None:
        """Adds `count` units; reports when `every` seconds have passed since the last report."""
        self.done += count
        now = time.monotonic()
        if now - self._last >= (0.5 if self._bar else self.every):
            self._last = now
            self._emit()

    def _emit(self, final: bool = False) -> None:
        if self.log is not None:
            self.log(self.line())
        elif self._bar:
            print("\r" + self.line(), end="\n" if final else "", file=sys.stderr, flush=True)
        else:
            print(self.line(), file=sys.stderr, flush=True)

    def close(self) -> None:
        """The last report, with the total time."""
        if self.done != self._start_done or self.total:
            self.what = f"{self.what} (done in {_duration(time.monotonic() - self._start)})"
            self._emit(final=True)


def counted(
    items: Iterable,
    what: str,
    total: Optional[int] = None,
    unit: str = "items",
    every: float = 30.0,
    log: Optional[Callable[[str], None]] = None,
) -> Iterator:
    """`items` as they are consumed, reported by a `Progress` (one unit per item)."""
    progress = Progress(what, total, unit=unit, every=every, log=log)
    for item in items:
        yield item
        progress.update(1)
    progress.close()
