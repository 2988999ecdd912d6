"""The `keras.applications`-style constructors of the paper's models (`ViT_B16`, ...): one per row of the model
table (`keras_vit.vit.table.MODELS`), each a `create_model` of that row.

They are made from the table rather than written out: each has `VisionTransformer`'s use keywords (sizes and
`resnet_*` come from the row) plus `weights`, as its signature for `help()` and IDEs, the shared documentation
of `keras_vit.applications.docstring`, and the record's fields as further keywords. A misspelt keyword is refused
naming the closest valid one.
"""

from __future__ import annotations

import inspect

from keras_vit.applications.create import create_model
from keras_vit.applications.docstring import constructor_doc
from keras_vit.utils import validate
from keras_vit.vit import table
from keras_vit.vit.model import VisionTransformer
from keras_vit.vit.variant import Variant

_MODEL = inspect.signature(VisionTransformer.__init__).parameters
_NAMED = [p for name, p in _MODEL.items() if name not in ("self", "options", *table.SIZE_FIELDS)]
SIGNATURE = inspect.Signature(
    [
        _NAMED[0].replace(kind=inspect.Parameter.POSITIONAL_OR_KEYWORD),  # include_top
        inspect.Parameter("weights", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None),
        *[p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in _NAMED[1:]],
        inspect.Parameter("options", inspect.Parameter.VAR_KEYWORD),
    ],
    return_annotation=VisionTransformer,
)
KEYWORDS = (*[p for p in SIGNATURE.parameters if p != "options"], "gelu_approximate", *Variant.fields())


def python_name(model_name: str) -> str:
    """A table name as Python spells it ("R50+ViT-B/16" -> "R50_ViT_B16")."""
    return model_name.replace("+", "_").replace("-", "_").replace("/", "")


def _constructor(model_name: str):
    """The constructor of `model_name`'s row, named as Python spells it."""
    function_name = python_name(model_name)

    def constructor(*args, **kwargs) -> VisionTransformer:
        bound = SIGNATURE.bind(*args, **kwargs)
        arguments = dict(bound.arguments)
        options = arguments.pop("options", {})
        validate.refuse_unknown(f"{function_name}()", options, KEYWORDS)
        return create_model(model_name, **arguments, **options)

    constructor.__name__ = constructor.__qualname__ = function_name
    constructor.__module__ = __name__
    constructor.__signature__ = SIGNATURE
    constructor.__doc__ = constructor_doc(model_name)
    return constructor


# one line per row of the table (named here so that IDEs and `from ... import` see them)
ViT_Ti16 = _constructor("ViT-Ti/16")
ViT_S16 = _constructor("ViT-S/16")
ViT_S32 = _constructor("ViT-S/32")
ViT_B8 = _constructor("ViT-B/8")
ViT_B16 = _constructor("ViT-B/16")
ViT_B32 = _constructor("ViT-B/32")
ViT_L16 = _constructor("ViT-L/16")
ViT_L32 = _constructor("ViT-L/32")
ViT_H14 = _constructor("ViT-H/14")
R50_ViT_B16 = _constructor("R50+ViT-B/16")
R50_ViT_B32 = _constructor("R50+ViT-B/32")
R50_ViT_L16 = _constructor("R50+ViT-L/16")
R50_ViT_L32 = _constructor("R50+ViT-L/32")
R26_ViT_S32 = _constructor("R26+ViT-S/32")
R26_ViT_B32 = _constructor("R26+ViT-B/32")
R_ViT_Ti16 = _constructor("R+ViT-Ti/16")

# {Python name: constructor}, in the table's order
CONSTRUCTORS = {f.__name__: f for f in (globals()[python_name(name)] for name in table.MODELS)}
