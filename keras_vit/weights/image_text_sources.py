"""`load_image_text`: both towers of an image-text model from whichever layout its files are in, open_clip's
(`keras_vit.weights.open_clip`: a folder, an `hf-hub:` handle, open_clip's pretrained name) or `transformers`'
CLIPModel (`keras_vit.weights.transformers_clip`: a folder or an `hf-hub:` handle). A folder says which by its
config file; a hub repository by the files it holds (or, offline, the hub cache holds), open_clip's config first."""

from __future__ import annotations

import os
from typing import Union

from keras_vit.weights import hub, open_clip, transformers_clip

# a transformers repository's files besides config.json and the weights (read where the repository has them)
_TRANSFORMERS_FILES = ("tokenizer.json", "tokenizer_config.json", transformers_clip.PROCESSOR)


def load_image_text(source: Union[str, os.PathLike]) -> "keras.Model":  # noqa: F821
    """An `ImageTextModel` from open_clip's files, a `transformers` CLIP or SigLIP repository, or a `.keras` file
    of one (what the recipes' image-text training saves).

    `source`: a folder, an `hf-hub:<org>/<name>[@revision]` handle, open_clip's pretrained name
    ("ViT-B-32:laion2b_s34b_b79k", `keras_vit.list_models("image-text")`), or a `.keras` file.
    """
    if isinstance(source, (str, os.PathLike)) and os.path.isfile(source):  # a saved model: Keras tells its format
        import keras

        from keras_vit.vit.image_text import ImageTextModel

        try:
            model = keras.saving.load_model(source, compile=False)
        except ValueError as e:
            raise ValueError(
                f"{os.fspath(source)!r}: an image-text model is a .keras file, a folder, an hf-hub: handle or open_clip's "
                f"name ({e}); a big_vision SigLIP .npz holds tensors only: keras_vit.load_big_vision_siglip(path, "
                "model=<open_clip's name of it>)"
            ) from None
        if not isinstance(model, ImageTextModel):
            raise ValueError(
                f"{os.fspath(source)!r} holds a {type(model).__name__}, not an image-text model: an image model "
                "loads with keras_vit.load_model."
            )
        return model
    if isinstance(source, os.PathLike) or (isinstance(source, str) and os.path.isdir(source)):
        folder = os.fspath(source)
        if open_clip.is_open_clip_dir(folder):
            return open_clip.load_open_clip(folder)
        if transformers_clip.is_transformers_clip_dir(folder):
            return transformers_clip.load_transformers_clip(folder)
        raise ValueError(
            f"{folder!r} holds neither open_clip's {open_clip.CONFIG} nor a transformers {transformers_clip.CONFIG} "
            "of model_type 'clip'."
        )
    if not hub.is_handle(source):
        return open_clip.load_open_clip(source)  # open_clip's names, and its error for anything else
    repo, revision = hub.parse(source)
    try:
        hub._download(repo, open_clip.CONFIG, revision, source)
    except ValueError as no_open_clip:  # not in the repository, or (offline) not in the cache
        try:
            hub._download(repo, transformers_clip.CONFIG, revision, source)
        except ValueError:
            raise no_open_clip from None
        return _transformers_repository(source, repo, revision)
    return open_clip.load_open_clip(source)


def _transformers_repository(source: str, repo: str, revision: str):
    folder = hub.resolve(source)  # config.json and the safetensors weights
    for name in _TRANSFORMERS_FILES:
        try:
            hub._download(repo, name, revision, source)
        except ValueError:  # a repository without it: the reader says what that means
            pass
    if not transformers_clip.is_transformers_clip_dir(folder):
        raise ValueError(
            f"{source!r} holds neither open_clip's {open_clip.CONFIG} nor a transformers config of model_type "
            "'clip' (an image model's repository loads with keras_vit.load_model)."
        )
    return transformers_clip.load_transformers_clip(folder)
