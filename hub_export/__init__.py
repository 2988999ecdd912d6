"""Exports of keras_vit models: `hub_export.export(model, out_dir, variant, format="hub"|"saved_model"|"litert"|
"onnx"|"openvino"|"serving")`; `exported_file(out_dir)` is the model file inside an export."""

from keras_vit.utils.extras import require

require(("tensorflow",), "tensorflow,export", "hub_export (its formats are written by TensorFlow today)")

from hub_export.export import VARIANTS, export, exported_file  # noqa: E402
from hub_export.formats import FORMATS  # noqa: E402

__all__ = ["FORMATS", "VARIANTS", "export", "exported_file"]
