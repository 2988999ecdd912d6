"""A model written as `.safetensors` for PyTorch's libraries: a timm state dict or a `transformers` ViT directory.

Written so that `timm.create_model(..., pretrained_cfg_overlay=dict(file=path))` and
`ViTForImageClassification.from_pretrained(dir)` load them without missing or unexpected keys. The layouts are
`keras_vit.weights.timm` and `keras_vit.weights.transformers_vit`; reading is theirs too.
"""

from __future__ import annotations

import json
import os
from typing import Dict, Optional

import numpy as np

from keras_vit.utils import atomic
from keras_vit.vit.labels import class_names
from keras_vit.vit.model import ensure_vit
from keras_vit.weights import official, transformers_vit
from keras_vit.weights.timm import state_dict as timm_state
from keras_vit.weights.transformers_vit import HF_CONFIG, HF_WEIGHTS, is_transformers_dir


def _plain_params(model, layout: str) -> tuple:
    """({official key: float32 array}, depth) of a plain ViT that PyTorch's libraries can hold, or a ValueError
    naming what they cannot (a hybrid stem, a representation layer)."""
    model = ensure_vit(model, f"{layout} writers take keras_vit models")
    if model.stem is not None and layout != "timm":
        raise ValueError(f"Model {model.name!r} is a hybrid; {layout} has no hybrid ViT.")
    if model.pre_logits is not None:
        raise ValueError(
            f"Model {model.name!r} has a representation (pre-logits) layer, which {layout}'s "
            "classifier lacks; rebuild it without one (representation_size=None) to export."
        )
    foreign = model.variant.non_official_parts(model.num_prefix_tokens > 0) + (
        [f"classifier={model.classifier!r}"] if model.classifier == "map" else []
    )
    if layout == "transformers" and foreign:
        raise ValueError(
            f"Model {model.name!r} has parts a transformers ViT lacks: {'; '.join(foreign)}. Write it "
            "with keras_vit.save_pretrained (a timm repository) instead."
        )
    params = {k: np.ascontiguousarray(v, dtype="float32") for k, v in official.model_params(model).items()}
    return params, model.vit_config.num_layers


def timm_state_dict(model, entry: Optional[dict] = None) -> Dict[str, np.ndarray]:
    """`model` as the state dict of timm's architecture (without a head where the model has none: timm's
    `num_classes=0`); `entry`: the table entry of the registered architecture it is written as, where the caller
    has found it already (`keras_vit.weights.timm.model_args.registered_architecture`)."""
    params, n = _plain_params(model, "timm")
    return timm_state.laid_out_as_timm(model, params, n, entry)


def save_safetensors(model, path: str, layout: str = "timm") -> str:
    """Writes `model` for PyTorch users, atomically: `layout="timm"` a `.safetensors` state dict of timm's
    `VisionTransformer` (its `Eva`, NaFlexVit or other registered architecture for the parts timm builds by name, laid out as that
    architecture is: `keras_vit.weights.timm.model_args.registered_architecture`); `layout="transformers"` a directory (`config.json` +
    `model.safetensors`) for `ViTForImageClassification.from_pretrained`. Returns the path written."""
    from safetensors.numpy import save_file

    if layout not in ("timm", "transformers"):
        raise ValueError(f"layout={layout!r}; expected 'timm' or 'transformers'.")
    params, n = _plain_params(model, layout)
    if layout == "timm":
        if not str(path).endswith(".safetensors"):
            raise ValueError(
                f"layout='timm' writes one .safetensors file; got {path!r} (a timm repository "
                "directory: keras_vit.save_pretrained)."
            )
        sd = timm_state.laid_out_as_timm(model, params, n)
        return atomic.write_file(path, lambda tmp: save_file(sd, tmp, metadata={"format": "pt"}))
    if model.classifier != "token" or not model.include_top:
        raise ValueError(
            f"transformers' ViTForImageClassification classifies the class token with a head; model "
            f"{model.name!r} is classifier={model.classifier!r}, include_top={model.include_top}."
        )
    sd = transformers_vit.official_to_transformers(params, n)
    c = model.vit_config
    known = model.data_config.labels  # transformers' placeholders where the model names no classes
    names = class_names(known, model.classes) if known is not None else [f"LABEL_{i}" for i in range(model.classes)]
    config = dict(
        model_type="vit",
        architectures=["ViTForImageClassification"],
        hidden_size=c.hidden_size,
        num_hidden_layers=c.num_layers,
        num_attention_heads=c.num_heads,
        intermediate_size=c.mlp_dim,
        hidden_act="gelu_pytorch_tanh" if model.gelu_approximate else "gelu",
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        initializer_range=0.02,
        layer_norm_eps=1e-6,
        image_size=model.image_size[0],
        patch_size=c.patch_size,
        num_channels=model.channels,
        qkv_bias=True,
        id2label={str(i): name for i, name in enumerate(names)},
        label2id={name: i for i, name in enumerate(names)},
    )
    if model.dynamic_size or model.image_size[0] != model.image_size[1]:
        raise ValueError(f"transformers' ViT config has one image_size; model {model.name!r} is {model.image_size}.")

    def fill(tmp_dir: str) -> None:
        save_file(sd, os.path.join(tmp_dir, HF_WEIGHTS), metadata={"format": "pt"})
        with open(os.path.join(tmp_dir, HF_CONFIG), "w") as f:
            json.dump(config, f, indent=2)

    return atomic.write_directory(path, fill, overwrite=True, replaceable=is_transformers_dir)
