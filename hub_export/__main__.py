"""`python -m hub_export --model=ViT-B/16 --weights=W --image_size=224 --variant=feature_vector --out=DIR`."""

from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("KERAS_BACKEND", "tensorflow")


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


def main(argv=None) -> int:
    from hub_export.export import VARIANTS

    p = argparse.ArgumentParser(prog="python -m hub_export", description=__doc__)
    p.add_argument("--model", default=None,
                   help="table name, e.g. ViT-B/16: needed for .weights.h5 files and release dataset names; "
                        ".keras and .npz files say what they hold")
    p.add_argument("--weights", required=True, help=".npz, .keras or .weights.h5 file, or a release name")
    p.add_argument("--image_size", type=int, default=0, help="resolution (default: the file's)")
    p.add_argument("--variant", default="feature_vector", help=f"one of {VARIANTS}")
    p.add_argument("--out", required=True)
    p.add_argument("--overwrite", action="store_true")
    p.add_argument("--classes", type=int, default=0, help="head size (default: the checkpoint's)")
    p.add_argument("--representation_size", type=int, default=None, help="override (default: the checkpoint's)")
    p.add_argument("--classifier", default=None, choices=["token", "gap"], help="override (default: the checkpoint's)")
    args = p.parse_args(argv)
    try:
        if args.variant not in VARIANTS:
            raise ValueError(f"Unknown --variant {args.variant!r}; expected one of {VARIANTS}.")
        if os.path.lexists(args.out) and not args.overwrite:
            raise FileExistsError(f"--out {args.out} already exists; pass --overwrite to replace it.")
        from keras_vit.atomic import check_writable

        if not os.path.lexists(args.out):  # an existing one is judged by export(): ours to replace or not
            check_writable(args.out, "--out", directory=True)  # before minutes of building and tracing
        from hub_export.export import export

        model = _build(args)
        path = export(model, args.out, args.variant, overwrite=args.overwrite, source=args.weights)
    except (ValueError, FileNotFoundError, FileExistsError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"exported {args.variant} module to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
