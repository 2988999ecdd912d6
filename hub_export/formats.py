"""Runtime exports through Keras' own exporters: `saved_model`, `litert`, `onnx`, `openvino`.

Each export is a directory (written atomically, with `metadata.json` marking it as ours) holding one
model file: `saved_model/`, `model.tflite`, `model.onnx` or `model.xml` + `model.bin`. TensorFlow writes them
all; ONNX is also written on JAX and PyTorch (`hub_export.onnx_file`). Inputs are the
model's own range (`model.input_range`: [-1, 1], or [0, 255] with `include_preprocessing`), NHWC
float32; a model built with `input_shape=(None, None, C)` exports with free height and width.
`quantize` ("int8", "dynamic_range") runs each runtime's own post-training quantizer on that float32 file
(`hub_export.quantization`).
"""

from __future__ import annotations

import os
from typing import Iterable, Optional

import keras
import numpy as np

from hub_export import onnx_file, quantization

FORMATS = ("hub", "saved_model", "litert", "onnx", "openvino", "serving")
FILES = {"saved_model": "saved_model", "litert": "model.tflite", "onnx": "model.onnx", "openvino": "model.xml"}
NEEDS = {"litert": ("ai_edge_litert",), "openvino": ("openvino",)}  # the packages that write and check a format
EXTRAS = {"litert": "litert", "openvino": "openvino"}  # setup.cfg's extra that installs them (also in [export])
WITHOUT_TENSORFLOW = ("onnx",)  # written on the JAX and PyTorch backends too (`hub_export.onnx_file`)


def needs(fmt: str) -> tuple:
    """The modules `fmt` needs on the running backend."""
    if fmt == "onnx":
        return onnx_file.NEEDS.get(keras.backend.backend(), ())
    return NEEDS.get(fmt, ())


def extra(fmt: str) -> str:
    """The extra that installs `needs(fmt)`."""
    if fmt == "onnx":
        return onnx_file.EXTRAS.get(keras.backend.backend(), "onnx")
    return EXTRAS.get(fmt, "export")


def then(fmt: str) -> str:
    """A further install step after `extra(fmt)`'s, where one is needed ("" otherwise)."""
    return onnx_file.THEN.get(keras.backend.backend(), "") if fmt == "onnx" else ""


def check_backend(fmt: str, model: Optional[keras.Model] = None) -> None:
    """Refuses, in one message saying what to do instead, a format the running backend does not write: all but
    ONNX (float or quantized by onnxruntime) are written by TensorFlow, and ONNX there needs a fixed image size
    (checked when `model` is given). Called before anything is built or written (the CLI: before the model)."""
    backend = keras.backend.backend()
    if fmt == "onnx" and model is not None:
        onnx_file.check_size(model)
    if backend == "tensorflow" or fmt in WITHOUT_TENSORFLOW:
        return
    raise ValueError(
        f"format={fmt!r} is written by TensorFlow; on the {backend} backend only format='onnx' is. Save the model "
        f"(model.save('model.keras')) and export that file where TensorFlow is installed (pip install "
        f"'keras-vision-transformer[tensorflow,export]'): KERAS_BACKEND=tensorflow keras-vit-export "
        f"--weights=model.keras --format={fmt} --out=DIR"
    )


def _signature(net: keras.Model):
    import tensorflow as tf

    return [tf.TensorSpec(onnx_file.input_shape(net), tf.float32, name=onnx_file.INPUT)]


