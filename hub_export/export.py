"""`export`: a model written atomically as a TF Hub module, a runtime format or a bytes-in serving model.

Every export is a directory holding the model file, `metadata.json` (what it takes, the data config, the
weights it came from) and a model card. The TF Hub module is `hub_export.hub_module`; the runtime formats go
through Keras' exporters (`hub_export.formats`). TensorFlow writes all of them except ONNX, which is also written
on JAX and PyTorch (`hub_export.onnx_file`); the others, asked for on another backend, say how to hand a `.keras`
file to a TensorFlow install.
"""

from __future__ import annotations

import json
import os
from typing import Optional

import keras
import numpy as np

from hub_export import formats, model_card, quantization
from keras_vit.utils import atomic
from keras_vit.utils.extras import require
from keras_vit.vit.model import ensure_vit
from keras_vit.vit.preprocessing import ImagePreprocessing

VARIANTS = ("feature_vector", "classification")


def _output_model(model: keras.Model, variant: str) -> keras.Model:
    if variant == "feature_vector":
        return model.feature_model()
    if not model.include_top:
        raise ValueError(
            f"variant='classification' needs a model with a head (include_top=True); {model.name!r} has none."
        )
    return model.logits_model()


_EXPORT_FILES = {
    "metadata.json",
    "README.md",
    "model.tflite",
    "model.onnx",
    "model.xml",
    "model.bin",
    "saved_model.pb",
    "fingerprint.pb",
    "keras_metadata.pb",
}
_EXPORT_FOLDERS = ("saved_model", "variables", "assets")


def written_by_an_earlier_export(entry: str) -> bool:
    """Whether `entry` (relative path) is a name our exporters wrote before export directories had a manifest:
    what lets `overwrite=True` replace such an export while a file a user added to it still stops the write."""
    return entry in _EXPORT_FILES or entry.split("/")[0] in _EXPORT_FOLDERS


def _preprocessing(model) -> ImagePreprocessing:
    """The checkpoint's preprocessing inside a TF Hub module or SavedModel: `model.preprocessor()`, except that an
    any-size model is only normalised (it takes the size it is given)."""
    if not model.dynamic_size:
        return model.preprocessor()
    return ImagePreprocessing(None, model.data_config, normalize=not model.include_preprocessing)


def is_our_export(path: str) -> bool:
    """True for a directory written by `export` (its metadata.json names our exporter)."""
    try:
        with open(os.path.join(path, "metadata.json")) as f:
            return json.load(f).get("exporter") == model_card.EXPORTER
    except (OSError, ValueError, AttributeError):
        return False


def _exportable(model, variant: str, format: str):
    """`model` once the arguments are checked; a LoRA-adapted model as its merged weights (W + (alpha / r) A B)."""
    if variant not in VARIANTS:
        raise ValueError(f"Unknown variant {variant!r}; expected one of {VARIANTS}.")
    if format not in formats.FORMATS:
        raise ValueError(f"Unknown format {format!r}; expected one of {', '.join(formats.FORMATS)}.")
    ensure_vit(model)
    formats.check_backend(format, model)
    backend = keras.backend.backend()
    require(
        formats.needs(format),
        formats.extra(format),
        f"format={format!r} on the {backend} backend",
        formats.then(format),
    )
    return model.merge_lora() if model.lora_layers() else model


def check_calibration(model, representative_images) -> list:
    """The calibration batches of an int8 export as float32 arrays, after checking them: some images,
    each batch (N, H, W, C) of the model's size and channels, values in the model's own range (`input_range`:
    pixels in [0, 255] given to a [-1, 1] model would calibrate the activations on the wrong scale)."""
    if representative_images is None:
        raise ValueError(quantization.NEEDS_IMAGES)
    if isinstance(representative_images, np.ndarray):
        representative_images = [representative_images]
    batches = [np.asarray(b, dtype="float32") for b in representative_images]
    if not batches or not sum(b.shape[0] for b in batches if b.ndim == 4):
        raise ValueError("representative_images holds no image: int8 calibration needs a few hundred inputs.")
    low, high = model.input_range
    for i, batch in enumerate(batches):
        try:
            model.check_images(batch if batch.ndim == 4 else batch[None, None])
        except ValueError as e:
            raise ValueError(f"representative_images[{i}]: {e}") from None
        if batch.ndim != 4:
            raise ValueError(f"representative_images[{i}] must be a (batch, H, W, C) array, got {batch.shape}.")
        top, bottom = float(batch.max()), float(batch.min())
        if not np.isfinite(batch).all() or top > high + 0.05 * (high - low) or bottom < low - 0.05 * (high - low):
            raise ValueError(
                f"representative_images[{i}] holds values in [{bottom:g}, {top:g}]; model "
                f"{model.name!r} takes [{low:g}, {high:g}] (use model.to_input_range on pixels)."
            )
    return batches


