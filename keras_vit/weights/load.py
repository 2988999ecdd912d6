"""Resolving a weight source: what it is (asked of the table `keras_vit.weights.sources.SOURCES`), read once.

A source is a release name (the 2020 files, AugReg, SAM: `keras_vit.weights.releases`), an official or
big_vision `.npz`, a `.keras` model, a Keras `.weights.h5` file, a timm `.safetensors` state dict, or a
Hugging Face `transformers` ViT directory (`config.json` + `model.safetensors`). `read_checkpoint` reads
any of them once into a `Checkpoint` (official keys -> arrays, plus the architecture the source
implies); `load_weights`, `load_model` and `source_params` are built on it, and so is every CLI and
recipe. Every load is all-or-nothing: a source that does not fit leaves every weight as it was.
"""

from __future__ import annotations

import os
import re
import warnings
from typing import Callable, Dict, Optional, Union

import keras
import numpy as np

from keras_vit.vit import table
from keras_vit.vit.data_config import DataConfig
from keras_vit.utils import validate
from keras_vit.vit.model import VisionTransformer, keywords
from keras_vit.nn.initializers import weights_follow
from keras_vit.weights import hub, keras_files, official, releases, sources
from keras_vit.weights.checkpoint import Checkpoint

SOURCE_KINDS = ", ".join(s.description for s in sources.SOURCES)
PathLike = Union[str, os.PathLike]


def source_kind(source: Optional[PathLike]) -> Optional[str]:
    """The kind of `source` (a `keras_vit.weights.sources.SOURCES` entry), None for None; a clear error for
    anything else."""
    if source is None:
        return None
    if not isinstance(source, (str, os.PathLike)):
        raise ValueError(f"weights must be None, a file path or a release name, got {type(source).__name__}.")
    source = os.fspath(source)
    if hub.is_handle(source):
        hub.parse(source)  # a malformed handle fails here, before anything is fetched
    found = sources.find(source)
    if found is not None:
        return found.kind
    if not os.path.exists(source):
        _refuse_missing(source)
    if os.path.isdir(source):
        raise ValueError(
            f"weights directory {source!r} is neither a timm repository nor a transformers ViT directory (no config.json)."
        )
    raise ValueError(f"Unsupported weights file {source!r}: expected {SOURCE_KINDS}.")


def _refuse_missing(source: str) -> None:
    """A clear error for a source that is neither an existing path nor a release name."""
    if re.match(r"^[A-Za-z0-9_]+_\d+-i(1k|21k)", os.path.basename(source)):  # an AugReg name, misspelt
        from keras_vit.weights import augreg

        augreg.parse_name(source)  # raises, naming the scheme and the close recommended names
    if not source.endswith(sources.FILE_SUFFIXES):  # meant as a name, not a file
        close = releases.close_matches(source)
        hint = (
            f"did you mean {', '.join(map(repr, close))}?"
            if close
            else f"dataset-style names: {', '.join(releases.dataset_names())} (all: keras_vit.releases."
            "release_names())."
        )
        raise ValueError(f"weights={source!r} is neither a file nor a release name; {hint}")
    raise FileNotFoundError(f"weights file {source!r} does not exist (expected None, {SOURCE_KINDS}).")


def check_source(source: Optional[PathLike]) -> Optional[str]:
    """`source` as a string after checking it names a release or a readable kind of file (None stays None)."""
    return None if source_kind(source) is None else os.fspath(source)


def release_of(source: Optional[PathLike], model_name: Optional[str]) -> Optional[releases.Release]:
    """The release `source` names for the model `model_name` (its `vit_config.name`), or None when `source` is
    a file or None."""
    if source_kind(source) != "release":
        return None
    return releases.find_release(os.fspath(source), model_name)


Source = Union[PathLike, Checkpoint, None]  # a source, or one read already (`read_source`)


def read_source(
    weights: Source, model_name: Optional[str] = None, num_heads: Optional[int] = None
) -> Optional[Checkpoint]:
    """`weights` read once into a `Checkpoint` with its data config, for the builders (`create_model`, the
    constructors, `VisionTransformer(weights=)`), which then take head, preprocessing and arrays from it. None
    for no weights and for a `.weights.h5` file, which is read into the model it is built for. A `Checkpoint`
    is returned as it is."""
    if isinstance(weights, Checkpoint):
        return weights
    kind = source_kind(weights)
    if kind is None or not sources.BY_KIND[kind].arrays:
        return None
    name = _table_name(model_name)
    checkpoint = _read(kind, os.fspath(weights), name, num_heads, None)
    checkpoint.data_config = data_config(checkpoint.path if sources.BY_KIND[kind].on_disk else weights, name)
    return checkpoint


