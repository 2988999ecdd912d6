"""The Markdown model card and metadata.json written next to each exported module."""

from __future__ import annotations

import datetime
from typing import Optional

LICENSE = "Apache-2.0"
EXPORTER = "keras_vit hub_export"


def metadata(
    *, name: str, variant: str, image_size: tuple, output_dim: int, source: Optional[str], architecture: dict
) -> dict:
    """metadata.json: what the export is, and `data_config`, the checkpoint's evaluation preprocessing (applied
    inside the TF Hub and serving exports; for the runtime formats, what to apply before feeding them)."""
    return dict(
        name=name,
        variant=variant,
        image_size=list(image_size),
        output_dim=output_dim,
        input="float32 [batch, H, W, 3] in [0, 1], any size (resized inside)",
        data_config=architecture.get("data_config"),
        source_checkpoint=source or "random init",
        architecture={k: (list(v) if isinstance(v, tuple) else v) for k, v in architecture.items()},
        license=LICENSE,
        format="TF2 SavedModel (hub.KerasLayer-compatible)",
        exported=datetime.date.today().isoformat(),
        exporter=EXPORTER,
    )


_RUNTIME_USAGE = {
    "saved_model": "tf.saved_model.load(PATH).signatures['serving_default'](images=x); pixels of any size in "
    "[0, 255]: .serve_pixels(images) (the checkpoint's preprocessing inside)",
    "litert": "ai_edge_litert.interpreter.Interpreter(model_path='PATH/model.tflite')",
    "onnx": "onnxruntime.InferenceSession('PATH/model.onnx').run(None, {'images': x})",
    "openvino": "openvino.Core().compile_model('PATH/model.xml', 'CPU', {'INFERENCE_PRECISION_HINT': 'f32'})(x)",
    "serving": "tf.saved_model.load(PATH).signatures['serving_default'](images=tf.constant([jpeg_bytes]))"
    " -> classes, scores, labels",
}


def _runtime_card(meta: dict) -> str:
    out = (
        "the pre-logits representation (feature vector)"
        if meta["variant"] == "feature_vector"
        else "unnormalised logits, one per class"
    )
    quant = f" Quantized: {meta['quantize']}." if meta.get("quantize") else ""
    return f"""# {meta["name"]} ({meta["variant"]}), {meta["format"]} export by keras_vit

An Image is Worth 16x16 Words (Dosovitskiy et al., ICLR 2021). Architecture: {meta["architecture"]}.
Source checkpoint: `{meta["source_checkpoint"]}`. File: `{meta["file"] or "."}`.{quant}

- Usage: `{_RUNTIME_USAGE[meta["format"]]}`
- Input: {meta["input"]} (NHWC; image size {meta["image_size"]}, None = any multiple of the patch size).
- Preprocessing (apply it before feeding images of another size or range): `data_config` in metadata.json;
  `keras_vit.analysis.images.preprocess_image(pixels, data_config, size)` applies it with numpy and PIL.
- Output: `[batch, {meta["output_dim"]}]` — {out}.

## Licence

{meta["license"]}.
"""


def model_card(meta: dict) -> str:
    """TF Hub documentation format: front-matter-like header, overview, usage, I/O spec, licence (a short card
    for the runtime formats)."""
    if "file" in meta:
        return _runtime_card(meta)
    h, w = meta["image_size"]
    out = (
        "the pre-logits representation (feature vector)"
        if meta["variant"] == "feature_vector"
        else "unnormalised logits, one per class"
    )
    kind = "image-feature-vector" if meta["variant"] == "feature_vector" else "image-classification"
    resize = f"resized to {h}x{w}, centre-cropped and " if h else ""
    return f"""# Module {meta["name"]}/{meta["variant"]}

Vision Transformer ({meta["name"]}) {kind} module exported by keras_vit.

<!-- asset-path: ./ -->
<!-- task: {kind} -->
<!-- network-architecture: vision-transformer -->
<!-- format: saved_model_2 -->
<!-- fine-tunable: true -->
<!-- license: {meta["license"].lower()} -->

## Overview

An Image is Worth 16x16 Words: Transformers for Image Recognition at Scale (Dosovitskiy et al., ICLR 2021).
Architecture: {meta["architecture"]}.
Source checkpoint: `{meta["source_checkpoint"]}`.

## Usage

```python
import tensorflow as tf, tensorflow_hub as hub, tf_keras
model = tf_keras.Sequential([
    hub.KerasLayer("PATH_OR_URL", trainable=True),   # fine-tunable
    tf_keras.layers.Dense(NUM_CLASSES),
])
model.build([None, None, None, 3])
```

Keras 3: `keras.layers.TFSMLayer("PATH", call_endpoint="serving_default")` (inference; fine-tune with plain SGD).

## Inputs and outputs

- Input: `images`, float32 `[batch, height, width, 3]`, RGB values in **[0, 1]**, any size: {resize}normalised
  inside as the checkpoint was evaluated (`data_config` in metadata.json).
- Output: `[batch, {meta["output_dim"]}]` — {out}.
- `__call__(images, training=False)`; `training=True` enables dropout for fine-tuning.
- Signature `serving_default`: `{{"images": ...}} -> {{"outputs": ...}}`.

## Licence

{meta["license"]}.
"""