def _metadata(model, net, variant: str, format: str, *, name, source, quantize, top_k: int) -> dict:
    """metadata.json's content: the model card's fields plus, per format, the file and what it takes."""
    meta = model_card.metadata(
        name=name or model.vit_config.name,
        variant=variant,
        image_size=model.image_size,
        output_dim=int(net.output_shape[-1]),
        source=source,
        architecture=model.describe(),
    )
    if format == "serving":
        meta.update(
            format=format,
            file="",
            top_k=top_k,
            input="string [batch]: encoded JPEG/PNG/GIF/BMP bytes (8- or 16-bit), any size",
        )
    elif format != "hub":
        low, high = model.input_range
        meta.update(
            format=format,
            file=formats.FILES[format],
            quantize=quantize,
            input=f"float32 [batch, H, W, {model.channels}] in [{low:g}, {high:g}]",
        )
    return meta


def export(
    model: keras.Model,
    out_dir: str,
    variant: str = "feature_vector",
    *,
    format: str = "hub",
    overwrite: bool = False,
    source: Optional[str] = None,
    name: Optional[str] = None,
    quantize: Optional[str] = None,
    representative_images=None,
    labels: Optional[list] = None,
    top_k: int = 5,
) -> str:
    """Writes `model` at `out_dir` (+ README.md model card, metadata.json); returns `out_dir`.

    Args:
      model: a `keras_vit.VisionTransformer`; LoRA adapters are merged first. Every format is written on the
        TensorFlow backend; "onnx" also on JAX and PyTorch.
      out_dir: the export directory; an earlier export there is replaced only with
        `overwrite=True`, and anything else there never is.
      variant: "feature_vector" (pre-logits, [batch, D]) or "classification" (logits).
      format: "hub" (TF Hub module: [0, 1] images, fine-tunable with hub.KerasLayer), or a runtime format
        through Keras' exporters, taking the model's own input range: "saved_model", "litert" (model.tflite),
        "onnx" (model.onnx), "openvino" (model.xml + .bin); see `hub_export.formats`. "serving": a SavedModel
        taking encoded JPEG/PNG bytes and returning the `top_k` classes, scores and `labels` (variant
        "classification" only; see `hub_export.serving`).
      quantize: "litert", "onnx" and "openvino": post-training quantization by the runtime's own quantizer
        (`hub_export.quantization`): "int8" (weights and activations, calibrated on `representative_images`,
        inputs in the model's range) or "dynamic_range" (int8 weights only).
      labels: "serving": one string per class (default: the model's class names where its data config names
        them, a shipped label set or an image folder's classes; else the indices).
      source: where the weights came from, recorded in the card (default: `model.weights_source`, set when
        keras_vit loaded the weights).
    Everything is built in a temporary directory beside `out_dir` and renamed into
    place, so `out_dir` never holds a half-written export.
    """
    source = source or getattr(model, "weights_source", None)  # what keras_vit loaded it from, if it did
    model = _exportable(model, variant, format)
    if format == "serving":
        if variant != "classification":
            raise ValueError("format='serving' returns classes: use variant='classification'.")
        labels = list(labels) if labels is not None else _class_names(model)
    quantization.check(quantize, format)
    if quantize == "int8":
        representative_images = check_calibration(model, representative_images)
    net = _output_model(model, variant)
    meta = _metadata(model, net, variant, format, name=name, source=source, quantize=quantize, top_k=top_k)

    def fill(tmp: str) -> None:
        if format == "hub":
            from hub_export import hub_module

            hub_module.save(net, tmp, _preprocessing(model), model.channels)
        elif format == "serving":
            from hub_export import serving

            serving.write(model, tmp, labels, top_k)
        else:
            formats.write(
                net,
                tmp,
                format,
                model.channels,
                quantize=quantize,
                representative_images=representative_images,
                preprocessing=_preprocessing(model),
            )
        atomic.write_json(os.path.join(tmp, "metadata.json"), meta)
        atomic.write_file(os.path.join(tmp, "README.md"), model_card.model_card(meta))

    return atomic.write_directory(
        out_dir, fill, overwrite=overwrite, replaceable=is_our_export, legacy=written_by_an_earlier_export
    )


def exported_file(out_dir: str) -> str:
    """The model file inside an export directory (the directory itself for "hub")."""
    with open(os.path.join(out_dir, "metadata.json")) as f:
        meta = json.load(f)
    return os.path.join(out_dir, meta["file"]) if "file" in meta else out_dir


def _class_names(model) -> list:
    """The serving signature's label strings: the model's own classes (its data config's labels: a label set or a
    folder's class names), else the indices."""
    from keras_vit.vit.labels import class_names

    known = model.data_config.labels
    return class_names(known, model.classes) if known is not None else [str(i) for i in range(model.classes)]
