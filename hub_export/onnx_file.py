"""The `model.onnx` of a Keras model on each backend, with a free batch dimension and one input: float32 "images"
for an image model, int32 "token_ids" for a text tower.

- TensorFlow: Keras' exporter (tf2onnx on the traced `tf.function`).
- JAX: Keras' exporter, which converts the jitted call with jax2onnx; no TensorFlow is involved.
- PyTorch: `torch.onnx.export` with `dynamo=True` and the batch declared as a `torch.export.Dim`. Keras' own
  exporter takes TorchScript's tracer when a dimension is free, and that tracer records `LayerNormalization`'s
  shape as a tensor it cannot export ("Failed to export a node ... because it is not constant"); the dynamo
  exporter keeps the shape symbolic.

Height and width are free when the model was built with `input_shape=(None, None, C)` on TensorFlow only: jax2onnx
cannot compare the symbolic sizes the patch grid is computed from, and the dynamo exporter needs a size it can
trace. Such a model is refused on JAX and PyTorch by name.
"""

from __future__ import annotations

from typing import Optional

import keras

INPUT = "images"
NEEDS = {
    "tensorflow": ("onnx", "tf2onnx", "onnxruntime"),
    "jax": ("onnx", "jax2onnx", "onnxruntime"),
    "torch": ("onnx", "onnxscript", "onnxruntime"),
}  # what writes and checks the file on each backend
EXTRAS = {"tensorflow": "onnx", "jax": "onnx-jax", "torch": "onnx"}  # setup.cfg's extra that installs them
# jax2onnx 0.17.1 pins orbax-checkpoint<0.11.37, which would downgrade the Orbax `[jax]` installs (0.12.x) although
# jax2onnx never imports Orbax: `[onnx-jax]` installs its other requirements and jax2onnx goes in without its own
JAX2ONNX = "jax2onnx==0.17.1"
THEN = {"jax": f"pip install --no-deps '{JAX2ONNX}'"}


def input_shape(net: keras.Model) -> tuple:
    """(None, H, W, C): the export's input, H and W None for an any-size model."""
    return (None,) + tuple(net.input_shape[1:])


def check_size(net: keras.Model) -> None:
    """Refuses, before anything is written, an any-size model on a backend whose exporter needs a fixed size."""
    backend = keras.backend.backend()
    if backend != "tensorflow" and None in input_shape(net)[1:3]:
        raise ValueError(
            f"format='onnx' on the {backend} backend needs a fixed image size, and the model takes any "
            "size: build it with input_shape=(H, W, C), or export it on TensorFlow."
        )


def write(
    net: keras.Model, path: str, dtype: str = "float32", name: str = INPUT, shape: Optional[tuple] = None
) -> None:
    """Writes `net` as ONNX at `path` on the running backend (`check_size` first): its one input, named `name`, of
    `dtype` and `shape` (default `net`'s input shape with a free batch: NHWC float32 images by default)."""
    shape = tuple(shape) if shape is not None else input_shape(net)
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        signature = [tf.TensorSpec(shape, tf.as_dtype(dtype), name=name)]
        net.export(path, format="onnx", input_signature=signature, verbose=False)
    elif backend == "jax":
        signature = [keras.InputSpec(shape=shape, dtype=dtype, name=name)]
        net.export(path, format="onnx", input_signature=signature, verbose=False)
    elif backend == "torch":
        _torch(net, path, shape, dtype, name)
    else:
        raise ValueError(f"format='onnx' is not written on the {backend} backend.")


def _torch(net: keras.Model, path: str, shape: tuple, dtype: str, name: str) -> None:
    import torch

    class OneInput(torch.nn.Module):  # one named positional input, the form torch.export declares shapes for
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, inputs):
            return self.model(inputs, training=False)

    sample = torch.zeros((2,) + tuple(shape[1:]), dtype=getattr(torch, dtype))
    program = torch.onnx.export(
        OneInput(net).eval(),
        (sample,),
        input_names=[name],
        dynamo=True,
        verbose=False,
        dynamic_shapes=({0: torch.export.Dim("batch", min=1)},),
    )
    program.optimize()
    program.save(path)