def write(
    net: keras.Model,
    directory: str,
    fmt: str,
    channels: int,
    *,
    quantize: Optional[str] = None,
    representative_images: Optional[Iterable[np.ndarray]] = None,
    preprocessing=None,
) -> str:
    """Writes `net` in `fmt` under `directory` (which exists; `check_backend` has passed); returns the model
    file's path. For
    "saved_model", `preprocessing` (the model's `ImagePreprocessing`) adds the endpoint `serve_pixels`: images
    of any size in [0, 255], prepared as the checkpoint was evaluated."""
    if fmt not in FILES:
        raise ValueError(f"format={fmt!r}; expected one of {', '.join(FORMATS)}.")
    quantization.check(quantize, fmt)
    path = os.path.join(directory, FILES[fmt])
    signature = _signature(net) if keras.backend.backend() == "tensorflow" else None
    if quantize:
        quantization.write(net, path, signature, fmt, quantize, representative_images)
    elif fmt == "onnx":
        onnx_file.write(net, path)
    elif fmt == "saved_model" and preprocessing is not None:
        _saved_model(net, path, signature, preprocessing, channels)
    else:
        keras_format = "tf_saved_model" if fmt == "saved_model" else fmt
        net.export(path, format=keras_format, input_signature=signature, verbose=False)
    return path


def _saved_model(net, path: str, signature, preprocessing, channels: int) -> None:
    """Keras' own SavedModel export (`serve`, the default signature, on the model's input) plus `serve_pixels`
    on pixels in [0, 255] of any size, through the checkpoint's preprocessing."""
    import tensorflow as tf

    archive = keras.export.ExportArchive()
    archive.track(net)
    archive.add_endpoint("serve", _checked(net, channels), input_signature=signature)
    archive.add_endpoint(
        "serve_pixels",
        lambda images: net(preprocessing(images), training=False),
        input_signature=[tf.TensorSpec((None, None, None, channels), tf.float32, name="images")],
    )
    archive.write_out(path, verbose=False)


def _checked(net, channels: int):
    """`net`'s call for the `serve` signature, which first checks the images' size: a SavedModel signature does
    not check shapes, so another size would fail deep in the graph ("Incompatible shapes: [1,37,32] vs.
    [1,17,32]"); this names the size the export takes."""
    import tensorflow as tf

    h, w = net.input_shape[1:3]

    def serve(images):
        if h is not None and w is not None:
            fits = tf.reduce_all(tf.equal(tf.shape(images)[1:], tf.constant([h, w, channels])))
            check = tf.debugging.Assert(
                fits,
                [
                    f"images must be (batch, {h}, {w}, {channels}) for this export (channels last); got shape",
                    tf.shape(images),
                ],
            )
            with tf.control_dependencies([check]):
                images = tf.identity(images)
        return net(images, training=False)

    return serve


def runtime_model(path: str):
    """A callable images -> outputs in the format's own runtime (what the tests and the demo compare)."""
    if path.endswith(".onnx"):
        import onnxruntime

        session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
        name = session.get_inputs()[0].name
        return lambda x: session.run(None, {name: np.asarray(x, dtype="float32")})[0]
    if path.endswith(".tflite"):
        from ai_edge_litert.interpreter import Interpreter

        interpreter = Interpreter(model_path=path, num_threads=os.cpu_count())  # its default is one thread

        def run(x):
            x = np.asarray(x, dtype="float32")
            index = interpreter.get_input_details()[0]["index"]
            interpreter.resize_tensor_input(index, x.shape)
            interpreter.allocate_tensors()
            interpreter.set_tensor(index, x)
            interpreter.invoke()
            return interpreter.get_tensor(interpreter.get_output_details()[0]["index"])

        return run
    if path.endswith(".xml"):
        import openvino

        # f32 explicitly: on CPUs with bf16 units OpenVINO otherwise computes in bf16 (7e-4 off here)
        compiled = openvino.Core().compile_model(path, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
        return lambda x: compiled(np.asarray(x, dtype="float32"))[0]
    import tensorflow as tf

    loaded = tf.saved_model.load(path)
    serve = loaded.signatures["serving_default"]
    name = next(iter(serve.structured_input_signature[1]))
    return lambda x: list(serve(**{name: tf.constant(np.asarray(x, dtype="float32"))}).values())[0].numpy()
