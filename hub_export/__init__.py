"""Exports of keras_vit models: `hub_export.export(model, out_dir, variant, format="hub"|"saved_model"|"litert"|
"onnx"|"openvino"|"serving")`; `exported_file(out_dir)` is the model file inside an export."""

from hub_export.export import VARIANTS, export, exported_file
from hub_export.formats import FORMATS

__all__ = ["FORMATS", "VARIANTS", "export", "exported_file"]
