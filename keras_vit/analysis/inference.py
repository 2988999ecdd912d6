"""Batch inference over a folder, a file list or a TFDS split: the top-k classes of every image, or its
feature vector (pooled, or one per patch), written in shards (`keras_vit.analysis.shards`).

`python -m keras_vit.inference SOURCE --weights=W --output=DIR [--features=pooled|patches|embedding] [--top=5]
[--format=parquet|npy|csv] [--batch_size=32] [--shard_size=N] [--dtype=float16] [--l2_normalize]`; with `--texts`,
SOURCE is a file of texts and the output their text embeddings (`keras_vit.analysis.text_inference`).

What timm's `inference.py` does for a folder, made for collections that take hours:
- images are read and prepared in threads (PIL, as timm reads them; `keras_vit.analysis.image_sources`)
  with the model's own data config (`keras_vit.analysis.images.preprocess_image`), a few batches ahead of
  the model, which runs through Keras' compiled `predict_on_batch` (XLA on TensorFlow, `jax.jit` on JAX)
  at one batch shape: the last batch of each shard is padded;
- results are streamed to disk shard by shard, so memory stays at a few batches whatever the collection;
- a killed run, started again with the same arguments, continues at the first shard its manifest does not
  record, and the output equals an uninterrupted run's (batches never cross a shard boundary). Other
  weights, settings or images in the same `--output` are refused by name;
- an image that cannot be read is listed in the manifest with its error and skipped;
- a progress line (a bar on a terminal) shows images per second and the time left.
No TensorFlow is needed for folders and lists: it runs on every Keras backend.
"""

from __future__ import annotations

import collections
import concurrent.futures
import os
from typing import Callable, Dict, Iterator, Optional, Tuple, Union

import numpy as np

from keras_vit.analysis import shards
from keras_vit.analysis.image_sources import ImageSource, open_source, read_pixels, tfds_images
from keras_vit.analysis.images import preprocess_image
from keras_vit.utils import commands, compilation_cache
from keras_vit.utils.progress import Progress

FEATURES = ("pooled", "patches", "embedding")  # embedding: an image-text model's image embedding
DTYPES = shards.DTYPES
weights_digest = shards.weights_digest  # where it was defined before it moved to shards


def _compiled(net) -> Callable[[np.ndarray], np.ndarray]:
    """`net`'s inference at float32 through the backend's compiled path: on JAX one jitted stateless call
    compiled without YNNPACK's fusions (`keras_vit.analysis.predict._jax_forward`: 1.45x the rate of
    `predict_on_batch` for a ViT-S/16 batch of 32 on 2 CPU cores), elsewhere `predict_on_batch` (XLA on
    TensorFlow)."""
    import keras

    if keras.backend.backend() != "jax":
        return lambda x: np.asarray(net.predict_on_batch(x), "float32")
    from keras_vit.analysis.predict import _jax_forward

    forward = _jax_forward(net)
    trainable = [v.value for v in net.trainable_variables]
    fixed = [v.value for v in net.non_trainable_variables]
    return lambda x, net=net: np.asarray(forward(trainable, fixed, x), "float32")  # keeps `net` (held weakly)


def _image_model(model, features: Optional[str]):
    """The image model a run feeds: an image-text model's image tower for `features="embedding"` (which needs one),
    else `model` itself (which must then be an image model)."""
    from keras_vit.vit.image_text import ImageTextModel

    if features == "embedding":
        if not isinstance(model, ImageTextModel):
            raise ValueError(
                "features='embedding' is an image-text model's image embedding: load one with "
                "keras_vit.load_image_text (an image model's features are 'pooled' or 'patches')."
            )
        return model.image_model
    if isinstance(model, ImageTextModel):
        raise ValueError(
            f"an image-text model writes its image embedding (features='embedding') or, with --texts, its text "
            f"embeddings; features={features!r} is an image model's."
        )
    return model


