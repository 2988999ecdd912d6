"""Zero-shot classification from the command line: `python -m keras_vit.zero_shot IMAGE_OR_FOLDER...
--weights=FOLDER --classes=cat,dog [--templates=openai_imagenet] [--top=5]`.

`--weights` is an image-text model in open_clip's layout (`open_clip_config.json` + `open_clip_model.safetensors`,
and its tokenizer where the config names one) or a `transformers` CLIPModel repository: a folder, an `hf-hub:`
handle, or open_clip's pretrained name ("ViT-B-16-SigLIP2", `keras_vit.list_models("image-text")`). Each class name is put into every
prompt template ("a photo of a {}.": OpenAI's 80 ImageNet templates by default, `simple_imagenet` for open_clip's
7, or a file of one template per line), the texts encoded and averaged per class; each image (read at its bit
depth, prepared per the image tower's data config; for a SigLIP 2 NaFlex model, cut into patches at its own aspect
ratio as its repository's processor does, `model.naflex`) is scored against every class: softmax probabilities
over the classes are printed, best first.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import List

from keras_vit.analysis import images as image_files
from keras_vit.utils import commands, compilation_cache


def _image_paths(inputs: List[str]) -> List[str]:
    """Files as given, and the image files below each folder (as batch inference lists them: sorted, hidden
    entries left out, names that are not UTF-8 refused)."""
    from keras_vit.analysis.image_sources import folder_source

    paths = []
    for item in inputs:
        if os.path.isdir(item):
            paths += folder_source(item).paths
        elif os.path.exists(item):
            paths.append(item)
        else:
            raise FileNotFoundError(f"{item!r}: no such file or folder.")
    return paths


def _classes(spec: str) -> List[str]:
    if os.path.isfile(spec):
        with open(spec, encoding="utf-8") as f:
            names = [line.strip() for line in f if line.strip()]
    else:
        names = [name.strip() for name in spec.split(",") if name.strip()]
    if len(names) < 2:
        raise ValueError(f"--classes={spec!r}: give at least two class names (comma-separated, or a file).")
    return names


def main(argv=None) -> int:
    import keras
    import numpy as np

    from keras_vit.vit.zero_shot import ZeroShotClassifier
    from keras_vit.weights.image_text_sources import load_image_text

    p = argparse.ArgumentParser(prog=commands.prog("python -m keras_vit.zero_shot"), description=__doc__)
    p.add_argument("inputs", nargs="+", help="image files or folders of them")
    p.add_argument(
        "--weights",
        required=True,
        help="open_clip's or a transformers CLIP folder, hf-hub: handle, or open_clip's pretrained name",
    )
    p.add_argument("--classes", required=True, help="class names, comma-separated, or a file of one per line")
    p.add_argument("--templates", default="openai_imagenet", help="openai_imagenet, simple_imagenet, or a file")
    p.add_argument("--top", type=int, default=5)
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    compilation_cache.add_flag(p)
    args = p.parse_args(argv)
    try:
        if args.top < 1:
            raise ValueError(f"--top must be >= 1, got {args.top}.")
        classes = _classes(args.classes)
        templates = args.templates
        if os.path.isfile(templates):
            with open(templates, encoding="utf-8") as f:
                templates = [line.rstrip("\n") for line in f if line.strip()]
        paths = _image_paths(args.inputs)
        pixels = [image_files.read_image(path) for path in paths]  # read before the model is loaded
        compilation_cache.enable_for_command(args.compilation_cache)
        model = load_image_text(args.weights)
        classifier = ZeroShotClassifier(model, model.text_preprocessor(), classes, templates)
        if getattr(model, "naflex", None):  # SigLIP 2 NaFlex: each photo at its own aspect ratio
            from keras_vit.vit.naflex import naflex_batch

            batch = naflex_batch(pixels, **model.naflex)
        else:
            preprocessing = model.image_model.preprocessor()
            batch = np.concatenate([keras.ops.convert_to_numpy(preprocessing(image)) for image in pixels])
        results = [
            {"image": path, "top": [{"name": n, "score": s} for n, s in top]}
            for path, top in zip(paths, classifier.predict(batch, top=min(args.top, len(classes))))
        ]
    except (ValueError, FileNotFoundError, TypeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        for result in results:
            print(result["image"])
            for rank, row in enumerate(result["top"], 1):
                print(f"  {rank}. {row['name']:<32} {row['score']:.4f}")
    return 0
