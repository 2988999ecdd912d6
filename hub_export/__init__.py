"""TF Hub export of keras_vit models: `hub_export.export(model, out_dir, variant="feature_vector")`."""

from hub_export.export import VARIANTS, export

__all__ = ["VARIANTS", "export"]