def _predictor(model, features: Optional[str]) -> Tuple[Callable[[np.ndarray], np.ndarray], str]:
    """(batch -> outputs, task): softmax scores of the head, pre-logits features, the patch tokens, or (an
    image-text model's image tower) the image embedding, its projected output."""
    if features == "embedding":
        return _compiled(model), "features"
    if features is None:
        if not getattr(model, "include_top", False):
            raise ValueError(
                f"model {model.name!r} has no classification head (include_top=False): ask for "
                "--features=pooled or patches."
            )
        call = _compiled(model)
        if model.classifier_activation == "softmax":
            return call, "top"
        return lambda x: _softmax(call(x)), "top"
    if features == "pooled":
        return _compiled(model.feature_model(None if "pre_logits" in model._taps else "avg")), "features"
    call, prefix = _compiled(model.feature_model("sequence")), model.num_prefix_tokens
    return lambda x: call(x)[:, prefix:], "features"


def _naflex(whole, features: Optional[str]) -> Optional[dict]:
    """The NaFlex batch settings an embedding run uses: an image-text model's with a NaFlex image tower (SigLIP 2
    NaFlex, `model.naflex`), whose photos are then each cut at their own aspect ratio; else None."""
    return dict(whole.naflex) if features == "embedding" and getattr(whole, "naflex", None) else None


def _naflex_predictor(tower, settings: dict) -> Tuple[Callable, Callable]:
    """(prepare, predict) for a NaFlex image tower: one photo -> its NaFlex arrays (`naflex_batch`, the
    repository's settings); a stacked batch of them -> the image embeddings. The forward pass groups a batch by
    patch count (`naflex_forward`), so it runs eagerly rather than as one compiled program."""
    import keras

    from keras_vit.vit.naflex import naflex_batch, naflex_forward

    def prepare(pixels):
        return {k: v[0] for k, v in naflex_batch([pixels], **settings).items()}

    def predict(batch):
        return np.asarray(keras.ops.convert_to_numpy(naflex_forward(tower, batch, training=False)), "float32")

    return prepare, predict


def _stack(images: list, batch_size: int):
    """One model call's input: the prepared images stacked (arrays, or dicts of arrays), padded to `batch_size`
    (one compiled shape) with zeros, or for dicts with copies of the last image (a NaFlex row needs a patch)."""
    if isinstance(images[0], dict):
        images = images + [images[-1]] * (batch_size - len(images))
        return {k: np.stack([image[k] for image in images]) for k in images[0]}
    stacked = np.stack(images)
    if len(images) < batch_size:
        stacked = np.concatenate([stacked, np.zeros((batch_size - len(images), *stacked.shape[1:]), stacked.dtype)])
    return stacked


def _softmax(logits: np.ndarray) -> np.ndarray:
    shifted = np.exp(logits.astype("float64") - logits.max(axis=-1, keepdims=True))
    return (shifted / shifted.sum(axis=-1, keepdims=True)).astype("float32")


def _loaded(
    source: ImageSource, start: int, prepare: Callable, workers: int, exif_transpose: bool
) -> Iterator[Tuple[int, Optional[np.ndarray], str]]:
    """(index, prepared image or None, error) for each image from `start` on, in order, read `workers` at a
    time a few batches ahead."""

    def load(index_pixels):
        index, pixels = index_pixels
        try:
            if pixels is None:
                pixels = read_pixels(source.paths[index], exif_transpose)
            return index, prepare(pixels), ""
        except (ValueError, OSError) as e:
            return index, None, str(e)

    items = tfds_images(source, start) if source.kind == "tfds" else ((i, None) for i in range(start, len(source)))
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        pending = collections.deque()
        for item in items:
            pending.append(pool.submit(load, item))
            if len(pending) >= 8 * workers + 64:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


def _results(outputs: np.ndarray, task: str, top: int, labels, dtype: str, l2: bool) -> Dict[str, np.ndarray]:
    """One shard's columns from the model's outputs."""
    if task == "features":
        return shards.embedding_columns(outputs, dtype, l2)
    from keras_vit.vit.labels import decode_predictions

    k = min(top, outputs.shape[-1])
    scores = outputs.astype("float64")
    rows = decode_predictions(scores, top=k, labels=labels) if len(outputs) else []
    order = np.argsort(-scores, axis=1, kind="stable")[:, :k]  # decode_predictions' order
    return {
        "class_index": order.astype("int64").reshape(-1, k),
        "class_id": np.asarray([[r[0] for r in row] for row in rows], object).reshape(-1, k),
        "class_name": np.asarray([[r[1] for r in row] for row in rows], object).reshape(-1, k),
        "score": np.asarray([[r[2] for r in row] for row in rows], "float32").reshape(-1, k),
    }


