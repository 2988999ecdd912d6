"""Image folders as datasets: `--config.dataset.name=folder:/path/to/images`.

The `keras.utils.image_dataset_from_directory` convention: one subfolder per class (names sorted give the
labels 0..N-1), image files (JPEG, PNG, GIF, BMP) anywhere below each class folder. Splits:

- a folder of class folders has one split, "train"; a deterministic held-out part is a slice of it
  (`train[:90%]` / `train[90%:]`), over a fixed shuffle of the sorted file list, as TFDS slices do;
- a folder whose subfolders are `train/`, `val/` (or `validation/`, `test/`), each of class folders, has those
  splits; their class folders must agree.

A bad layout is one line naming the path, before any workdir is touched. A start lists the files and reads
their sizes and modification times (one `stat` each, the only work that grows with the folder). Every image
is decoded once, on a run's first start, by a tf.data pipeline with the decoder training uses (TensorFlow's):
files that fail are skipped with a warning and counted; more than 1 % failing is an error. The result is kept
in the workdir (`decode_check.json`) under a key of every (path, size, modification time), so a resume
reads it back instead of decoding again. The split's fingerprint (relative paths and sizes) identifies the
data a run trained on; the trainer refuses to resume on a changed folder.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
from typing import Dict, List, Optional, Tuple

import numpy as np
import tensorflow as tf

from keras_vit.utils import records
from keras_vit.utils.listing import files_below, utf8_name
from keras_vit.utils.progress import Progress
from recipes import atomic

logger = logging.getLogger("recipes")

PREFIX = "folder:"
CHECK_RECORD = "decode_check.json"
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".gif", ".bmp")
SPLIT_FOLDERS = ("train", "val", "validation", "test")
MAX_BAD_FRACTION = 0.01


def is_folder(name: str) -> bool:
    return isinstance(name, str) and name.startswith(PREFIX)


@dataclasses.dataclass
class FolderSplit:
    """The image files of one split: paths relative to `directory`, their labels, byte sizes and modification
    times (nanoseconds)."""

    directory: str
    class_names: Tuple[str, ...]
    files: List[str]
    labels: List[int]
    sizes: List[int]
    mtimes: List[int] = dataclasses.field(default_factory=list)
    _check_key: Optional[str] = dataclasses.field(default=None, repr=False, compare=False)

    def fingerprint(self) -> str:
        """sha256 of the class names and every (relative path, size): what a resumed run must see again."""
        digest = hashlib.sha256("\n".join(self.class_names).encode())
        for path, size in zip(self.files, self.sizes):
            digest.update(f"\n{path}\t{size}".encode())
        return digest.hexdigest()

    def check_key(self) -> str:
        """sha256 of the fingerprint and every modification time: what the decode check's result depends on
        (a file rewritten in place keeps its size but not its time). Computed once: the lists are not changed
        after a scan, and a 100,000-file folder's key is asked for three times per start."""
        if self._check_key is None:
            digest = hashlib.sha256(self.fingerprint().encode())
            for mtime in self.mtimes:
                digest.update(f"\n{mtime}".encode())
            self._check_key = digest.hexdigest()
        return self._check_key


def _is_image(name: str) -> bool:
    return name.lower().endswith(IMAGE_EXTENSIONS)


def _entries(directory: str) -> Tuple[List[str], List[str]]:
    """(subfolders, image files) directly in `directory`, hidden entries left out, sorted."""
    names = sorted(utf8_name(directory, n) for n in os.listdir(directory) if not n.startswith("."))
    folders = [n for n in names if os.path.isdir(os.path.join(directory, n))]
    return folders, [n for n in names if _is_image(n) and os.path.isfile(os.path.join(directory, n))]


