"""The released official checkpoints: a registry of names -> URLs, and a cached download.

`weights="imagenet21k"` (or a full release name such as "ViT-B_16/imagenet21k") resolves
here; `fetch` downloads through `keras.utils.get_file` once into the Keras cache.
"""

from __future__ import annotations

import dataclasses
import os
import re
from typing import Dict, Optional, Tuple, Union

import keras

from keras_vit.utils import validate
from keras_vit.vit import table
from keras_vit.vit.arguments import DEFAULT_CLASSES

BASE_URL = os.environ.get("KERAS_VIT_BASE_URL", "https://storage.googleapis.com/vit_models")


@dataclasses.dataclass(frozen=True)
class Release:
    """One released checkpoint file."""

    name: str  # e.g. "ViT-B_16/imagenet21k"
    model: str  # the paper's model name
    dataset: str  # "imagenet21k" | "imagenet21k+imagenet2012" | ...
    resolution: Union[int, Tuple[int, int]]  # pixels the checkpoint was trained at (height, width if not square)
    classes: Optional[int]  # None: a fine-tuning dataset keras_vit has no class count for (read from the file)
    url: str
    sha256: Optional[str] = None
    representation_size: Optional[int] = None  # width of the file's pre_logits layer, None if it has none
    top1: Optional[float] = None  # published ImageNet top-1 (%), where the source publishes one


_RELEASES: Dict[str, Release] = {}


def register_release(release: Release) -> None:
    """Adds (or replaces) a downloadable checkpoint, e.g. an AugReg file or a mirror."""
    table.vit_config(release.model)
    _RELEASES[release.name] = release


def _register_official() -> None:
    for model in ("ViT-B/16", "ViT-B/32", "ViT-L/16", "ViT-L/32", "ViT-H/14", "R50+ViT-B/16"):
        file = table.vit_config(model).name.replace("/", "_") + ".npz"
        # the ImageNet-21k pre-training heads sit on a Dense+tanh pre-logits layer of width D
        register_release(
            Release(
                f"{file[:-4]}/imagenet21k",
                model,
                "imagenet21k",
                224,
                21843,
                f"{BASE_URL}/imagenet21k/{file}",
                representation_size=table.vit_config(model).hidden_size,
            )
        )
        register_release(
            Release(
                f"{file[:-4]}/imagenet21k+imagenet2012",
                model,
                "imagenet21k+imagenet2012",
                384,
                1000,
                f"{BASE_URL}/imagenet21k+imagenet2012/{file}",
            )
        )


_register_official()


def parse_augreg(filename: str) -> Release:
    """The release of any AugReg filename of `gs://vit_models/augreg/index.csv` (path, URL or bare name)."""
    from keras_vit.weights import augreg

    fields = augreg.parse_name(filename)
    stem = os.path.basename(str(filename))
    stem = stem[:-4] if stem.endswith(".npz") else stem
    if fields.dataset is None:
        dataset, classes, resolution = f"augreg_{fields.pretrain}", augreg.PRETRAIN_CLASSES[fields.pretrain], 224
    else:
        dataset, classes, resolution = fields.dataset, augreg.FINETUNE_CLASSES.get(fields.dataset), fields.resolution
    return Release(
        stem,
        fields.model,
        dataset,
        resolution,
        classes,
        f"{BASE_URL}/augreg/{stem}.npz",
        top1=augreg.published_top1(stem),
    )


def _register_augreg_and_sam() -> None:
    from keras_vit.weights import augreg

    for code, files in augreg.recommended_files().items():
        for short, stem in files.items():
            r = parse_augreg(stem)
            register_release(
                dataclasses.replace(
                    r, name=f"{table.vit_config(r.model).name.replace('/', '_')}/{short}", dataset=short
                )
            )
    # SAM (Chen et al. 2021, "When Vision Transformers Outperform ResNets...", Table 2: ImageNet-1k from scratch
    # with SAM, 224 px); timm notes the release carries a D-wide representation layer
    for model, top1 in (("ViT-B/16", 79.9), ("ViT-B/32", 73.6)):
        file = table.vit_config(model).name.replace("/", "_")
        register_release(
            Release(
                f"{file}/sam",
                model,
                "sam",
                224,
                1000,
                f"{BASE_URL}/sam/{file}.npz",
                representation_size=table.vit_config(model).hidden_size,
                top1=top1,
            )
        )


