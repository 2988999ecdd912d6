"""open_clip's hub layout: a folder with `open_clip_config.json` (`model_cfg`, `preprocess_cfg`) and
`open_clip_model.safetensors` (the whole model's state dict), read into an `ImageTextModel`.

The image tower is open_clip's own ViT (`keras_vit.weights.open_clip_visual`), the text tower open_clip's
`TextTransformer` (`keras_vit.weights.open_clip_text`); besides them the state dict holds `logit_scale` and, for
SigLIP's models, `logit_bias`. Every tensor is mapped or the load is refused naming it, before any weight is set.
A folder holding only `open_clip_pytorch_model.bin` is refused: it is a pickle, which keras_vit never loads.
"""

from __future__ import annotations

import json
import os
from typing import Dict, Optional

import numpy as np

from keras_vit.weights.open_clip_preprocess import data_config

CONFIG = "open_clip_config.json"
WEIGHTS = "open_clip_model.safetensors"
PICKLE = "open_clip_pytorch_model.bin"


def is_open_clip_dir(path) -> bool:
    return os.path.isdir(path) and os.path.exists(os.path.join(path, CONFIG))


def _read_config(directory: str) -> dict:
    path = os.path.join(directory, CONFIG)
    try:
        with open(path) as f:
            config = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise ValueError(f"{path!r} is not a readable open_clip config: {e}") from None
    if not isinstance(config, dict) or not isinstance(config.get("model_cfg"), dict):
        raise ValueError(f"{path!r} has no 'model_cfg' object: not an open_clip config.")
    return config


def _read_state(directory: str) -> Dict[str, np.ndarray]:
    path = os.path.join(directory, WEIGHTS)
    if not os.path.exists(path):
        hint = (
            f" It has {PICKLE}, a pickle keras_vit never loads: load it with open_clip and save the state dict "
            "with safetensors (open_clip's push_to_hf_hub writes both)."
            if os.path.exists(os.path.join(directory, PICKLE))
            else ""
        )
        raise FileNotFoundError(f"{directory!r} has no {WEIGHTS}.{hint}")
    from keras_vit.weights.safetensors_read import mapped_tensors

    with mapped_tensors(path) as (tensors, _):  # bfloat16 files too (numpy has no bfloat16)
        return {k: np.array(v, dtype="float32") for k, v in tensors.items()}


def resolve(source) -> str:
    """The local folder of an open_clip source: a folder as given, or a hub handle (`hf-hub:laion/...`,
    `hf-hub:timm/...`, with `@revision`) or open_clip's model name ("ViT-B-32:laion2b_s34b_b79k",
    `keras_vit.weights.open_clip_names`) fetched through `huggingface_hub`'s cache: the config, the safetensors
    weights and, where the repository has them, `tokenizer.json` and `tokenizer_config.json`."""
    from keras_vit.weights import hub, open_clip_names

    if open_clip_names.is_name(source):
        source = open_clip_names.hub_handle(source)
    elif isinstance(source, str) and not hub.is_handle(source) and not os.path.exists(source):
        close = open_clip_names.close_names(source)
        raise FileNotFoundError(
            f"{source!r}: no such folder, hf-hub: handle or open_clip pretrained name"
            + (f" (close names: {', '.join(close)})" if close else "")
            + "; keras_vit.list_models('image-text') lists the names."
        )
    if not hub.is_handle(source):
        return os.fspath(source)
    from keras_vit.utils.extras import require

    require(["huggingface_hub"], "hub", f"weights={source!r}")
    repo, revision = hub.parse(source)
    config = hub._download(repo, CONFIG, revision, source)
    try:
        hub._download(repo, WEIGHTS, revision, source)
    except ValueError as missing:
        try:
            hub._download(repo, PICKLE, revision, source)
        except ValueError:
            raise missing from None
        raise ValueError(
            f"{source!r} holds {PICKLE} and no {WEIGHTS}: a pickle, which keras_vit never loads (load it with "
            "open_clip and save its state dict with safetensors)."
        ) from None
    for name in ("tokenizer.json", "tokenizer_config.json"):
        try:
            hub._download(repo, name, revision, source)
        except ValueError:  # a repository without its own tokenizer (CLIP's BPE ships with keras_vit)
            pass
    return os.path.dirname(config)


