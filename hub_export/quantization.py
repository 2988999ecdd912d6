"""Post-training int8 quantization, each runtime by its own quantizer.

- LiteRT: TF's converter (`tf.lite.TFLiteConverter`, `Optimize.DEFAULT`).
- ONNX: onnxruntime's `quantize_static` (QDQ, int8 weights per output channel, int8 activations calibrated by
  min/max) or `quantize_dynamic` (int8 weights; activations quantized per call).
- OpenVINO: NNCF's `quantize` with the transformer preset (it keeps LayerNorm, softmax and GELU in float and
  smooths the MLP's outliers) or `compress_weights` (int8 weights only).

"int8" quantizes weights and activations, calibrated on `representative_images` (inputs in the model's own range,
e.g. `model.to_input_range(pixels)` or the checkpoint's preprocessing); "dynamic_range" quantizes the weights only
and needs no images. Each writer starts from the runtime's float32 file written by Keras' exporter.
"""

from __future__ import annotations

import os
import tempfile
from typing import Optional, Sequence

import numpy as np

from hub_export import onnx_file

MODES = ("int8", "dynamic_range")
# the products quantized in ONNX: the rest (LayerNorm, softmax, GELU, residual sums, reshapes) stays float, as
# NNCF's transformer preset keeps it
ONNX_OPS = ["MatMul", "Gemm", "Conv"]


def litert(net, path: str, signature, quantize: str, batches: Sequence[np.ndarray]) -> None:
    """Writes `net` as a quantized `model.tflite` at `path` (float32 input and output)."""
    import tensorflow as tf

    with tempfile.TemporaryDirectory() as tmp:
        saved = os.path.join(tmp, "saved_model")
        net.export(saved, format="tf_saved_model", input_signature=signature, verbose=False)
        converter = tf.lite.TFLiteConverter.from_saved_model(saved)
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        if quantize == "int8":

            def representative():
                for batch in batches:
                    for image in batch:
                        yield [image[None]]

            converter.representative_dataset = representative
            converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8, tf.lite.OpsSet.TFLITE_BUILTINS]
        with open(path, "wb") as f:
            f.write(converter.convert())


def onnx(net, path: str, signature, quantize: str, batches: Sequence[np.ndarray]) -> None:
    """Writes `net` as a quantized `model.onnx` at `path` through onnxruntime's quantizer."""
    from onnxruntime import quantization as q

    with tempfile.TemporaryDirectory() as tmp:
        float_path, prepared = os.path.join(tmp, "float.onnx"), os.path.join(tmp, "prepared.onnx")
        onnx_file.write(net, float_path)  # on any backend
        # shape inference and graph fusions first, as onnxruntime's quantization guide asks
        q.quant_pre_process(float_path, prepared, skip_symbolic_shape=True)
        if quantize == "dynamic_range":
            q.quantize_dynamic(
                prepared, path, weight_type=q.QuantType.QInt8, per_channel=True, op_types_to_quantize=ONNX_OPS
            )
            return
        calibration = _OnnxCalibration(onnx_file.INPUT, batches)
        q.quantize_static(
            prepared,
            path,
            calibration,
            quant_format=q.QuantFormat.QDQ,
            per_channel=True,
            activation_type=q.QuantType.QInt8,
            weight_type=q.QuantType.QInt8,
            calibrate_method=q.CalibrationMethod.MinMax,
            op_types_to_quantize=ONNX_OPS,
        )


class _OnnxCalibration:
    """onnxruntime's `CalibrationDataReader` protocol over the calibration batches (one feed per batch), fed to
    the input the export's signature names."""

    def __init__(self, input_name: str, batches: Sequence[np.ndarray]):
        self._feeds = iter([{input_name: np.asarray(b, dtype="float32")} for b in batches])

    def get_next(self):
        return next(self._feeds, None)


def openvino(net, path: str, signature, quantize: str, batches: Sequence[np.ndarray]) -> None:
    """Writes `net` as a quantized `model.xml` + `model.bin` at `path` through NNCF."""
    import nncf
    import openvino as ov

    with tempfile.TemporaryDirectory() as tmp:
        float_path = os.path.join(tmp, "model.xml")
        net.export(float_path, format="openvino", input_signature=signature, verbose=False)
        model = ov.Core().read_model(float_path)
        if quantize == "dynamic_range":
            model = nncf.compress_weights(model, mode=nncf.CompressWeightsMode.INT8_ASYM)
        else:
            images = [image[None] for batch in batches for image in batch]  # NNCF's statistics expect batch 1
            model = nncf.quantize(
                model,
                nncf.Dataset(images),
                subset_size=len(images),
                model_type=nncf.ModelType.TRANSFORMER,
                preset=nncf.QuantizationPreset.MIXED,
            )
        ov.save_model(model, path, compress_to_fp16=False)


WRITERS = {"litert": litert, "onnx": onnx, "openvino": openvino}
NEEDS_IMAGES = (
    "quantize='int8' needs representative_images (a few hundred inputs in the model's range) to "
    "calibrate activations; quantize='dynamic_range' needs none."
)


def check(quantize: Optional[str], fmt: str) -> None:
    """Refuses, naming it, a `quantize` mode or a format that no runtime quantizer here takes (None passes)."""
    if quantize is None:
        return
    if fmt not in WRITERS:
        raise ValueError(f"quantize={quantize!r} applies to format {', '.join(map(repr, WRITERS))}, not {fmt!r}.")
    if quantize not in MODES:
        raise ValueError(f"quantize={quantize!r}; expected None, 'int8' or 'dynamic_range'.")


def write(net, path: str, signature, fmt: str, quantize: str, batches: Optional[Sequence[np.ndarray]]) -> None:
    """Writes `net` quantized in `fmt` at `path` by that runtime's quantizer (the caller has run `check`);
    "int8" needs the calibration `batches` (checked against the model by `hub_export.export.check_calibration`)."""
    if quantize == "int8" and batches is None:
        raise ValueError(NEEDS_IMAGES)
    WRITERS[fmt](net, path, signature, quantize, batches)
