"""Linear few-shot evaluation: `python -m recipes.fewshot --weights=W --model=ViT-B/16 --datasets=...`.

The paper's protocol (keras_vit.analysis.fewshot) on big_vision's standard datasets; features
are extracted batch by batch (resize to 256/224 x the resolution, central crop), so
large datasets never sit in memory as images.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

# name -> (TFDS name, train split, test split); big_vision's configs/common_fewshot.py
STANDARD = {
    "caltech101": ("caltech101", "train", "test"),
    "cars196": ("cars196", "train", "test"),
    "cifar100": ("cifar100", "train", "test"),
    "dtd": ("dtd", "train", "test"),
    "oxford_iiit_pet": ("oxford_iiit_pet", "train", "test"),
    "uc_merced": ("uc_merced", "train[:1000]", "train[1000:]"),
    "imagenet2012": ("imagenet2012", "train[:65000]", "validation"),
    "mnist5k": ("mnist5k", "train", "test"),  # bundled, offline
}


def _pipeline(source, size: int, batch: int, raw_pixels: bool = False):
    import tensorflow as tf

    from keras_vit.vit.model import rescale_pixels
    from recipes.data import _to_rgb_float

    def pp(ex):
        image = tf.image.resize(_to_rgb_float(ex["image"]), (size * 256 // 224, size * 256 // 224))
        image = tf.image.resize_with_crop_or_pad(image, size, size)
        return (image if raw_pixels else rescale_pixels(image)), ex["label"]

    return source.dataset.map(pp, num_parallel_calls=tf.data.AUTOTUNE).batch(batch).prefetch(2)


def extract(feature_fn, source, size: int, batch: int = 64, raw_pixels: bool = False):
    """(features, labels) of `source`; images in [-1, 1], or [0, 255] with `raw_pixels` (for a
    `feature_fn` that normalises them itself, as the CLI's does per the model's data config)."""
    feats, labels = [], []
    for images, y in _pipeline(source, size, batch, raw_pixels):
        feats.append(feature_fn(images.numpy()))
        labels.append(y.numpy())
    return np.concatenate(feats), np.concatenate(labels)


def _shots(text: str) -> list:
    """ "1,5,10" -> [1, 5, 10]; "2.7", "0" or "" are refused with the flag's name."""
    from keras_vit.utils import validate

    try:
        values = [float(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise ValueError(f"--shots={text!r} must be comma-separated whole numbers, e.g. 1,5,10,25.") from None
    return list(validate.integers("--shots", values))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m recipes.fewshot", description=__doc__)
    p.add_argument(
        "--weights",
        default="",
        help="the weight source: a release name, an official .npz, a .keras "
        "model, a timm .safetensors file or a transformers directory (each says what model it is), or a "
        ".weights.h5 file (with --model); empty: random ViT-B/16 weights",
    )
    p.add_argument("--model", default="", help="table name; needed for .weights.h5 and release dataset names")
    p.add_argument("--datasets", default="caltech101,cars196,cifar100,dtd,oxford_iiit_pet,uc_merced")
    p.add_argument("--image_size", type=int, default=0, help="resolution (default: the file's, else 224)")
    p.add_argument("--shots", default="1,5,10,25")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--data_dir", default="")
    p.add_argument("--out", default="", help="optional JSON file for the results")
    args = p.parse_args(argv)
    try:
        from keras_vit import create_model, load_model
        from keras_vit.analysis import fewshot
        from keras_vit.utils import validate
        from keras_vit.utils.atomic import check_writable
        from recipes import atomic
        from recipes.data import load_source

        shots = _shots(args.shots)
        validate.integer("--seeds", args.seeds)
        if args.out:
            check_writable(args.out, "--out")

        names = [n for n in args.datasets.split(",") if n]
        unknown = [n for n in names if n not in STANDARD]
        if unknown or not names:
            raise ValueError(f"Unknown few-shot dataset(s) {unknown or args.datasets!r}; known: {', '.join(STANDARD)}.")
        kwargs = {"input_shape": (args.image_size, args.image_size, 3)} if args.image_size else {}
        if args.weights:
            model = load_model(args.weights, model=args.model or None, **kwargs)
        else:
            model = create_model(args.model or "ViT-B/16", include_top=False, **kwargs)
        size = model.base_image_size[0]
        features = fewshot.feature_extractor(model)

        def feature_fn(pixels):  # [0, 255] pixels normalised per the model's own data config (mean, std)
            return features(model.to_input_range(pixels))

        results = {}
        for name in names:
            tfds_name, train_split, test_split = STANDARD[name]
            x, y = extract(feature_fn, load_source(tfds_name, train_split, args.data_dir or None), size, 64, True)
            xt, yt = extract(feature_fn, load_source(tfds_name, test_split, args.data_dir or None), size, 64, True)
            for k in shots:
                accs = [fewshot.linear_fewshot_accuracy(x, y, xt, yt, k, s) for s in range(args.seeds)]
                results[f"{name}_{k}shot"] = (float(np.mean(accs)), float(np.std(accs)))
    except (ValueError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(fewshot.FewShotEvaluator.format(results))
    if args.out:
        atomic.write_json(args.out, {k: {"mean": m, "std": s} for k, (m, s) in results.items()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