def load_open_clip(directory) -> "keras.Model":  # noqa: F821
    """An `ImageTextModel` with both towers of an open_clip folder (`open_clip_config.json` +
    `open_clip_model.safetensors`), hub repository (`hf-hub:<org>/<name>`) or pretrained model by open_clip's name
    ("ViT-B-16-SigLIP2", "ViT-B-32:laion2b_s34b_b79k": `keras_vit.list_models("image-text")`)."""
    from keras_vit.weights import open_clip_names, open_clip_text, open_clip_visual

    quick_gelu = open_clip_names.is_name(directory) and open_clip_names.pretrained(directory)[1]
    directory = resolve(directory)
    config = _read_config(directory)
    cfg = config["model_cfg"]
    source = os.path.join(directory, CONFIG)
    if quick_gelu and not cfg.get("quick_gelu"):
        if "quick_gelu" in cfg:
            raise ValueError(
                f"{source} says quick_gelu=false, and open_clip records these weights as trained with QuickGELU: "
                "the two disagree; load the folder by path to use its config as it is."
            )
        cfg["quick_gelu"] = True  # open_clip's record of the weights (its own loader only warns); kept in the config
    if "embed_dim" not in cfg:
        raise ValueError(f"{source}: model_cfg has no embed_dim, the shared embedding's width.")
    open_clip_text.text_tower(cfg, source)
    open_clip_visual.image_tower(cfg, source)  # refusals before the weights are read
    return from_state(config, _read_state(directory), directory, source, os.path.join(directory, WEIGHTS))


_OPEN_CLIPS = object()  # from_state's default tokenizer: the one open_clip picks for the folder


def from_state(
    config: dict,
    sd: Dict[str, np.ndarray],
    directory: str,
    source: str,
    weights_path: str,
    *,
    tokenizer=_OPEN_CLIPS,
    no_tokenizer: str = "",
    open_clip_files: bool = True,
    **fields,
):
    """An `ImageTextModel` from an open_clip config and state dict (every tensor mapped, or refused naming it).
    `fields`: fields of the text tower's record that the config cannot state (a `transformers` repository's
    pooling); `tokenizer`: the one to attach instead of open_clip's pick (None: none, `no_tokenizer` saying why);
    `open_clip_files`: the config is open_clip's own file (kept for `save_open_clip`), not a restatement."""
    import dataclasses

    from keras_vit.nn.initializers import weights_follow
    from keras_vit.vit.image_text import ImageTextModel
    from keras_vit.vit.model import VisionTransformer
    from keras_vit.vit.text_model import TextTransformer
    from keras_vit.weights import official, open_clip_text, open_clip_visual
    from keras_vit.weights.keys import _Reader
    from keras_vit.weights.timm.reader import timm_to_official

    cfg = config["model_cfg"]
    tower = dataclasses.replace(open_clip_text.text_tower(cfg, source), **fields)
    _, image_kw = open_clip_visual.image_tower(cfg, source)
    g = _Reader(sd, weights_path)
    text_params = open_clip_text.read_text(g, tower, open_clip_text.text_prefix(sd))
    visual = open_clip_visual.timm_state({k: sd[k] for k in sd if k.startswith("visual.")})
    for key in sd:
        if key.startswith("visual."):
            g(key)
    image_params = timm_to_official(visual, image_kw["num_heads"], weights_path)
    scale = float(g("logit_scale"))
    bias = float(g("logit_bias")) if "logit_bias" in sd else None
    g.check_all_used()
    with weights_follow():  # every variable is assigned from the file next: no random draws (or XLA programs) first
        image_model = VisionTransformer(
            **image_kw,
            classifier_activation=None,
            data_config=data_config(config.get("preprocess_cfg"), source),
            name="image_model",
        )
        text_model = TextTransformer(tower, name="text_model")
    official.load_params(image_model, image_params, weights_path, reset_head=False)
    open_clip_text.assign(text_model, text_params, weights_path)
    text_cfg = cfg.get("text_cfg") or {}
    if tokenizer is _OPEN_CLIPS:
        tokenizer = _tokenizer(directory, tower, text_cfg)
        no_tokenizer = (
            f"{source} names the Hugging Face tokenizer {text_cfg.get('hf_tokenizer_name')!r}, and {directory!r} "
            "holds no tokenizer.json of it"
        )
    model = ImageTextModel(
        image_model,
        text_model,
        logit_scale=scale,
        logit_bias=bias,
        tokenizer=tokenizer,
        open_clip_config=config if open_clip_files else None,
    )
    if tokenizer is None:
        model.no_tokenizer = no_tokenizer
    return model


