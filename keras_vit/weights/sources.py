"""The weight sources keras_vit reads, as one table: what each recognises, how it reads into a `Checkpoint` and
what data config it states.

`keras_vit.weights.load` asks this table what a source is (`find`) and has the entry read it; nothing else tells
sources apart. Each reader is a few lines over the module that knows the format (`official`, `releases`,
`timm`, `transformers_vit`, `keras_files`, `hub`). Adding a source is a module that reads it plus one
`Source(...)` line in `SOURCES` (in the order in which sources are recognised).
"""

from __future__ import annotations

import dataclasses
import os
from typing import Callable, Optional

from keras_vit.vit import table
from keras_vit.vit.data_config import ORIGINAL, TIMM_VIT, DataConfig
from keras_vit.vit.labels import label_set_for
from keras_vit.vit.model import VisionTransformer
from keras_vit.weights import hub, keras_files, official, open_clip, releases
from keras_vit.weights import transformers_vit
from keras_vit.weights.timm import repository as timm_repository
from keras_vit.weights.timm import state_dict as timm_state
from keras_vit.weights.checkpoint import Checkpoint


@dataclasses.dataclass(frozen=True)
class Source:
    """One kind of weight source.

    Attributes:
      kind: its name (`Checkpoint.kind`).
      description: how users name it, for error messages.
      recognises: whether a string (an existing path, unless `on_disk` is False) is of this kind.
      read: (source, table model name or None, heads or None, build or None) -> `Checkpoint`.
      data_config: (source, table model name or None) -> the evaluation preprocessing it states, or None
        (the original code's); reads configs only, never the arrays.
      on_disk: False for names that are not paths (hub handles, release names).
      arrays: False for a source read into a built model rather than into arrays (`.weights.h5`).
      fine_tuning_rules: whether the official fine-tuning rules may be asked for by keyword (`resize_posemb`,
        `reset_head`, `old_grid`): not for Keras' own files, which know their model.
      states_data_config: whether the source states its own preprocessing (a bare timm state dict does not: its
        architecture's name says more than timm's generic default).
      check_architecture: (path, the architecture read, the caller's keywords) -> None, or a ValueError for an
        architecture the source cannot state well enough to build (a bare state dict without position
        information).
    """

    kind: str
    description: str
    recognises: Callable[[str], bool]
    read: Callable[..., Checkpoint]
    data_config: Callable[[str, Optional[str]], Optional[DataConfig]]
    on_disk: bool = True
    arrays: bool = True
    fine_tuning_rules: bool = True
    states_data_config: bool = True
    check_architecture: Callable[[str, dict, dict], None] = lambda path, arch, keywords: None


def release_size(release: releases.Release) -> tuple:
    """(height, width) a release was trained at."""
    r = release.resolution
    return (int(r), int(r)) if isinstance(r, int) else (int(r[0]), int(r[1]))


def _read_release(path: str, model_name, num_heads, build) -> Checkpoint:
    release = releases.find_release(path, model_name)
    local = releases.fetch(release.name)
    params = official.read_npz(local)
    grid = official.stated_grid(params, (*release_size(release), 3), True, local)
    return Checkpoint(path, "release", local, params, release=release, old_grid=grid)


def _release_data_config(path: str, model_name) -> DataConfig:
    release = releases.find_release(path, model_name)
    return dataclasses.replace(ORIGINAL, labels=label_set_for(release.classes or 0))


def _read_hub(path: str, model_name, num_heads, build) -> Checkpoint:
    local = hub.resolve(path)
    return dataclasses.replace(find(local).read(local, model_name, num_heads, build), source=path)


def _read_directory(kind: str, reader: Callable) -> Callable[..., Checkpoint]:
    """A timm or `transformers` repository: arrays, what its config states, and the grid it trained at."""

    def read(path: str, model_name, num_heads, build) -> Checkpoint:
        params, implied = reader(path)
        grid = (
            None
            if implied.get("position_resampling")  # NaFlex: any size
            else official.stated_grid(
                params, implied["input_shape"], implied.get("prefix_position_embedding", True), path
            )
        )
        return Checkpoint(path, kind, path, params, implied=implied, old_grid=grid)

    return read


def _read_npz(path: str, *_) -> Checkpoint:
    """An official-layout `.npz`; one `save_npz` wrote states its grid (`official.stated_npz_grid`)."""
    return Checkpoint(path, "npz", path, official.read_npz(path), old_grid=official.stated_npz_grid(path))