def split_folders(root: str) -> Dict[str, str]:
    """{split name: directory of class folders} of `root` ("train" only for a folder of class folders)."""
    if not root:
        raise ValueError(f"config.dataset.name={PREFIX!r} names no folder: use {PREFIX}/path/to/images.")
    if not os.path.isdir(root):
        raise ValueError(f"dataset folder {root!r} does not exist or is not a directory.")
    folders, images = _entries(root)
    splits = [f for f in folders if f in SPLIT_FOLDERS]
    if images:
        raise ValueError(
            f"dataset folder {root!r} holds image files directly ({images[0]!r}): put each image in "
            "a subfolder named after its class."
        )
    if splits and len(splits) != len(folders):
        other = next(f for f in folders if f not in SPLIT_FOLDERS)
        raise ValueError(
            f"dataset folder {root!r} mixes split folders ({', '.join(splits)}) with {other!r}: use "
            "either class folders or train/ and val/ folders of class folders."
        )
    return {s: os.path.join(root, s) for s in splits} if splits else {"train": root}


def scan(directory: str) -> FolderSplit:
    """The class folders and image files under `directory`, or a ValueError naming what is wrong."""
    classes, images = _entries(directory)
    if images:
        raise ValueError(
            f"dataset folder {directory!r} holds image files directly ({images[0]!r}) beside its "
            "class folders: put each image in its class's folder."
        )
    if not classes:
        raise ValueError(
            f"dataset folder {directory!r} holds no class subfolders (one folder per class, "
            f"images inside: {', '.join(IMAGE_EXTENSIONS)})."
        )
    if len(classes) < 2:
        raise ValueError(
            f"dataset folder {directory!r} holds one class folder ({classes[0]!r}): a classifier needs at least two."
        )
    files, labels, sizes, mtimes = [], [], [], []
    for label, name in enumerate(classes):
        found = sorted(_images_below(directory, name))
        if not found:
            raise ValueError(
                f"class folder {os.path.join(directory, name)!r} holds no image files ({', '.join(IMAGE_EXTENSIONS)})."
            )
        for rel, size, mtime in found:
            files.append(rel)
            labels.append(label)
            sizes.append(size)
            mtimes.append(mtime)
    return FolderSplit(directory, tuple(classes), files, labels, sizes, mtimes)


def _images_below(directory: str, name: str) -> List[Tuple[str, int, int]]:
    """(path relative to `directory`, size, modification time in ns) of every image file below its subfolder
    `name` (`keras_vit.utils.listing`: hidden entries left out, names that are not UTF-8 refused)."""
    return files_below(directory, name, keep=_is_image, name_check=utf8_name)


def decode(path) -> tf.Tensor:
    """An image file as uint8 (H, W, 3) (`decode_bytes`)."""
    return decode_bytes(tf.io.read_file(path))


def decode_bytes(contents) -> tf.Tensor:
    """An image file's bytes as uint8 (H, W, 3): grayscale tiled, alpha dropped, a GIF's first frame. JPEGs use the
    accurate integer IDCT (libjpeg's default, what PIL gives) rather than TensorFlow's faster default."""
    return tf.cond(
        tf.io.is_jpeg(contents),
        lambda: tf.io.decode_jpeg(contents, channels=3, dct_method="INTEGER_ACCURATE"),
        lambda: tf.io.decode_image(contents, channels=3, expand_animations=False),
    )


def _decodes(path: str, read=decode) -> bool:
    """Whether TensorFlow's decoder reads `path` as an image of at least one pixel (one file, eagerly)."""
    try:
        image = read(path)
        return bool(image.shape[0]) and bool(image.shape[1])
    except (tf.errors.OpError, ValueError):
        return False


DECODE_PASSES = [0]  # decode passes run in this process (the tests count them)


