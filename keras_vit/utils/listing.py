"""Listing the files below a folder with their sizes and modification times, at one `os.scandir` per folder
and one `stat` per file: the only per-file work a folder of a million images costs before anything is read.
"""

from __future__ import annotations

import os
from typing import Callable, List, Tuple


def files_below(
    directory: str,
    start: str = "",
    keep: Callable[[str], bool] = lambda name: True,
    name_check: Callable[[str, str], str] = lambda parent, name: name,
) -> List[Tuple[str, int, int]]:
    """(path relative to `directory`, size in bytes, modification time in ns) of every file below
    `directory/start` whose name `keep` accepts, unsorted. Hidden entries are left out and linked folders are
    not followed (as `os.walk`); `name_check(directory, name)` may refuse a name by raising."""
    found, pending = [], [start]
    while pending:
        rel_dir = pending.pop()
        with os.scandir(os.path.join(directory, rel_dir)) as entries:
            for entry in entries:
                if entry.name.startswith("."):
                    continue
                rel = os.path.join(rel_dir, name_check(directory, entry.name))
                if entry.is_dir(follow_symlinks=False):
                    pending.append(rel)
                elif keep(entry.name) and entry.is_file():
                    stat = entry.stat()
                    found.append((rel, stat.st_size, stat.st_mtime_ns))
    return found


def utf8_name(parent: str, name: str) -> str:
    """`name` if it is valid UTF-8; a file system's undecodable bytes (Python's surrogate escapes) are refused
    naming the path, before anything is read: file lists, class names, records and output shards are kept as
    UTF-8 text, and such a name would fail only when the first of them is written."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(
            f"{os.path.join(parent, name)!r} has a name that is not valid UTF-8: rename it (file lists, class "
            "names and outputs are kept as UTF-8 text)."
        ) from None
    return name
