"""Classify image files with a pretrained model: `python -m keras_vit.predict IMAGE... --weights=W`.

Each image is read at its bit depth (`keras_vit.analysis.images`) and prepared as the checkpoint was
evaluated (`model.preprocessor()`: resize, centre crop and normalisation per its data config). The top classes
are printed with their scores (softmax probabilities) and names: the checkpoint's label set (or the shipped
ImageNet set that matches the head's size), or `--labels` (a set's name, or a text file of one name per line
such as the `class_names.txt` a folder run writes).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import weakref
from typing import List, Optional, Sequence

import numpy as np

from keras_vit.analysis import images as image_files
from keras_vit.utils import commands, compilation_cache
from keras_vit.utils.xla_options import tuned_jit
from keras_vit.vit.labels import LABEL_SETS, decode_predictions, label_set_for


def read_labels(spec: Optional[str], classes: int):
    """`--labels`: None (the shipped set of `classes` classes, else the indices), a set's name, or a file."""
    if spec is None:
        return None if label_set_for(classes) else [str(i) for i in range(classes)]
    if spec in LABEL_SETS:
        return spec
    if not os.path.isfile(spec):
        raise ValueError(f"--labels={spec!r} is neither a label set ({', '.join(LABEL_SETS)}) nor a file.")
    with open(spec, encoding="utf-8") as f:
        return [line.strip() for line in f if line.strip()]


def classify(
    model, paths: Sequence[str], top: int = 5, labels=None, pixels: Optional[Sequence[np.ndarray]] = None
) -> List[dict]:
    """[{"image": path, "top": [{"id", "name", "score"}, ...]}] for each image file in `paths` (`pixels`: the
    files already read with `keras_vit.analysis.images.read_image`, so they are not read again)."""
    import keras

    if not getattr(model, "include_top", False):
        raise ValueError(f"model {model.name!r} has no classification head (include_top=False): nothing to predict.")
    preprocessing = model.preprocessor()
    pixels = [image_files.read_image(p) for p in paths] if pixels is None else pixels
    batch = np.concatenate([keras.ops.convert_to_numpy(preprocessing(image)) for image in pixels])
    outputs = np.asarray(_outputs(model, batch), dtype="float64")
    if model.classifier_activation != "softmax":
        outputs = np.asarray(keras.ops.convert_to_numpy(keras.ops.softmax(outputs, axis=-1)))
    decoded = decode_predictions(outputs, top=min(top, outputs.shape[1]), labels=labels)
    return [{"image": p, "top": [dict(id=i, name=n, score=s) for i, n, s in rows]} for p, rows in zip(paths, decoded)]


def _outputs(model, batch: np.ndarray, chunk: int = 32) -> np.ndarray:
    """The model's outputs for `batch` in chunks, by the quickest first call of the backend: a direct call on
    TensorFlow (`predict` would first trace a `tf.function`), one jitted stateless call on JAX (compiled
    without YNNPACK's fusions, once per chunk shape, and kept by the compilation cache; `predict`'s own
    machinery costs more), `predict` elsewhere (docs/benchmarks-history.md, cold start)."""
    import keras

    backend = keras.backend.backend()
    if backend not in ("tensorflow", "jax"):
        return model.predict(batch, verbose=0)
    if backend == "jax":
        forward, trainable, fixed = _jax_forward(model), model.trainable_variables, model.non_trainable_variables
        call = lambda x: forward([v.value for v in trainable], [v.value for v in fixed], x)  # noqa: E731
    else:
        call = lambda x: model(x, training=False)  # noqa: E731
    return np.concatenate([keras.ops.convert_to_numpy(call(batch[i : i + chunk])) for i in range(0, len(batch), chunk)])


_JAX_FORWARD: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _jax_forward(model):
    """`model`'s inference as one jitted function of (trainable values, non-trainable values, inputs), made
    once per model (held weakly: the model is not kept alive by it) and compiled with the platform's XLA options
    (`keras_vit.utils.xla_options`: on CPU no YNNPACK set-up on its first run)."""
    forward = _JAX_FORWARD.get(model)
    if forward is None:
        ref = weakref.ref(model)

        def vit_forward(trainable, fixed, x):  # the name XLA's compilation cache files its entry under
            return ref().stateless_call(trainable, fixed, x, training=False)[0]

        forward = _JAX_FORWARD[model] = tuned_jit(vit_forward)
    return forward


def _print(results: List[dict]) -> None:
    for result in results:
        print(result["image"])
        for rank, row in enumerate(result["top"], 1):
            print(f"  {rank}. {row['name']:<32} {row['score']:.4f}  ({row['id']})")


def main(argv=None) -> int:
    from keras_vit.weights.load import load_model

    p = argparse.ArgumentParser(prog=commands.prog("python -m keras_vit.predict"), description=__doc__)
    p.add_argument("images", nargs="+", help="image files (JPEG, PNG, GIF, BMP, TIFF; 8- or 16-bit)")
    p.add_argument(
        "--weights",
        required=True,
        help="a release name (with --model), an official .npz, a .keras model, a timm .safetensors file "
        "or a transformers directory",
    )
    p.add_argument("--model", default=None, help="table name; needed for release dataset names and .weights.h5")
    p.add_argument("--top", type=int, default=5)
    p.add_argument("--labels", default=None, help=f"{' or '.join(LABEL_SETS)}, or a file of one name per line")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    compilation_cache.add_flag(p)
    args = p.parse_args(argv)
    try:
        if args.top < 1:
            raise ValueError(f"--top must be >= 1, got {args.top}.")
        pixels = [image_files.read_image(path) for path in args.images]  # read before the model is loaded
        compilation_cache.enable_for_command(args.compilation_cache)
        model = load_model(args.weights, model=args.model or None)
        labels = (
            read_labels(args.labels, model.classes)
            if args.labels  # else the checkpoint's own label set
            else model.data_config.labels or read_labels(None, model.classes)
        )
        results = classify(model, args.images, args.top, labels, pixels)
    except (ValueError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        _print(results)
    return 0
