"""Experiment configs: each file's `get_config("<variant>")` returns an ml_collections ConfigDict.

`--config` takes a config by name (`finetune:folder`, what works from an installed package) or by path
(`recipes/configs/finetune.py:folder`, or a file of your own); `resolve` turns a name into this folder's file.
"""

from __future__ import annotations

import os

HERE = os.path.dirname(os.path.abspath(__file__))


def names() -> list:
    """The configs shipped here, by name (`base` holds the shared fields, not a config)."""
    return sorted(f[:-3] for f in os.listdir(HERE) if f.endswith(".py") and not f.startswith("_") and f != "base.py")


def resolve(spec: str) -> str:
    """`<name>[:<variant>]` -> this folder's `<name>.py[:<variant>]`; `recipes/configs/<name>.py[:...]`
    where no such file exists (a command written for a checkout, run from an installed package) -> the
    shipped file; any other path as it is."""
    path, sep, variant = spec.partition(":")
    shipped = names()
    if path in shipped:
        return os.path.join(HERE, path + ".py") + sep + variant
    stem = os.path.basename(path)[:-3] if path.endswith(".py") else ""
    in_checkout = path.replace(os.sep, "/").startswith(("recipes/configs/", "./recipes/configs/"))
    if in_checkout and stem in shipped and not os.path.exists(path):
        return os.path.join(HERE, stem + ".py") + sep + variant
    return spec