def _check_settings(features, dtype, top: int, batch_size: int, shard_size: Optional[int]) -> None:
    """A ValueError naming the first setting out of range."""
    if features not in (None, *FEATURES):
        raise ValueError(f"features must be None, {' or '.join(map(repr, FEATURES))}; got {features!r}.")
    shards.check_settings(dtype, batch_size, shard_size, top=top)


def _shard_size(model, features: Optional[str], dtype: str, most: int = 10_000, budget: int = 256 << 20) -> int:
    """The default images per shard: 10,000, or as many as fit ~256 MB of per-patch features (a ViT-B/16's
    196 x 768 float32 tokens: 445 images), so a shard's results never take gigabytes of memory."""
    if features != "patches":
        return most
    patches = int(np.prod(model.grid_size)) if hasattr(model, "grid_size") else 1
    per_image = patches * model.vit_config.hidden_size * np.dtype(dtype).itemsize
    return int(max(1, min(most, budget // per_image)))


def _settings(
    model, source: ImageSource, task: str, features, top, fmt, dtype, l2, shard_size, weights, labels, exif, whole
) -> dict:
    """Every setting that changes the run's results (a resume under another one is refused by name); `whole`: the
    model whose weights the digest covers (an image-text model's, text tower included, when `model` is its
    image tower)."""
    return dict(
        shards.run_settings(task, fmt, dtype, l2, shard_size, weights, whole),
        features=features,
        top=top if task == "top" else None,
        image_size=list(model.base_image_size),
        data_config=model.data_config.to_dict(),
        source=source.describe(),
        labels=list(labels) if isinstance(labels, (list, tuple)) else labels,
        exif_transpose=bool(exif),
    )


def _batches(loaded, first: int, last: int, batch_size: int):
    """Batches of (indices, stacked images) over images first..last-1, and the unreadable ones' errors."""
    batch, bad = [], []
    for _ in range(first, last):
        index, image, error = next(loaded)
        if image is None:
            bad.append((index, error))
        else:
            batch.append((index, image))
        if len(batch) == batch_size:
            yield batch, bad
            batch, bad = [], []
    if batch or bad:
        yield batch, bad


def _shard(predict, loaded, first: int, last: int, batch_size: int, progress: Progress):
    """(indices, outputs, [(index, error)]) of images first..last-1, every batch padded to `batch_size`."""
    indices, outputs, bad = [], [], []
    for batch, errors in _batches(loaded, first, last, batch_size):
        bad += errors
        if batch:
            outputs.append(predict(_stack([image for _, image in batch], batch_size))[: len(batch)])
            indices += [i for i, _ in batch]
        progress.update(len(batch) + len(errors))
    return indices, (np.concatenate(outputs) if outputs else None), bad


def run_inference(
    model,
    source: Union[str, ImageSource],
    output: str,
    *,
    features: Optional[str] = None,
    top: int = 5,
    fmt: str = "parquet",
    batch_size: int = 32,
    shard_size: Optional[int] = None,
    dtype: str = "float32",
    l2_normalize: bool = False,
    labels=None,
    workers: Optional[int] = None,
    exif_transpose: bool = False,
    weights: str = "",
    data_dir: Optional[str] = None,
    progress: bool = True,
) -> dict:
    """Runs `model` over every image of `source` and writes the results to the folder `output`.

    Args:
        model: a `keras_vit.VisionTransformer` (any weights `keras_vit` loads), or for `features="embedding"` a
            `keras_vit.ImageTextModel`.
        source: a folder, a text file listing images, `tfds:<name>:<split>`, or an `ImageSource`.
        output: the folder for the shards and `manifest.json`; an earlier run's there is continued.
        features: None for the top-k classes; "pooled" (the pre-logits vector) or "patches" (the patch
            tokens, no prefix tokens) for features; "embedding" for an image-text model's image embedding (the
            vector its text embeddings are compared with; a SigLIP 2 NaFlex model's photos each at their own
            aspect ratio, `model.naflex`).
        top: how many classes per image (softmax scores, names from `labels` or the model's label set).
        fmt: "parquet", "npy" (features only) or "csv" (pooled features or classes).
        batch_size / shard_size: images per model call / per output file (default 10,000, fewer for
            per-patch features: a shard holds at most ~256 MB).
        dtype: "float32" or "float16" for the features; `l2_normalize` scales each vector to unit length.
        workers: threads that read and prepare images (default: the CPU count).
        exif_transpose: apply EXIF orientation (timm does not, so neither do we by default).
        weights: what the model was loaded from, recorded in the manifest.
    Returns:
        the manifest (`settings`, `shards`, each with its rows and unreadable images, `complete`).
    """
    _check_settings(features, dtype, top, batch_size, shard_size)
    whole, model = model, _image_model(model, features)
    shard_size = _shard_size(model, features, dtype) if shard_size is None else shard_size
    shards.check_format(fmt, "features" if features else "top", features == "patches")
    source = open_source(source, data_dir) if isinstance(source, str) else source
    naflex = _naflex(whole, features)
    if naflex:  # each photo at its own aspect ratio, the repository's settings
        prepare, predict = _naflex_predictor(model, naflex)
        task = "features"
    else:
        predict, task = _predictor(model, features)
        size = tuple(model.base_image_size)

        def prepare(pixels):
            return preprocess_image(pixels, model.data_config, size, normalize=not model.include_preprocessing)

    if task == "top" and labels is None:
        from keras_vit.analysis.predict import read_labels

        labels = model.data_config.labels or read_labels(None, model.classes)
    settings = _settings(
        model, source, task, features, top, fmt, dtype, l2_normalize, shard_size, weights, labels, exif_transpose, whole
    )
    if naflex:  # recorded only where used: outputs of fixed-size towers keep their settings as they were
        settings["naflex"] = {k: list(v) if isinstance(v, tuple) else v for k, v in naflex.items()}
    manifest = shards.open_output(output, settings)
    start = len(manifest["shards"]) * shard_size
    meter = Progress(
        f"{task} of {source.location}",
        len(source),
        unit="images",
        done=start,
        log=None if progress else (lambda line: None),
    )
    loaded = _loaded(source, start, prepare, workers or os.cpu_count() or 1, exif_transpose)
    for first in range(start, len(source), shard_size):
        last = min(first + shard_size, len(source))
        indices, outputs, bad = _shard(predict, loaded, first, last, batch_size, meter)
        files = [source.names[i] for i in indices]
        values = _results(outputs, task, top, labels, dtype, l2_normalize) if outputs is not None else None
        failed = [dict(file=source.names[i], error=e) for i, e in bad]
        shards.add_shard(output, manifest, fmt, first, dict(images=last - first), files, values, failed)
    loaded.close()
    meter.close()
    return shards.complete(output, manifest)


def load(weights: str, model: Optional[str] = None):
    """The model of `--weights` / `--model`: a timm architecture name builds that architecture with the weights
    (`keras_vit.create_model`); a table name or none reads the architecture from the source
    (`keras_vit.load_model`)."""
    from keras_vit.vit import timm_table

    if model and timm_table.is_timm_name(model):
        from keras_vit.applications.create import create_model

        return create_model(model, weights=weights)
    from keras_vit.weights.load import load_model

    return load_model(weights, model=model or None)


def main(argv=None) -> int:
    import argparse
    import sys

    from keras_vit.analysis.predict import read_labels

    p = argparse.ArgumentParser(
        prog=commands.prog("python -m keras_vit.inference"),
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("source", help="a folder of images, a text file listing images, or tfds:<name>:<split>")
    p.add_argument(
        "--weights", required=True, help="what `keras_vit.load_model` reads (with --model for release names)"
    )
    p.add_argument(
        "--model",
        default=None,
        help="a table name (needed for release dataset names and .weights.h5) "
        "or a timm architecture name (for a bare timm file)",
    )
    p.add_argument("--output", required=True, help="folder for the shards and manifest.json (resumed if present)")
    p.add_argument(
        "--features",
        choices=FEATURES,
        default=None,
        help="write features instead of top-k classes (embedding: an image-text model's image embedding, --weights "
        "as keras_vit.load_image_text reads them)",
    )
    p.add_argument("--top", type=int, default=5)
    p.add_argument("--format", choices=shards.FORMATS, default="parquet")
    p.add_argument("--batch_size", type=int, default=32)
    p.add_argument(
        "--shard_size",
        type=int,
        default=None,
        help="images per output file (default 10,000; per-patch features: ~256 MB per shard)",
    )
    p.add_argument("--dtype", choices=DTYPES, default="float32")
    p.add_argument("--l2_normalize", action="store_true")
    p.add_argument("--labels", default=None, help="a label set's name, or a file of one class name per line")
    p.add_argument("--workers", type=int, default=None, help="image-reading threads (default: CPU count)")
    p.add_argument("--exif_transpose", action="store_true", help="apply EXIF orientation (timm does not)")
    p.add_argument("--data_dir", default=None, help="TFDS data_dir")
    p.add_argument(
        "--texts",
        action="store_true",
        help="SOURCE is a UTF-8 file of texts, one per line: write the text tower's embeddings of an image-text "
        "model (--weights as keras_vit.load_image_text reads them)",
    )
    compilation_cache.add_flag(p)
    args = p.parse_args(argv)
    if args.texts:
        return _texts_main(args)
    try:
        source = open_source(args.source, args.data_dir)  # a bad source fails before the model is loaded
        compilation_cache.enable_for_command(args.compilation_cache)
        if args.features == "embedding":
            from keras_vit.weights.image_text_sources import load_image_text

            if args.model:  # an image-text source says what it holds
                raise ValueError("--features=embedding reads an image-text model as it is: --model does not apply.")
            model = load_image_text(args.weights)
        else:
            model = load(args.weights, args.model)
        labels = read_labels(args.labels, model.classes) if args.labels and not args.features else None
        manifest = run_inference(
            model,
            source,
            args.output,
            features=args.features,
            top=args.top,
            fmt=args.format,
            batch_size=args.batch_size,
            shard_size=args.shard_size,
            dtype=args.dtype,
            l2_normalize=args.l2_normalize,
            labels=labels,
            workers=args.workers,
            exif_transpose=args.exif_transpose,
            weights=args.weights,
        )
    except (ValueError, FileNotFoundError, ImportError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    rows = sum(s["rows"] for s in manifest["shards"])
    bad = [b for s in manifest["shards"] for b in s["bad"]]
    print(
        f"{rows} image(s) written to {args.output} in {len(manifest['shards'])} shard(s); {len(bad)} unreadable"
        + (f" (e.g. {bad[0]['file']}: {bad[0]['error']})" if bad else "")
        + "."
    )
    return 0


def _texts_main(args) -> int:
    """`--texts`: the text tower's embeddings of every line of SOURCE (`keras_vit.analysis.text_inference`)."""
    import sys

    from keras_vit.analysis.text_inference import open_texts, run_text_inference
    from keras_vit.weights.image_text_sources import load_image_text

    try:
        unused = [f"--{k}" for k in ("features", "labels", "data_dir", "model") if getattr(args, k)]
        unused += ["--exif_transpose"] if args.exif_transpose else []
        if unused:
            raise ValueError(f"--texts writes text embeddings: {', '.join(unused)} do not apply to texts.")
        texts = open_texts(args.source)  # read once, and refused before the model is loaded
        compilation_cache.enable_for_command(args.compilation_cache)
        model = load_image_text(args.weights)
        manifest = run_text_inference(
            model,
            texts,
            args.output,
            fmt=args.format,
            batch_size=args.batch_size,
            shard_size=args.shard_size,
            dtype=args.dtype,
            l2_normalize=args.l2_normalize,
            weights=args.weights,
        )
    except (ValueError, FileNotFoundError, ImportError, TypeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    rows = sum(s["rows"] for s in manifest["shards"])
    print(f"{rows} text embedding(s) written to {args.output} in {len(manifest['shards'])} shard(s).")
    return 0