def head_size(weights: Source, model_name: str, classes: Optional[int], representation_size: Optional[int]) -> tuple:
    """(classes, representation_size) of a model `model_name` built for `weights`: a release's own head when
    `classes` is unset (see `releases.head_size`); what the constructor and `VisionTransformer` resolve
    before building."""
    release = weights.release if isinstance(weights, Checkpoint) else release_of(weights, model_name)
    return releases.head_size(classes, representation_size, release)


def data_config(source: Source, model_name: Optional[str] = None) -> Optional[DataConfig]:
    """The evaluation preprocessing `source` implies (`keras_vit.vit.data_config`), None where it says nothing
    beyond the original code's (official `.npz`, `.weights.h5`). Cheap: reads configs, never the arrays.

    Releases follow the original code's evaluation, with the label set of their head; a timm state dict, timm's
    ViT defaults; a `transformers` directory, its `preprocessor_config.json`; a `.keras` file, its model's.
    """
    if isinstance(source, Checkpoint):
        return source.data_config
    kind = source_kind(source)
    return None if kind is None else sources.BY_KIND[kind].data_config(os.fspath(source), _table_name(model_name))


def _table_name(name: Optional[str]) -> Optional[str]:
    """The table's spelling of a model name ("ViT-B_16" -> "ViT-B/16"); a custom model's name as it is."""
    if not name:
        return None
    try:
        return table.vit_config(name).name
    except ValueError:
        return name


def read_checkpoint(
    source: PathLike,
    *,
    model_name: Optional[str] = None,
    num_heads: Optional[int] = None,
    build: Optional[Callable[[], VisionTransformer]] = None,
) -> Checkpoint:
    """Reads `source` once (see the module docstring for the kinds).

    Args:
      source: the weight source.
      model_name: the name of the model the weights are for (a table name in any spelling, or a built
        model's `vit_config.name`): picks the file of a dataset-style release name ("imagenet21k") and builds
        the model a `.weights.h5` file is read into.
      num_heads: heads of a timm state dict whose width is not a table width (the file does not say).
      build: for a `.weights.h5` file, a function returning the model to read it into (default: the table
        model `model_name`).
    """
    kind = source_kind(source)
    if kind is None:
        raise ValueError(f"No weight source given: expected {SOURCE_KINDS}.")
    return _read(kind, os.fspath(source), _table_name(model_name), num_heads, build)


def _read(kind: str, path: str, model_name: Optional[str], num_heads: Optional[int], build) -> Checkpoint:
    """`read_checkpoint` once the kind is known (callers that have asked `source_kind` already pass it on)."""
    return sources.BY_KIND[kind].read(path, model_name, num_heads, build)


def load_weights(model: keras.Model, weights: Source, **npz_kwargs) -> keras.Model:
    """Loads `weights` (any source kind, see the module docstring) into `model`; all-or-nothing.

    Official-layout sources (`.npz`, releases, safetensors, transformers directories, `.keras`) go through the
    official fine-tuning rules: position embeddings resized, a different head zero-initialised with a warning.
    A `.weights.h5` file must match the model exactly. `npz_kwargs` (`resize_posemb`, `reset_head`,
    `old_grid`) go to `keras_vit.load_npz`'s rules and apply to the official-layout arrays only.
    """
    given = weights if isinstance(weights, Checkpoint) else None  # read already (`read_source`)
    kind = given.kind if given is not None else source_kind(weights)
    if kind is None:
        return model
    if npz_kwargs and not sources.BY_KIND[kind].fine_tuning_rules:
        raise ValueError(f"{sorted(npz_kwargs)} apply to .npz checkpoints only, not {os.fspath(weights)!r}.")
    if not sources.BY_KIND[kind].arrays:  # read into the model itself
        return loaded_from(keras_files.load_weights_h5(model, os.fspath(weights)), os.fspath(weights))
    vit = model.vit_config
    checkpoint = given if given is not None else _read(kind, os.fspath(weights), vit.name, vit.num_heads, None)
    _refuse_quantized(checkpoint)
    _check_numerics(checkpoint, model)
    npz_kwargs.setdefault("old_grid", checkpoint.old_grid)
    return loaded_from(
        official.load_params(
            model,
            checkpoint.params,
            checkpoint.path,
            adopt=checkpoint.model is None,
            posemb_prefix_included=checkpoint.posemb_included(model),
            grid_stated=checkpoint.old_grid is not None,
            **npz_kwargs,
        ),
        checkpoint,
    )


