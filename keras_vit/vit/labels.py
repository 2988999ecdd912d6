"""Class names for a classifier's outputs: the ImageNet label sets that ship inside the package, and
`decode_predictions` (as `keras.applications` has it).

`imagenet1k`: the 1,000 ILSVRC-2012 classes in the order every ImageNet-1k head uses; `imagenet21k`: the 21,843
ImageNet-21k classes in the order of the original ViT ImageNet-21k heads. Each class is a WordNet id and its
lemmas; the first lemma is its name. The files are made by `tools/make_labels.py` from the lists timm
distributes (see that script); nothing is downloaded at run time.
"""

from __future__ import annotations

import dataclasses
import functools
from importlib import resources
from typing import List, Optional, Sequence, Tuple, Union

import numpy as np

from keras_vit.utils import validate

LABEL_SETS = {"imagenet1k": ("imagenet1k.tsv", 1000), "imagenet21k": ("imagenet21k.tsv", 21843)}


@dataclasses.dataclass(frozen=True)
class ClassLabel:
    """One class: its WordNet id (or its index, for a custom list), display name and every lemma."""

    id: str
    name: str
    lemmas: Tuple[str, ...]


@functools.lru_cache(maxsize=None)
def label_set(name: str) -> Tuple[ClassLabel, ...]:
    """The classes of the label set `name` ("imagenet1k" or "imagenet21k"), in output order."""
    if name not in LABEL_SETS:
        raise ValueError(f"Unknown label set {name!r}; expected one of {', '.join(LABEL_SETS)}.")
    file, count = LABEL_SETS[name]
    text = resources.files("keras_vit").joinpath("data", file).read_text(encoding="utf-8")
    out = []
    for line in text.splitlines():
        wnid, lemmas = line.split("\t", 1)
        names = tuple(n.strip() for n in lemmas.split(","))
        out.append(ClassLabel(wnid, names[0], names))
    if len(out) != count:
        raise RuntimeError(f"keras_vit/data/{file} holds {len(out)} classes, expected {count}: reinstall keras_vit.")
    return tuple(out)


def label_set_for(classes: int) -> Optional[str]:
    """The shipped label set with `classes` classes, or None."""
    return next((name for name, (_, count) in LABEL_SETS.items() if count == classes), None)


def label_count(labels: Union[str, Sequence[str]]) -> Optional[int]:
    """How many classes `labels` (a shipped set's name or a list of class names) names; None for an unknown set."""
    if isinstance(labels, str):
        return LABEL_SETS[labels][1] if labels in LABEL_SETS else None
    return len(labels)


def class_names(labels: Union[None, str, Sequence[str]], classes: int) -> List[str]:
    """The display name of each of `classes` outputs: from `labels` as `decode_predictions` takes them, the
    indices ("0", "1", ...) where `labels` is None and no shipped set has `classes` classes."""
    if labels is None and label_set_for(classes) is None:
        return [str(i) for i in range(classes)]
    return [c.name for c in _labels(labels, classes)]


def _labels(labels, classes: int) -> Tuple[ClassLabel, ...]:
    if labels is None:
        name = label_set_for(classes)
        if name is None:
            raise ValueError(
                f"predictions have {classes} classes, which no shipped label set has "
                f"({', '.join(f'{k}: {c}' for k, (_, c) in LABEL_SETS.items())}): pass labels=[...] "
                "(e.g. the class_names.txt a folder run writes)."
            )
        return label_set(name)
    if isinstance(labels, str):
        chosen = label_set(labels)
        if len(chosen) != classes:
            raise ValueError(
                f"predictions have {classes} classes but label set {labels!r} has {len(chosen)}"
                + (f"; these look like {label_set_for(classes)!r} outputs." if label_set_for(classes) else ".")
            )
        return chosen
    names = [str(n) for n in labels]
    if len(names) != classes:
        raise ValueError(f"predictions have {classes} classes but labels= has {len(names)} names.")
    return tuple(ClassLabel(str(i), n, (n,)) for i, n in enumerate(names))


def decode_predictions(
    preds, top: int = 5, labels: Union[None, str, Sequence[str]] = None
) -> List[List[Tuple[str, str, float]]]:
    """The `top` classes of each row of `preds` as (id, name, score), best first.

    Args:
      preds: (batch, classes) scores: probabilities or logits (the order is the same).
      top: how many classes per row (at most `classes`).
      labels: None picks the shipped set by the class count (1,000: "imagenet1k", 21,843: "imagenet21k");
        a set's name; or a list of class names (ids are then the indices).
    """
    array = np.asarray(preds)
    if array.ndim != 2:
        raise ValueError(f"decode_predictions expects (batch, classes) scores, got shape {array.shape}.")
    top = validate.integer("top", top)
    chosen = _labels(labels, array.shape[1])
    order = np.argsort(-array, axis=1, kind="stable")[:, :top]
    return [[(chosen[k].id, chosen[k].name, float(row[k])) for k in ks] for row, ks in zip(array, order)]