def _read_timm_file(path: str, model_name, num_heads, build) -> Checkpoint:
    heads = num_heads or (table.vit_config(model_name).num_heads if model_name else None)
    params, implied, assumed = timm_state.read_timm(path, heads)
    return Checkpoint(path, "safetensors", path, params, implied=implied, assumed=assumed)


def _read_keras(path: str, model_name, num_heads, build) -> Checkpoint:
    model = keras_files.read_keras_file(path)  # its own grid is known: a (8, 2) file never lands raw in (2, 8)
    params = {} if model.quantized_layers() else official.model_params(model)  # int8 kernels have no float form
    return Checkpoint(path, "keras", path, params, old_grid=model.grid_size, model=model)


def _keras_data_config(path: str, model_name) -> Optional[DataConfig]:
    saved = keras_files.saved_data_config(path)
    return DataConfig.from_dict(saved) if saved is not None else None


def _read_weights_h5(path: str, model_name, num_heads, build) -> Checkpoint:
    if build is None and model_name is None:
        raise ValueError(
            f"{path!r} holds weights only: pass model='<table name>' (and the keywords it was "
            "built with) so keras_vit knows what to build."
        )
    model = build() if build is not None else VisionTransformer(**table.vit_config(model_name).model_kwargs())
    keras_files.load_weights_h5(model, path)
    return Checkpoint(path, "weights_h5", path, official.model_params(model), model=model)


def _none(path: str, model_name) -> None:
    return None


def _suffix(suffix: str) -> Callable[[str], bool]:
    return lambda path: os.path.isfile(path) and path.endswith(suffix)


def _read_two_towers(path, *args) -> Checkpoint:
    raise ValueError(
        f"{path!r} is an image-text model in open_clip's layout (both towers): load it with "
        f"keras_vit.load_image_text({path!r}), whose image_model is the image tower."
    )


SOURCES = (
    Source(
        "hub",
        "a hub handle (hf-hub:timm/<name>, hf://<org>/<name>, with @<revision>)",
        hub.is_handle,
        _read_hub,
        lambda path, name: find(hub.resolve(path)).data_config(hub.resolve(path), name),
        on_disk=False,
    ),
    Source(
        "release",
        "a release name (keras_vit.weights.releases.release_names()) or an AugReg filename",
        lambda path: not os.path.exists(path) and releases.is_release_name(path),
        _read_release,
        _release_data_config,
        on_disk=False,
    ),
    Source(
        "timm_dir",
        "a timm repository directory (config.json naming its architecture + model.safetensors)",
        lambda path: os.path.isdir(path) and timm_repository.is_timm_dir(path),
        _read_directory("timm_dir", timm_repository.read),
        lambda path, name: timm_repository.data_config(path),
    ),
    Source(
        "transformers",
        "a transformers ViT directory (config.json + model.safetensors)",
        lambda path: os.path.isdir(path) and transformers_vit.is_transformers_dir(path),
        _read_directory("transformers", transformers_vit.read_transformers),
        lambda path, name: transformers_vit.transformers_data_config(path),
    ),
    Source(
        "open_clip",
        "an open_clip folder (open_clip_config.json + open_clip_model.safetensors): keras_vit.load_open_clip",
        open_clip.is_open_clip_dir,  # after timm's: a timm repository may carry open_clip's files too
        _read_two_towers,
        _none,
    ),
    Source(
        "npz",
        "an official or big_vision .npz",
        _suffix(".npz"),
        _read_npz,  # the class row in the table
        _none,
    ),
    Source("keras", "a .keras model", _suffix(".keras"), _read_keras, _keras_data_config, fine_tuning_rules=False),
    Source(
        "weights_h5",
        "a .weights.h5 file (with the model's name)",
        _suffix(".weights.h5"),
        _read_weights_h5,
        _none,
        arrays=False,
        fine_tuning_rules=False,
    ),
    Source(
        "safetensors",
        "a timm .safetensors state dict",
        _suffix(".safetensors"),
        _read_timm_file,
        lambda path, name: TIMM_VIT,
        states_data_config=False,
        check_architecture=timm_state.refuse_unstated_positions,
    ),
)
BY_KIND = {s.kind: s for s in SOURCES}
FILE_SUFFIXES = (".npz", ".keras", ".weights.h5", ".safetensors")


def find(path: str) -> Optional[Source]:
    """The first source of `SOURCES` that recognises `path`, or None."""
    return next((s for s in SOURCES if s.recognises(path)), None)
