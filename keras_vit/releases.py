"""The released official checkpoints: a registry of names -> URLs, and a cached download.

`weights="imagenet21k"` (or a full release name such as "ViT-B_16/imagenet21k") resolves
here; `fetch` downloads through `keras.utils.get_file` once into the Keras cache.
"""

from __future__ import annotations

import dataclasses
import os
import re
from typing import Dict, Optional

import keras

from keras_vit import configs

BASE_URL = os.environ.get("KERAS_VIT_BASE_URL", "https://storage.googleapis.com/vit_models")


@dataclasses.dataclass(frozen=True)
class Release:
    """One released checkpoint file."""

    name: str          # e.g. "ViT-B_16/imagenet21k"
    model: str         # the paper's model name
    dataset: str       # "imagenet21k" | "imagenet21k+imagenet2012" | ...
    resolution: int    # pixels the checkpoint was trained at
    classes: int
    url: str
    sha256: Optional[str] = None
    representation_size: Optional[int] = None  # width of the file's pre_logits layer, None if it has none


_RELEASES: Dict[str, Release] = {}


def register_release(release: Release) -> None:
    """Adds (or replaces) a downloadable checkpoint, e.g. an AugReg file or a mirror."""
    configs.get_config(release.model)
    _RELEASES[release.name] = release


def _register_official() -> None:
    for model in ("ViT-B/16", "ViT-B/32", "ViT-L/16", "ViT-L/32", "ViT-H/14", "R50+ViT-B/16"):
        file = configs.get_config(model).name.replace("/", "_") + ".npz"
        # the ImageNet-21k pre-training heads sit on a Dense+tanh pre-logits layer of width D (REFERENCE §2)
        register_release(Release(f"{file[:-4]}/imagenet21k", model, "imagenet21k", 224, 21843,
                                 f"{BASE_URL}/imagenet21k/{file}",
                                 representation_size=configs.get_config(model).hidden_size))
        register_release(Release(f"{file[:-4]}/imagenet21k+imagenet2012", model,
                                 "imagenet21k+imagenet2012", 384, 1000,
                                 f"{BASE_URL}/imagenet21k+imagenet2012/{file}"))


_register_official()


def available() -> list:
    """All known released checkpoints (name, model, dataset, resolution, classes, URL)."""
    return list(_RELEASES.values())


def release_names() -> list:
    """Valid `weights=` strings: dataset names and full release names."""
    return sorted({r.dataset for r in _RELEASES.values()} | set(_RELEASES))


def is_release_name(weights: str) -> bool:
    return isinstance(weights, str) and weights in release_names()


def find_release(weights: str, model_name: Optional[str]) -> Release:
    """Resolves `weights` (a dataset name or a full release name) for a model of the table."""
    if weights in _RELEASES:
        return _RELEASES[weights]
    matches = [r for r in _RELEASES.values()
               if r.dataset == weights and model_name is not None
               and configs.get_config(r.model).name == model_name]
    if not matches:
        have = sorted(r.name for r in _RELEASES.values() if r.dataset == weights)
        raise ValueError(f"No {weights!r} checkpoint is released for model {model_name!r}; "
                         f"released: {', '.join(have)}.")
    return matches[0]


def fetch(weights: str, model: Optional[keras.Model] = None, cache_dir: Optional[str] = None) -> str:
    """Downloads (once) the release `weights` and returns its local path.

    `model` (a `keras_vit.VisionTransformer`) picks the file when `weights` is a dataset name.
    Files go to `<cache_dir>/keras_vit/`; `cache_dir` defaults to $KERAS_VIT_CACHE_DIR,
    else the Keras cache (~/.keras). The sha256 is checked when the release has one.
    """
    release = find_release(weights, model.vit_config.name if model is not None else None)
    fname = re.sub(r"[^A-Za-z0-9_.+-]", "_", release.name) + ".npz"
    cache_dir = cache_dir or os.environ.get("KERAS_VIT_CACHE_DIR")
    if cache_dir:
        os.makedirs(cache_dir, exist_ok=True)  # Keras falls back to /tmp for a missing directory
    return keras.utils.get_file(fname, origin=release.url, cache_subdir="keras_vit", cache_dir=cache_dir,
                                file_hash=release.sha256, hash_algorithm="sha256")
