"""Code blocks of the Markdown docs, and the stand-ins that let a test run them offline."""

from __future__ import annotations

import re
from typing import List, Tuple

_FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


def blocks(path: str) -> List[Tuple[str, str]]:
    """[(language, code)] of every fenced block of the Markdown file `path`, in order."""
    with open(path) as f:
        return [(m.group(1), m.group(2)) for m in _FENCE.finditer(f.read())]


def substitute(code: str, stand_ins: dict) -> str:
    """`code` with each `old -> new` of `stand_ins` applied; an `old` missing from the code is an error, so a
    doc edit cannot silently leave a stand-in unused (and the doc untested)."""
    for old, new in stand_ins.items():
        if old not in code:
            raise AssertionError(f"stand-in {old!r} no longer appears in the block:\n{code}")
        code = code.replace(old, new)
    return code
