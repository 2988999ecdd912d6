"""Prints {architecture: parameter count} for every model timm registers in its `vision_transformer`,
`vision_transformer_hybrid`, `deit`, `eva` and `naflexvit` modules, built on the meta device (no weights, no download, no memory):
the breadth test compares keras_vit's builds of the same names with these counts. Run with torch and timm:

    PYTHONPATH=tools/torchvision_stub python tools/timm_registry_counts.py
"""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "torchvision_stub"))

import timm  # noqa: E402
import torch  # noqa: E402


def main() -> None:
    counts = {}
    for module in ("vision_transformer", "vision_transformer_hybrid", "deit", "eva", "naflexvit"):
        for name in timm.list_models(module=module):
            try:
                with torch.device("meta"):
                    model = timm.create_model(name, pretrained=False)
                counts[name] = sum(p.numel() for p in model.parameters())
            except Exception as e:  # noqa: BLE001 (reported as such)
                counts[name] = f"error: {e}"
    print(json.dumps(dict(timm=timm.__version__, counts=counts)))


if __name__ == "__main__":
    main()