_register_augreg_and_sam()


def available() -> list:
    """All known released checkpoints (name, model, dataset, resolution, classes, URL)."""
    return list(_RELEASES.values())


def release_names() -> list:
    """Valid `weights=` strings: dataset names and full release names."""
    return sorted({r.dataset for r in _RELEASES.values()} | set(_RELEASES))


def dataset_names() -> list:
    """The short, model-independent names ("imagenet21k", "augreg_in21k", "sam", ...)."""
    return sorted({r.dataset for r in _RELEASES.values()})


def _augreg_or_none(weights: str) -> Optional[Release]:
    try:
        return parse_augreg(weights)
    except ValueError:
        return None


def is_release_name(weights: str) -> bool:
    """A registered name, a dataset short name, or any AugReg filename."""
    return isinstance(weights, str) and (weights in release_names() or _augreg_or_none(weights) is not None)


def close_matches(weights: str) -> list:
    """Known release names that look like `weights` (for error messages)."""
    import difflib

    return difflib.get_close_matches(str(weights), release_names(), n=4, cutoff=0.5)


def find_release(weights: str, model_name: Optional[str]) -> Release:
    """Resolves `weights` (a dataset name or a full release name) for a model of the table."""
    if weights in _RELEASES:
        return _RELEASES[weights]
    parsed = _augreg_or_none(weights)
    if parsed is not None:
        if model_name is not None and table.vit_config(parsed.model).name != table.vit_config(model_name).name:
            raise ValueError(f"{weights!r} holds {parsed.model}, not {model_name}.")
        return parsed
    matches = [
        r
        for r in _RELEASES.values()
        if r.dataset == weights and model_name is not None and table.vit_config(r.model).name == model_name
    ]
    if not matches:
        have = sorted(r.name for r in _RELEASES.values() if r.dataset == weights)
        if model_name is None and have:  # a dataset name names a release only with its model
            raise ValueError(
                f"{weights!r} names a release only together with a model (one of "
                f"{', '.join(sorted({r.model for r in _RELEASES.values() if r.dataset == weights}))}): "
                f"give the model too (--model / --config.model.name, or model= in Python), or a full "
                f"release name ({', '.join(have[:3])}{', ...' if len(have) > 3 else ''})."
            )
        raise ValueError(
            f"No {weights!r} checkpoint is released for model {model_name!r}; released: {', '.join(have)}."
        )
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
    try:
        return keras.utils.get_file(
            fname,
            origin=release.url,
            cache_subdir="keras_vit",
            cache_dir=cache_dir,
            file_hash=release.sha256,
            hash_algorithm="sha256",
        )
    except Exception as e:  # urllib's errors, wrapped by Keras in a plain Exception
        if isinstance(e, ValueError) and "hash" in str(e).lower():
            raise
        where = os.path.join(
            cache_dir or os.environ.get("KERAS_HOME", os.path.expanduser("~/.keras")), "keras_vit", fname
        )
        raise ValueError(
            f"Could not download release {release.name!r} from {release.url} ({type(e).__name__}: {validate.first_line(e)}). "
            f"Without a network, fetch that URL elsewhere and place the file at {where} "
            "(or set KERAS_VIT_CACHE_DIR to the folder holding keras_vit/" + fname + ")."
        ) from None


def head_size(classes: Optional[int], representation_size: Optional[int], release: Optional[Release]) -> tuple:
    """(classes, representation_size) of a model built for `release`: unset `classes` takes the release's own
    head and pre-logits; another number is a new head (zero-initialised, with a warning, when loaded)."""
    classes = validate.integer("classes", classes, allow_none=True)  # 2.5 and True refused, never converted
    if release is None:
        return (DEFAULT_CLASSES if classes is None else classes), representation_size
    if classes is None:  # the released classifier itself, pre-logits included
        rep = release.representation_size if representation_size is None else representation_size
        if release.classes is None:
            raise ValueError(
                f"Release {release.name!r} was fine-tuned on {release.dataset!r}, whose class count "
                "keras_vit does not record: pass classes=, or use keras_vit.load_model(<the .npz>)."
            )
        return release.classes, rep
    return classes, representation_size