def loaded_from(model: keras.Model, source) -> keras.Model:
    """`model`, recording in `model.weights_source` what its weights were loaded from (a release's name, the
    path or hub handle as given): what exports write in their model card."""
    if isinstance(source, Checkpoint):
        source = source.release.name if source.release is not None else source.source
    model.weights_source = os.fspath(source)
    return model


def _refuse_quantized(checkpoint: Checkpoint) -> None:
    """A quantized `.keras` model opens as it is (`load_model(path)`); its int8 kernels cannot go into another
    model or be rebuilt with other keywords."""
    if checkpoint.model is not None and checkpoint.model.quantized_layers():
        raise ValueError(
            f"{checkpoint.source!r} holds a quantized model: keras_vit.load_model(path) (or "
            "keras.models.load_model) opens it as it is; its int8 kernels cannot be loaded into another "
            "model or rebuilt with other keywords. Load a float checkpoint and quantize after."
        )


def _check_numerics(checkpoint: Checkpoint, model: keras.Model) -> None:
    """A warning when a source trained with one GELU form goes into a model of the other; an error when the
    source's activation or LayerNorm epsilon is another family's (quick GELU, CLIP's 1e-5): the shapes would
    fit and the logits be wrong."""
    implied = checkpoint.implied
    if checkpoint.model is not None:
        return
    activation = implied.get("activation")
    if activation is None and implied.get("gelu_approximate") is not None:
        activation = "gelu_tanh" if implied["gelu_approximate"] else "gelu"
    eps = implied.get("layer_norm_epsilon")
    have = model.variant
    close_eps = eps is not None and max(eps, have.layer_norm_epsilon) <= 1e-6  # below float32's resolution of
    # a normalised activation's variance: said, not refused (transformers' ViTConfig default is 1e-12)
    wrong = [
        f"{field} {theirs!r} (the model's {ours!r})"
        for field, theirs, ours in (
            ("activation", activation, have.activation),
            ("LayerNorm epsilon", eps, have.layer_norm_epsilon),
        )
        if theirs is not None
        and theirs != ours
        and not {theirs, ours} <= {"gelu", "gelu_tanh"}
        and not (field == "LayerNorm epsilon" and close_eps)
    ]
    if wrong:
        raise ValueError(
            f"{checkpoint.source!r} was trained with {', '.join(wrong)}: another family's model. "
            "Build it with keras_vit.load_model(source), which takes the source's; nothing was loaded."
        )
    if close_eps and eps != have.layer_norm_epsilon:
        warnings.warn(
            f"{checkpoint.source!r} was trained with LayerNorm epsilon {eps!r}, model {model.name!r} uses "
            f"{have.layer_norm_epsilon!r}; build it with layer_norm_epsilon={eps!r} (keras_vit.load_model "
            "does) for the source's exact logits."
        )
    if activation in ("gelu", "gelu_tanh") and activation != have.activation:
        exact = activation == "gelu_tanh"
        warnings.warn(
            f"{checkpoint.source!r} was trained with {'tanh' if exact else 'exact'} GELU but model "
            f"{model.name!r} uses the other form; build it with activation={activation!r} "
            "(keras_vit.load_model does) for the source's logits."
        )


def _check_name(checkpoint: Checkpoint, arch: dict, model_name: Optional[str]) -> None:
    if model_name is None:
        return
    have = table.custom_config(**{k: arch[k] for k in table.SIZE_FIELDS if k in arch})
    if have.model_kwargs() != table.vit_config(model_name).model_kwargs():
        raise ValueError(
            f"{checkpoint.source!r} holds {have.name}, not {model_name!r}; leave the model name out "
            "to take the file's architecture."
        )


