"""`python -m hub_export --weights=W [--format=hub|saved_model|litert|onnx|openvino|serving] --out=DIR`.

`--format=hub` (default) writes a fine-tunable TF Hub module; the others go through Keras' exporters
(`hub_export.formats`) or build the bytes-in serving model (`hub_export.serving`). The backend is
Keras' (`KERAS_BACKEND`): TensorFlow writes every format, JAX and PyTorch write ONNX.
"""

from __future__ import annotations

import argparse
import os
import sys


def _build(args):
    import keras_vit

    kwargs = dict(classifier_activation=None)
    if args.image_size:
        kwargs["input_shape"] = (args.image_size, args.image_size, 3)
    if args.classes:
        kwargs["classes"] = args.classes
    for field in ("representation_size", "classifier"):
        if getattr(args, field) is not None:
            kwargs[field] = getattr(args, field)
    return keras_vit.load_model(args.weights, model=args.model or None, **kwargs)


def _representative(path: str):
    """Calibration inputs for --quantize=int8: one .npy array (batch, H, W, C) in the model's input range."""
    import numpy as np

    try:
        data = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as e:
        raise ValueError(f"--representative {path!r} is not a readable .npy array: {e}") from e
    if not isinstance(data, np.ndarray) or data.ndim != 4:
        raise ValueError(f"--representative {path!r} must hold one (batch, H, W, C) array.")
    return data.astype("float32")


def main(argv=None) -> int:
    from hub_export.export import VARIANTS

    from keras_vit.utils import commands

    p = argparse.ArgumentParser(prog=commands.prog("python -m hub_export"), description=__doc__)
    p.add_argument(
        "--model",
        default=None,
        help="table name, e.g. ViT-B/16: needed for .weights.h5 files and release dataset names; "
        "the other sources say what they hold",
    )
    p.add_argument(
        "--weights",
        required=True,
        help="the weight source: a release name, an official .npz, a .keras "
        "model, a timm .safetensors file or a transformers directory (each says what model it is), or a "
        ".weights.h5 file (with --model)",
    )
    p.add_argument("--image_size", type=int, default=0, help="resolution (default: the file's)")
    p.add_argument("--variant", default="feature_vector", help=f"one of {VARIANTS}")
    p.add_argument("--out", required=True)
    p.add_argument("--overwrite", action="store_true")
    p.add_argument("--classes", type=int, default=0, help="head size (default: the checkpoint's)")
    p.add_argument("--representation_size", type=int, default=None, help="override (default: the checkpoint's)")
    p.add_argument("--classifier", default=None, choices=["token", "gap"], help="override (default: the checkpoint's)")
    p.add_argument(
        "--format",
        default=None,
        help="hub (the default), saved_model, litert, onnx, openvino or serving; with --image_text: onnx (the "
        "default) or saved_model",
    )
    p.add_argument(
        "--image_text",
        action="store_true",
        help="--weights is an image-text model (what keras_vit.load_image_text reads): export both towers "
        "(hub_export.image_text)",
    )
    p.add_argument(
        "--quantize",
        default=None,
        choices=["int8", "dynamic_range"],
        help="post-training quantization "
        "of litert, onnx or openvino by the runtime's own quantizer; int8 needs --representative",
    )
    p.add_argument("--representative", default=None, help=".npy of calibration inputs in the model's range")
    p.add_argument(
        "--labels", default=None, help="serving: text file, one label per class (default: the model's own class names)"
    )
    p.add_argument("--top_k", type=int, default=5, help="serving: classes returned per image")
    args = p.parse_args(argv)
    if args.image_text:
        return _image_text_main(args)
    args.format = args.format or "hub"
    try:
        from hub_export.formats import FORMATS, check_backend

        if args.variant not in VARIANTS:
            raise ValueError(f"Unknown --variant {args.variant!r}; expected one of {VARIANTS}.")
        if args.format not in FORMATS:
            raise ValueError(f"Unknown --format {args.format!r}; expected one of {', '.join(FORMATS)}.")
        check_backend(args.format)  # before the model is built
        if args.format == "serving":
            args.variant = "classification"
        representative = _representative(args.representative) if args.representative else None
        if os.path.lexists(args.out) and not args.overwrite:
            raise FileExistsError(f"--out {args.out} already exists; pass --overwrite to replace it.")
        from keras_vit.utils.atomic import check_writable

        if not os.path.lexists(args.out):  # an existing one is judged by export(): ours to replace or not
            check_writable(args.out, "--out", directory=True)  # before minutes of building and tracing
        from hub_export.export import export

        model = _build(args)
        labels = None
        if args.labels:
            from hub_export.serving import read_labels

            labels = read_labels(args.labels, model.classes)
        path = export(
            model,
            args.out,
            args.variant,
            format=args.format,
            overwrite=args.overwrite,
            source=args.weights,
            quantize=args.quantize,
            representative_images=[representative] if representative is not None else None,
            labels=labels,
            top_k=args.top_k,
        )
    except (ValueError, FileNotFoundError, FileExistsError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"exported {args.variant} ({args.format}) to {path}")
    return 0


def _image_text_main(args) -> int:
    """`--image_text`: both towers of an image-text model (`hub_export.image_text.export_image_text`)."""
    from hub_export.image_text import FORMATS, export_image_text

    try:
        image_flags = dict(
            model=args.model,
            image_size=args.image_size,
            classes=args.classes,
            representation_size=args.representation_size,
            classifier=args.classifier,
            quantize=args.quantize,
            representative=args.representative,
            labels=args.labels,
        )
        unused = [f"--{k}" for k, v in image_flags.items() if v]
        unused += ["--variant"] if args.variant != "feature_vector" else []
        if unused:
            raise ValueError(f"--image_text exports both towers as they are: {', '.join(unused)} do not apply.")
        fmt = args.format or "onnx"
        if fmt not in FORMATS:
            raise ValueError(f"--image_text writes --format {' or '.join(FORMATS)}, not {fmt!r}.")
        from hub_export.formats import check_backend

        check_backend(fmt)  # before the model is loaded
        if os.path.lexists(args.out) and not args.overwrite:
            raise FileExistsError(f"--out {args.out} already exists; pass --overwrite to replace it.")
        from keras_vit.weights.image_text_sources import load_image_text

        model = load_image_text(args.weights)
        path = export_image_text(model, args.out, format=fmt, overwrite=args.overwrite, source=args.weights)
    except (ValueError, FileNotFoundError, FileExistsError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"exported both towers ({fmt}) to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
