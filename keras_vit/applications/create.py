"""`create_model`: a model by name, from the paper's table or timm's registry, with its weights applied.

A release's own head size is resolved here, before building; the model class itself does no file I/O
(`keras_vit.weights` applies `weights=`).
"""

from __future__ import annotations

from typing import Optional

from keras_vit.nn.initializers import weights_follow
from keras_vit.utils import validate
from keras_vit.vit import table, timm_table
from keras_vit.vit.model import VisionTransformer, keywords
from keras_vit.vit.variant import Variant
from keras_vit.weights import load, sources
from keras_vit.weights.checkpoint import Checkpoint


def create_model(
    model_name: str, *, weights=None, classes: Optional[int] = None, representation_size: Optional[int] = None, **kwargs
) -> VisionTransformer:
    """Builds a model by name: `create_model("ViT-B/16", classes=10)`, `create_model("vit_small_patch14_dinov2")`.

    Names as in the paper ("ViT-B/16", "R50+ViT-B/16") or the checkpoints ("ViT-B_16"), or a timm architecture
    of the ViT family (`keras_vit.list_models("timm")`; a pretrained tag after "." is ignored), built with timm's
    defaults (image size, head, norms, activation) unless a keyword says otherwise. `weights` and the other
    keywords as in `keras_vit.ViT_B16`. A release name without `classes` gives the release's own head.
    """
    validate.refuse_unknown("create_model()", kwargs, keywords() | {"weights"})
    timm_spelling = isinstance(model_name, str) and model_name == model_name.lower() and "_" in model_name
    if (timm_table.is_timm_name(model_name) or timm_spelling) and not _is_table_name(model_name):
        arguments = timm_table.model_kwargs(model_name)
        classes = validate.integer("classes", classes, allow_none=True)
        if classes is not None:
            arguments.update(classes=classes, include_top=True)
        if isinstance(kwargs.get("variant"), (dict, Variant)):  # the caller's fields over the name's
            arguments.update(Variant.flatten(kwargs.pop("variant")))
        arguments.update(kwargs)
        source = load.read_source(weights, None, arguments["num_heads"]) or weights  # read once, used thrice
        if arguments.get("data_config") is None:  # a source's own config, else timm's for the name's default tag
            stated = (
                load.data_config(source, None)
                if weights is not None
                and (not isinstance(source, Checkpoint) or sources.BY_KIND[source.kind].states_data_config)
                else None
            )
            arguments["data_config"] = stated or timm_table.data_config(model_name)
        with weights_follow(weights is not None):  # assigned from `weights` next: no random draws first
            model = VisionTransformer(**arguments, representation_size=representation_size)
        return load.load_weights(model, source)
    config = table.vit_config(model_name)
    classes, representation_size = load.head_size(weights, config.name, classes, representation_size)  # no read
    source = load.read_source(weights, config.name, kwargs.get("num_heads", config.num_heads)) or weights
    if kwargs.get("data_config") is None:
        kwargs["data_config"] = load.data_config(source, config.name)
    with weights_follow(weights is not None):
        model = VisionTransformer(
            **config.model_kwargs(), classes=classes, representation_size=representation_size, **kwargs
        )
    return load.load_weights(model, source)


def _is_table_name(name) -> bool:
    try:
        table.vit_config(name)
        return True
    except ValueError:
        return False