def undecodable(split: FolderSplit, read=decode) -> List[str]:
    """Relative paths of the files TensorFlow's decoder fails on: one pass of a parallel tf.data pipeline
    (each file decoded once, out of order, the failures dropped and found by their missing index), with a
    progress line every few seconds. `read`: path -> image (default: an image file's `decode`)."""
    DECODE_PASSES[0] += 1
    paths = [os.path.join(split.directory, f) for f in split.files]
    if not paths:
        return []

    def pixels(index, path):
        shape = tf.shape(read(path))
        return index, tf.minimum(shape[0], shape[1])

    ds = tf.data.Dataset.from_tensor_slices(paths).enumerate()
    ds = ds.map(pixels, num_parallel_calls=tf.data.AUTOTUNE, deterministic=False).ignore_errors().batch(512)
    good = np.zeros(len(paths), bool)
    progress = Progress(
        f"checking that the images of {split.directory} decode", len(paths), unit="images", log=logger.info
    )
    for index, side in ds.as_numpy_iterator():
        good[index[side > 0]] = True
        progress.update(len(index))
    progress.close()
    return [f for f, ok in zip(split.files, good) if not ok]


def failing_now(directory: str, files, read=decode) -> List[str]:
    """Those of `files` (relative to `directory`) that TensorFlow's decoder fails on now: asked when a run's
    input pipeline stopped on a file the decode check had passed (rewritten since, keeping its size and
    modification time, which the check's record is keyed by; docs/guarantees.md)."""
    split = FolderSplit(directory, (), list(files), [], [])
    return undecodable(split, read)


_CHECKED: Dict[str, List[str]] = {}  # check key -> undecodable files: a folder is decoded once per process


CHECK_KIND, CHECK_SCHEMA = "keras_vit.decode_check", 1
_CHECK_FIELDS = {"key": str, "directory": str, "files": int, "undecodable": list}


def read_check_record(workdir: str, whole: FolderSplit) -> Optional[List[str]]:
    """The undecodable files `workdir`'s decode-check record holds for exactly these files, sizes and
    modification times; None when there is no record or it was made for other files. A record that is not one
    (truncated, foreign, an earlier build's, a field of another type) is refused naming the file and field."""
    path = os.path.join(workdir, CHECK_RECORD)
    record = records.read_record(path, CHECK_KIND, CHECK_SCHEMA, _CHECK_FIELDS, fs=atomic.GFILE)
    if record is None or record["key"] != whole.check_key():
        return None
    if not all(isinstance(name, str) for name in record["undecodable"]):
        raise ValueError(f"{path!r}: field 'undecodable' of the {CHECK_KIND} record holds a non-file-name.")
    return list(record["undecodable"])


def check_record(whole: FolderSplit, bad: List[str]) -> dict:
    """The decode check's result, the body of the `decode_check.json` record (`write_check_record`)."""
    return dict(key=whole.check_key(), directory=whole.directory, files=len(whole.files), undecodable=list(bad))


def write_check_record(workdir: str, check: dict) -> None:
    records.write_record(os.path.join(workdir, CHECK_RECORD), CHECK_KIND, CHECK_SCHEMA, check, fs=atomic.GFILE)


def check_decodable(whole: FolderSplit, workdir: Optional[str] = None, read=decode) -> List[str]:
    """The undecodable files of a whole folder (a warning names them), or a ValueError when more than 1 % of
    its files fail. Decoded once per process and key; read back from `workdir`'s record when it holds this
    key (a resume decodes nothing)."""
    key = whole.check_key()
    if key not in _CHECKED:
        bad = read_check_record(workdir, whole) if workdir else None
        if bad is None:
            bad = undecodable(whole, read)
        if len(bad) > MAX_BAD_FRACTION * len(whole.files):
            raise ValueError(
                f"{len(bad)} of {len(whole.files)} images in {whole.directory!r} cannot be decoded "
                f"(more than {MAX_BAD_FRACTION:.0%}), e.g. {bad[0]!r}: fix or remove them."
            )
        if bad:
            logger.warning(
                "Skipping %d image(s) of %s that cannot be decoded: %s",
                len(bad),
                whole.directory,
                ", ".join(bad[:5]) + (" ..." if len(bad) > 5 else ""),
            )
        _CHECKED[key] = bad
    return _CHECKED[key]


def order(n: int) -> np.ndarray:
    """The fixed shuffle of a split's sorted files that slices (`train[:90%]`) cut."""
    return np.random.default_rng(0).permutation(n)
