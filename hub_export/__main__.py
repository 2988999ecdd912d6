"""`python -m hub_export --model=ViT-B/16 --weights=W --image_size=224 --variant=feature_vector --out=DIR`."""

from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("KERAS_BACKEND", "tensorflow")


def _build(args):
    import keras
    import numpy as np

    import keras_vit

    if not os.path.exists(args.weights):
        raise FileNotFoundError(f"--weights file {args.weights!r} does not exist.")
    size = (args.image_size, args.image_size, 3)
    if args.weights.endswith(".keras"):
        model = keras.models.load_model(args.weights, compile=False)
        if tuple(model.input_shape[1:]) != size:
            raise ValueError(f"--image_size={args.image_size} but {args.weights} was saved at "
                             f"{model.input_shape[1:3]}; re-export at that size.")
        return model
    kwargs = dict(input_shape=size, classifier_activation=None, classifier=args.classifier,
                  representation_size=args.representation_size or None, classes=args.classes or 1000)
    if args.weights.endswith(".npz") and not args.classes:
        with np.load(args.weights, allow_pickle=False) as ckpt:
            if "head/kernel" in ckpt.files:
                kwargs["classes"] = int(ckpt["head/kernel"].shape[-1])
            if "pre_logits/kernel" in ckpt.files and args.representation_size is None:
                kwargs["representation_size"] = int(ckpt["pre_logits/kernel"].shape[-1])
    return keras_vit.create_model(args.model, weights=args.weights, **kwargs)


def main(argv=None) -> int:
    from hub_export.export import VARIANTS

    p = argparse.ArgumentParser(prog="python -m hub_export", description=__doc__)
    p.add_argument("--model", required=True, help="model name, e.g. ViT-B/16 (ignored for .keras files)")
    p.add_argument("--weights", required=True, help=".npz, .keras or .weights.h5 file")
    p.add_argument("--image_size", type=int, default=224)
    p.add_argument("--variant", default="feature_vector", help=f"one of {VARIANTS}")
    p.add_argument("--out", required=True)
    p.add_argument("--overwrite", action="store_true")
    p.add_argument("--classes", type=int, default=0, help="head size (default: from the checkpoint, else 1000)")
    p.add_argument("--representation_size", type=int, default=None)
    p.add_argument("--classifier", default="token", choices=["token", "gap"])
    args = p.parse_args(argv)
    try:
        if args.variant not in VARIANTS:
            raise ValueError(f"Unknown --variant {args.variant!r}; expected one of {VARIANTS}.")
        if os.path.exists(args.out) and not args.overwrite:
            raise FileExistsError(f"--out {args.out} already exists; pass --overwrite to replace it.")
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