def _tokenizer(directory: str, tower, text_cfg: dict):
    """The tokenizer open_clip's `get_tokenizer` picks for a local folder: the folder's own Hugging Face
    tokenizer where the config names one (`hf_tokenizer_name`), else CLIP's BPE; with the config's
    `tokenizer_kwargs` (its cleaning) and context length."""
    kwargs = dict(text_cfg.get("tokenizer_kwargs") or {})
    clean = kwargs.pop("clean", None)
    if kwargs or text_cfg.get("tokenizer_mode"):
        extra = sorted(kwargs) or ["tokenizer_mode"]
        raise ValueError(f"{directory!r}: text_cfg names tokenizer settings keras_vit does not apply: {extra}.")
    if not text_cfg.get("hf_tokenizer_name"):
        return {"kind": "clip", "clean": clean or "lower"}
    from keras_vit.vit.hub_tokenizer import TOKENIZER_FILE, HubTokenizer

    if os.path.exists(os.path.join(directory, TOKENIZER_FILE)):
        return HubTokenizer(directory, tower.context_length, clean=clean or "whitespace")
    return None  # its tokenizer lives elsewhere (`text_preprocessor` says so when asked)


def save_open_clip(model, directory, *, overwrite: bool = False, preprocess_cfg: Optional[dict] = None) -> str:
    """Writes an `ImageTextModel` in open_clip's layout: `open_clip_config.json` and `open_clip_model.safetensors`
    holding every tensor under open_clip's names, which open_clip's `create_model(..., pretrained=<file>)` loads
    strictly. The config is the one the model was read from (open_clip's files), else one written for it
    (`keras_vit.weights.open_clip_config`: a LiT model of the recipes, two towers put together by hand), whose
    `preprocess_cfg` the caller may state. Atomic; an existing folder is replaced only with `overwrite=True` and
    only when it holds an earlier output of this writer."""
    import keras
    from safetensors.numpy import save_file

    from keras_vit.utils import atomic
    from keras_vit.weights import open_clip_text, open_clip_visual
    from keras_vit.weights.safetensors_files import timm_state_dict

    from keras_vit.weights.open_clip_config import model_config

    config = getattr(model, "open_clip_config", None)
    if config and preprocess_cfg is not None:
        config = dict(config, preprocess_cfg=dict(preprocess_cfg))
    config = config or model_config(model, preprocess_cfg)
    cfg = config["model_cfg"]
    trunk = bool((cfg.get("vision_cfg") or {}).get("timm_model_name"))
    sd = open_clip_visual.open_clip_state(timm_state_dict(model.image_model), trunk)
    sd.update(open_clip_text.write_text(model.text_model, "text." if cfg.get("custom_text") else ""))
    sd["logit_scale"] = np.asarray(keras.ops.convert_to_numpy(model.logit_scale), "float32").reshape(())
    if model.logit_bias is not None:
        sd["logit_bias"] = np.asarray(keras.ops.convert_to_numpy(model.logit_bias), "float32").reshape(())
    sd = {k: np.array(v, dtype="float32", order="C") for k, v in sd.items()}  # (ascontiguousarray makes scalars 1-D)

    def fill(tmp: str) -> None:
        save_file(sd, os.path.join(tmp, WEIGHTS), metadata={"format": "pt"})
        with open(os.path.join(tmp, CONFIG), "w") as f:
            json.dump(config, f, indent=2)

    return atomic.write_directory(directory, fill, overwrite=overwrite, replaceable=is_open_clip_dir)
