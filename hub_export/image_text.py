"""An image-text model's two towers exported for runtimes, for serving zero-shot classification or search where
neither Keras nor keras_vit is installed.

The export is a directory holding:
- `image/`: the image tower as `hub_export.export` writes an image model (its file, its `metadata.json` with the
  data config the images are prepared with): images -> the image embedding (the tower's projection where it has
  one, "classification"; its pre-logits where those are the embedding, "feature_vector");
- `text/`: the text tower in the same format, int32 token ids [batch, context_length] -> the text embedding, with
  the tokenizer's files where the model was loaded with some (`tokenizer.json`, `spiece.model` and their
  `tokenizer_config.json`; CLIP's BPE, which open_clip and keras_vit ship, is named instead);
- `metadata.json`: the files, the context length, the tokenizer, and how the two outputs make the similarity
  logits: each embedding L2-normalised, then exp(`logit_scale`) times their dot product, plus `logit_bias` where
  the model has one (SigLIP's; a sigmoid gives its probabilities, a softmax over texts CLIP's).
Formats: "saved_model" (written by TensorFlow) and "onnx" (TensorFlow, and JAX and PyTorch as the image exports
are). The text tower runs on every token it is given: the host-side cut after the last end-of-text token
(`keras_vit.TextTransformer`) is not part of the graph, which changes no output.
"""

from __future__ import annotations

import json
import os
import shutil
from typing import Optional

import keras
import numpy as np

from hub_export.export import export as export_image_model
from hub_export import formats, onnx_file
from keras_vit.utils import atomic
from keras_vit.utils.extras import require

FORMATS = ("saved_model", "onnx")
KIND = "keras_vit.image_text_export"
TEXT_INPUT = "token_ids"


def _tokenizer(model) -> dict:
    """metadata.json's description of the model's tokenizer, with the files to copy beside the text tower."""
    tokenizer = getattr(model, "_tokenizer", None)
    if tokenizer is None:
        return dict(kind=None, why=getattr(model, "no_tokenizer", "none was loaded"), files=[])
    if isinstance(tokenizer, dict):  # CLIP's BPE (keras_vit.ClipTokenizer), shipped with open_clip and keras_vit
        return dict(kind="clip_bpe", clean=tokenizer.get("clean", "lower"), files=[])
    from keras_vit.vit.sentencepiece_tokenizer import SentencePieceTokenizer

    kind = "sentencepiece" if isinstance(tokenizer, SentencePieceTokenizer) else "tokenizer.json"
    described = dict(kind=kind, files=list(getattr(tokenizer, "source_files", [])))
    if kind == "tokenizer.json":
        described["clean"] = tokenizer.clean  # open_clip's cleaning before the file's own normaliser ("none")
    return described


def _write_text(text_model, directory: str, fmt: str) -> str:
    """The text tower at `directory` in `fmt`; returns the model file's name."""
    os.makedirs(directory)
    path = os.path.join(directory, formats.FILES[fmt])
    shape = (None, text_model.tower.context_length)  # the tower takes fewer tokens too; the export takes them all
    if fmt == "onnx":
        onnx_file.write(text_model, path, dtype="int32", name=TEXT_INPUT, shape=shape)
    else:
        import tensorflow as tf

        signature = [tf.TensorSpec(shape, tf.int32, name=TEXT_INPUT)]
        text_model.export(path, format="tf_saved_model", input_signature=signature, verbose=False)
    return formats.FILES[fmt]


def export_image_text(
    model,
    out_dir: str,
    *,
    format: str = "onnx",
    overwrite: bool = False,
    source: Optional[str] = None,
) -> str:
    """Writes `model`'s two towers at `out_dir` (`image/`, `text/`, metadata.json); returns `out_dir`.

    Args:
      model: a `keras_vit.ImageTextModel`.
      format: "onnx" (on every backend, its runtime onnxruntime) or "saved_model" (TensorFlow).
      overwrite: replace an earlier export of this function at `out_dir` (never anything else).
      source: where the weights came from, recorded (default: what keras_vit loaded them from).
    Built in a temporary directory beside `out_dir` and renamed into place.
    """
    from keras_vit.vit.image_text import ImageTextModel

    if not isinstance(model, ImageTextModel):
        raise ValueError(
            f"{getattr(model, 'name', model)!r} is not a keras_vit.ImageTextModel: an image model is exported with "
            "hub_export.export."
        )
    if format not in FORMATS:
        raise ValueError(f"format={format!r}: an image-text model is exported as one of {', '.join(FORMATS)}.")
    formats.check_backend(format, model.image_model)
    require(formats.needs(format), formats.extra(format), f"format={format!r}", formats.then(format))
    image = model.image_model
    variant = "classification" if image.include_top else "feature_vector"
    tokenizer = _tokenizer(model)
    scale = float(keras.ops.convert_to_numpy(model.logit_scale))
    bias = None if model.logit_bias is None else float(keras.ops.convert_to_numpy(model.logit_bias))
    source = source or getattr(model, "weights_source", None) or getattr(image, "weights_source", None)

    def fill(tmp: str) -> None:
        export_image_model(image, os.path.join(tmp, "image"), variant, format=format, source=source)
        with open(os.path.join(tmp, "image", "metadata.json")) as f:
            image_input = json.load(f)["input"]
        text_file = _write_text(model.text_model, os.path.join(tmp, "text"), format)
        for path in tokenizer["files"]:
            shutil.copyfile(path, os.path.join(tmp, "text", os.path.basename(path)))
        meta = dict(
            kind=KIND,
            format=format,
            source=source,
            image=dict(
                file=os.path.join("image", formats.FILES[format]),
                input=image_input,
                variant=variant,
            ),
            text=dict(
                file=os.path.join("text", text_file),
                input=f"int32 [batch, {model.text_model.tower.context_length}] token ids, named {TEXT_INPUT!r}",
                context_length=int(model.text_model.tower.context_length),
                vocab_size=int(model.text_model.tower.vocab_size),
                tokenizer={**tokenizer, "files": [os.path.basename(p) for p in tokenizer["files"]]},
            ),
            embed_dim=int(np.prod(model.text_model.output_shape[-1:])),
            logit_scale=scale,
            logit_bias=bias,
            logits="exp(logit_scale) * normalize(image) . normalize(text)"
            + (" + logit_bias" if bias is not None else ""),
        )
        atomic.write_json(os.path.join(tmp, "metadata.json"), meta)

    return atomic.write_directory(out_dir, fill, overwrite=overwrite, replaceable=is_image_text_export)


def is_image_text_export(path: str) -> bool:
    """Whether `path` holds an earlier output of `export_image_text`."""
    try:
        with open(os.path.join(path, "metadata.json")) as f:
            return json.load(f).get("kind") == KIND
    except (OSError, ValueError, AttributeError):
        return False