def load_model(source: PathLike, *, model: Optional[str] = None, **constructor_keywords) -> VisionTransformer:
    """A `VisionTransformer` with the weights of `source`, its architecture read from the source.

    Args:
      source: any source kind (see the module docstring). Official files and safetensors say their
        architecture through their shapes and config; a `.keras` file keeps its whole config.
      model: the table name ("ViT-B/16"); needed for `.weights.h5` files and dataset-style release names
        ("imagenet21k"); checked against the source's architecture when given.
      constructor_keywords: `VisionTransformer` keywords to build with instead of the source's (another
        resolution, head size, `include_top=False`, ...); the weights then follow the official rules
        (position embeddings resized, a new head zero-initialised). A hybrid source stays a hybrid.
    """
    validate.refuse_unknown("load_model()", constructor_keywords, keywords() | {"weights"})
    kind = source_kind(source)
    if kind is None:
        raise ValueError(f"load_model needs a source: {SOURCE_KINDS}.")
    kwargs = {k: v for k, v in constructor_keywords.items() if k != "weights"}
    name = table.vit_config(model).name if model else None
    checkpoint = _read(
        kind,
        os.fspath(source),
        name,
        kwargs.get("num_heads"),
        (lambda: VisionTransformer(**table.vit_config(model).model_kwargs(), **kwargs)) if model else None,
    )
    if not sources.BY_KIND[checkpoint.kind].arrays:
        return loaded_from(checkpoint.model, checkpoint)
    if checkpoint.release is not None:
        arch = _release_architecture(checkpoint.release, kwargs)
    else:
        arch = checkpoint.architecture(kwargs)
        if "input_shape" not in arch and "input_shape" in kwargs and checkpoint.old_grid is None:
            # the file does not state its size; the caller's is the size it was trained at
            checkpoint.old_grid = official.stated_grid(
                checkpoint.params,
                kwargs["input_shape"],
                bool(kwargs.get("prefix_position_embedding", True)),
                checkpoint.path,
            )
        _check_name(checkpoint, arch, name)
        if checkpoint.model is not None and all(  # a .keras file: its own model, unless told otherwise
            arch.get(k) == (list(v) if isinstance(v, tuple) else v) for k, v in kwargs.items()
        ):
            return loaded_from(checkpoint.model, checkpoint)
        _refuse_quantized(checkpoint)
        sources.BY_KIND[checkpoint.kind].check_architecture(checkpoint.path, arch, kwargs)
        for field in checkpoint.settled_by(kwargs):  # the caller's `variant=` states these, not the defaults
            arch.pop(field, None)
        arch.update(kwargs)
        checkpoint.warn_assumptions(kwargs)
    if "input_shape" not in arch:
        raise ValueError(
            f"{checkpoint.path!r} does not state its input size and its position table is not a "
            "square grid; pass input_shape=(H, W, C) of the size it was trained at."
        )
    if arch.get("data_config") is None:  # a release's from its name; the others from the local copy just read
        arch["data_config"] = data_config(checkpoint.path if sources.BY_KIND[checkpoint.kind].on_disk else source, name)
    with weights_follow():  # every variable is assigned from the checkpoint next: no random draws first
        built = VisionTransformer(**arch)
    return loaded_from(
        official.load_params(
            built,
            checkpoint.params,
            checkpoint.path,
            old_grid=checkpoint.old_grid,
            posemb_prefix_included=checkpoint.posemb_included(built),
            grid_stated=checkpoint.old_grid is not None,
            adopt=checkpoint.model is None,
        ),
        checkpoint,
    )  # arrays used by nothing else


def _release_architecture(release: releases.Release, kwargs: dict) -> dict:
    """The table model of `release` at its resolution, with the release's own head unless told otherwise."""
    arch = dict(table.vit_config(release.model).model_kwargs(), input_shape=(*sources.release_size(release), 3))
    arch.update(kwargs)
    arch["classes"], arch["representation_size"] = releases.head_size(
        kwargs.get("classes"), kwargs.get("representation_size"), release
    )
    return arch


def source_params(
    source: PathLike, *, model: Optional[str] = None, build: Optional[Callable[[], VisionTransformer]] = None
) -> Dict[str, np.ndarray]:
    """{official key: array} of `source`: what fine-tuning starts from (`config.init_weights`).

    `model` as in `load_model`; `build` makes the model a `.weights.h5` file is read into.
    """
    kind = source_kind(source)
    if kind is None:
        raise ValueError(f"source_params needs a source: {SOURCE_KINDS}.")
    name = table.vit_config(model).name if model else None
    return _read(kind, os.fspath(source), name, None, build).params
