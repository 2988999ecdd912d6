"""Exports of keras_vit models: `hub_export.export(model, out_dir, variant, format="hub"|"saved_model"|"litert"|
"onnx"|"openvino"|"serving")`; `exported_file(out_dir)` is the model file inside an export. TensorFlow writes every
format; ONNX is also written on JAX and PyTorch. A format whose writer or runtime is missing names the extra that
installs it."""

import keras_vit  # noqa: F401  (first: a backend that cannot load is named; the CLI's TensorFlow log is quiet)
from hub_export.export import VARIANTS, export, exported_file
from hub_export.formats import FORMATS

__all__ = ["FORMATS", "VARIANTS", "export", "exported_file"]
