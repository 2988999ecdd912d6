"""Writes the tables of docs/ that are derived from the code: the record's fields in docs/models.md (between
its `variant fields` markers), from `keras_vit.vit.variant.Variant.markdown()`:

    python tools/make_docs_tables.py

`tests/test_house.py` fails when the page and the record differ.
"""

from __future__ import annotations

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from keras_vit.vit.variant import Variant  # noqa: E402

PAGE = os.path.join(ROOT, "docs", "models.md")
BEGIN, END = "<!-- variant fields: begin -->", "<!-- variant fields: end -->"


def rendered(text: str) -> str:
    """`text` with the block between the markers replaced by the record's table."""
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{Variant.markdown()}\n{END}{tail}"


def main() -> None:
    with open(PAGE) as f:
        text = f.read()
    with open(PAGE, "w") as f:
        f.write(rendered(text))


if __name__ == "__main__":
    main()
