"""The model a run trains when it is not one of the paper's table: a timm architecture named in
`config.model.name` (`keras_vit.list_models("timm")`), or, with an empty name and no sizes, the architecture of
`config.init_weights` itself (a DINOv2, CLIP, SigLIP, DeiT ... checkpoint: its family's parts, activation and
norms come with it). Also the input normalisation of the run: the init source's mean and std (its data config),
so that a checkpoint trained on ImageNet-normalised pixels is fine-tuned on them."""

from __future__ import annotations

from typing import Callable, Optional

from keras_vit.vit import timm_table
from keras_vit.vit.data_config import DataConfig
from keras_vit.weights import load

# keywords a run sets itself (input size, head, regularisation), never taken from the source's architecture
_RUN_KEYWORDS = {
    "input_shape",
    "classes",
    "include_top",
    "pooling",
    "classifier_activation",
    "dropout_rate",
    "attention_dropout_rate",
    "drop_path_rate",
    "remat",
    "name",
    "weights",
    "input_tensor",
    "dtype",
    "trainable",
    "include_preprocessing",
    "position_grid",
    "data_config",
    "representation_size",
}


def wants_source_architecture(config) -> bool:
    """True when the run's architecture is `config.init_weights`' own (empty model name, no sizes set)."""
    m = config.model
    sizes = ("patch_size", "hidden_size", "mlp_dim", "num_heads", "num_layers")
    return bool(config.init_weights) and not m.name and not any(m[f] for f in sizes) and not m.resnet_layers


def family_keywords(config, checkpoint=None) -> Optional[dict]:
    """`VisionTransformer` keywords of the architecture (sizes and family parts) when it is a timm name or the
    init source's own; None for the paper's table and custom sizes (`build_model`'s own rules)."""
    m = config.model
    if m.name and timm_table.is_timm_name(m.name):
        kw = timm_table.model_kwargs(m.name)
    elif wants_source_architecture(config) and checkpoint is not None:
        kw = checkpoint.architecture()
    else:
        return None
    return {k: v for k, v in kw.items() if k not in _RUN_KEYWORDS}


def data_config(config):
    """The init source's data config (None: the original code's [-1, 1]); a release's dataset name
    (`augreg_in21k`) resolves with the run's table model (`config.model.name`)."""
    if not config.init_weights:
        return None
    name = config.model.name
    return load.data_config(config.init_weights, name if name and not timm_table.is_timm_name(name) else None)


def normalizer(model=None, config=None) -> Callable:
    """Float pixels in [0, 255] -> the model's input values by its data config's mean and std (or, before the
    model exists, by the data config `config.init_weights` implies), as plain arithmetic (tf.data graphs on
    every backend take it; `keras_vit.vit.preprocessing.normalize_pixels` casts with `keras.ops`, which would
    turn a tf.data tensor into the backend's own under JAX)."""
    if model is not None:
        mean, std = model.data_config.for_channels(model.channels)
    else:
        mean, std = DataConfig.from_dict(data_config(config)).for_channels(3)
    scale = [255.0 * s for s in std]
    offset = [255.0 * m for m in mean]
    return lambda pixels: (pixels - offset) / scale
