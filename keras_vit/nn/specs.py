"""`compute_output_spec` with arrays: Keras' own method needs `KerasTensor`s and fails deep inside a layer's
`compute_output_shape` when given the arrays users have at hand. Every keras_vit layer and the model take both."""

from __future__ import annotations

import keras


def as_spec(x):
    """An array (anything with a shape and a dtype) as a `KerasTensor` of that shape and dtype; anything else
    as it is."""
    if isinstance(x, keras.KerasTensor) or not hasattr(x, "shape") or not hasattr(x, "dtype"):
        return x
    return keras.KerasTensor(tuple(x.shape), dtype=keras.backend.standardize_dtype(x.dtype))


class ArraySpecs:
    """Mixin for a Keras layer or model: `compute_output_spec` takes arrays as well as `KerasTensor`s."""

    def compute_output_spec(self, *args, **kwargs):
        args = keras.tree.map_structure(as_spec, args)
        kwargs = {k: keras.tree.map_structure(as_spec, v) for k, v in kwargs.items()}
        return super().compute_output_spec(*args, **kwargs)
