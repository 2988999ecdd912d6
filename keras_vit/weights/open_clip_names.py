"""open_clip's pretrained image-text models by name: `"ViT-B-32:laion2b_s34b_b79k"` (open_clip's model name and
pretrained tag, as `open_clip.list_pretrained(as_str=True)` spells them), or the model name alone where open_clip
publishes one tag of it, resolved to the hub repository open_clip publishes the weights in.

The table (`keras_vit/data/open_clip_pretrained.json`, written from open_clip by tools/make_open_clip_names.py)
holds each tag's repository and each model's config; which models keras_vit builds is decided from that config by
the same checks that refuse a repository at load time (`open_clip_visual.image_tower`, `open_clip_text.text_tower`),
so the list and the loader cannot disagree. These names never shadow the image models' names: open_clip spells
its sizes with dashes ("ViT-B-16"), the paper with a slash ("ViT-B/16").
"""

from __future__ import annotations

import difflib
import functools
import json
import os
from typing import Dict, List, Optional, Tuple

TABLE = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data", "open_clip_pretrained.json")


@functools.lru_cache(maxsize=1)
def _table() -> dict:
    with open(TABLE) as f:
        return json.load(f)


@functools.lru_cache(maxsize=1)
def _tags() -> Dict[str, List[Tuple[str, str, bool]]]:
    """{model name: [(tag, repository, trained with QuickGELU), ...]} in open_clip's order."""
    out: Dict[str, List[Tuple[str, str, bool]]] = {}
    for name, tag, repo, quick_gelu in _table()["pretrained"]:
        out.setdefault(name, []).append((tag, repo, bool(quick_gelu)))
    return out


def why_not_built(name: str) -> Optional[str]:
    """None when keras_vit builds open_clip's model `name` (both towers), else the reason it is refused."""
    from keras_vit.weights import open_clip_text, open_clip_visual

    cfg = _table()["models"].get(name)
    if cfg is None:
        return f"{name!r} is not one of open_clip's pretrained models"
    try:
        open_clip_visual.image_tower(cfg, name)
        open_clip_text.text_tower(cfg, name)
    except ValueError as e:
        return str(e)
    return None


def list_image_text(buildable_only: bool = True) -> List[str]:
    """ "name:tag" of open_clip's pretrained models (those keras_vit builds, or every one), in open_clip's order."""
    return [
        f"{name}:{tag}"
        for name, tags in _tags().items()
        if not buildable_only or why_not_built(name) is None
        for tag, _, _ in tags
    ]


def is_name(source) -> bool:
    """True for an open_clip model name ("ViT-B-32", "ViT-B-32:openai"), not a folder or hub handle."""
    if not isinstance(source, str) or source.startswith("hf-hub:") or os.path.exists(source):
        return False
    return source.split(":", 1)[0] in _tags()


def close_names(source: str) -> List[str]:
    """Up to three "name:tag" spellings near `source` (for an error message)."""
    return difflib.get_close_matches(source, list_image_text(buildable_only=False), n=3, cutoff=0.6)


def pretrained(source: str) -> Tuple[str, bool]:
    """(the hub repository, whether open_clip records the weights as trained with QuickGELU) of "name:tag", or of
    "name" when open_clip publishes one tag of it. QuickGELU: OpenAI's CLIP and open_clip's early LAION runs, which
    the model's own config may not say. An unknown name or tag, a name with several tags, or a model keras_vit does
    not build is refused (listing the choices, or saying why)."""
    name, _, tag = source.partition(":")
    tags = _tags().get(name)
    if tags is None:
        close = difflib.get_close_matches(name, list(_tags()), n=3)
        raise ValueError(f"{name!r} is not one of open_clip's pretrained models; close: {close}.")
    if not tag:
        if len(tags) > 1:
            choices = ", ".join(f"{name}:{t}" for t, _, _ in tags)
            raise ValueError(f"open_clip publishes {len(tags)} weights of {name!r}; name one: {choices}.")
        tag = tags[0][0]
    rows = {t: (repo, quick_gelu) for t, repo, quick_gelu in tags}
    if tag not in rows:
        raise ValueError(f"{name!r} has no pretrained tag {tag!r}; open_clip's: {sorted(rows)}.")
    reason = why_not_built(name)
    if reason is not None:
        raise ValueError(f"{source!r}: keras_vit does not build it: {reason}")
    return rows[tag]


def hub_handle(source: str) -> str:
    """The `hf-hub:` handle of the repository `source` ("name:tag" or "name") is published in (`pretrained`)."""
    return "hf-hub:" + pretrained(source)[0]
