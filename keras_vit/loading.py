"""`load_model(source)`: one loader for every CLI and recipe.

`source` is a `.keras` file, a `.weights.h5` file (with `model=` naming the variant),
an official-layout `.npz` (the architecture is read from the file's shapes), a timm
`.safetensors` state dict, a Hugging Face `transformers` ViT directory, or a release name. Constructor keywords change the result (another resolution, head size,
`include_top=False`, ...); the weights then go through the official layout's rules
(position embeddings resized, a new head zero-initialised). A hybrid file always
comes back as a hybrid.
"""

from __future__ import annotations

import os
from typing import Dict, Optional, Union

import numpy as np

from keras_vit import checkpoints, configs, releases
from keras_vit.models import VisionTransformer
from keras_vit.weights import check_weights_argument, load_weights, read_foreign, read_keras_file


def _check_name(path: str, have: configs.ViTConfig, model_name) -> None:
    if model_name is not None and have.model_kwargs() != configs.get_config(model_name).model_kwargs():
        raise ValueError(f"{path!r} holds {have.name}, not {model_name!r}; leave the model name out to take "
                         "the file's architecture.")


def _from_keras_file(path: str, model_name, kwargs: dict) -> VisionTransformer:
    loaded = read_keras_file(path)
    _check_name(path, loaded.vit_config, model_name)
    config = loaded.get_config()
    if all(config.get(k) == (list(v) if isinstance(v, tuple) else v) for k, v in kwargs.items()):
        return loaded
    config.update(kwargs)
    model = VisionTransformer(**config)
    return checkpoints.load_params(model, checkpoints.model_params(loaded), path, old_grid=loaded.grid_size)


def _from_npz(path: str, model_name, kwargs: dict) -> VisionTransformer:
    return _from_params(path, checkpoints.read_npz(path), {}, model_name, kwargs)


def _from_foreign(path: str, model_name, kwargs: dict) -> VisionTransformer:
    heads = kwargs.get("num_heads") or (configs.get_config(model_name).num_heads if model_name else None)
    params, implied = read_foreign(path, heads)
    return _from_params(path, params, implied, model_name, kwargs)


def _from_params(path: str, params: dict, implied: dict, model_name, kwargs: dict) -> VisionTransformer:
    arch = checkpoints.architecture_from_npz(params, path)
    arch.update(implied)
    _check_name(path, configs.custom_config(**{k: v for k, v in arch.items() if k in configs.SIZE_FIELDS}),
                model_name)
    arch.update(kwargs)
    if "input_shape" not in arch:
        raise ValueError(f"{path!r} has a non-square patch grid; pass input_shape=(H, W, 3).")
    model = VisionTransformer(**arch)
    return checkpoints.load_params(model, params, path)


def load_model(source: Union[str, os.PathLike], *, model: Optional[str] = None,
               **constructor_keywords) -> VisionTransformer:
    """A `VisionTransformer` with the weights of `source` (see the module docstring).

    Args:
      source: `.keras`, `.weights.h5`, official `.npz`, or a release name.
      model: the table name ("ViT-B/16"); needed for `.weights.h5` and for dataset-style
        release names ("imagenet21k"); checked against a `.keras` or `.npz` file when given.
      constructor_keywords: `VisionTransformer` keywords to build with instead of the file's.
    """
    source = check_weights_argument(source)
    if source is None:
        raise ValueError("load_model needs a source: a .keras, .weights.h5 or .npz file, or a release name.")
    kwargs = {k: v for k, v in constructor_keywords.items() if k != "weights"}
    if releases.is_release_name(source):
        release = releases.find_release(source, configs.get_config(model).name if model else None)
        kwargs.setdefault("input_shape", (release.resolution, release.resolution, 3))
        return VisionTransformer(**configs.get_config(release.model).model_kwargs(), weights=release.name,
                                 **kwargs)
    if source.endswith(".keras"):
        return _from_keras_file(source, model, kwargs)
    if source.endswith(".npz"):
        return _from_npz(source, model, kwargs)
    if source.endswith(".safetensors") or os.path.isdir(source):
        return _from_foreign(source, model, kwargs)
    if model is None:
        raise ValueError(f"{source!r} holds weights only: pass model='<table name>' (and the keywords it was "
                         "built with) so keras_vit knows what to build.")
    built = VisionTransformer(**configs.get_config(model).model_kwargs(), **kwargs)
    return load_weights(built, source)


def source_params(source: Union[str, os.PathLike], *, model: Optional[str] = None) -> Dict[str, np.ndarray]:
    """{official key: array} of `source`, building a model only where the file holds no such arrays.

    An `.npz` or a release is read as it is; a `.keras` / `.weights.h5` file goes through `load_model`
    (`model` as there). What fine-tuning starts from (`config.init_weights`).
    """
    source = check_weights_argument(source)
    if source is None:
        raise ValueError("source_params needs a source: a .keras, .weights.h5 or .npz file, or a release name.")
    if releases.is_release_name(source):
        release = releases.find_release(source, configs.get_config(model).name if model else None)
        return checkpoints.read_npz(releases.fetch(release.name))
    if source.endswith(".npz"):
        return checkpoints.read_npz(source)
    if source.endswith(".safetensors") or os.path.isdir(source):
        return read_foreign(source, configs.get_config(model).num_heads if model else None)[0]
    return checkpoints.model_params(load_model(source, model=model))
