"""Image folders as datasets: `--config.dataset.name=folder:/path/to/images`.

The `keras.utils.image_dataset_from_directory` convention: one subfolder per class (names sorted give the
labels 0..N-1), image files (JPEG, PNG, GIF, BMP) anywhere below each class folder. Splits:

- a folder of class folders has one split, "train"; a deterministic held-out part is a slice of it
  (`train[:90%]` / `train[90%:]`), over a fixed shuffle of the sorted file list, as TFDS slices do;
- a folder whose subfolders are `train/`, `val/` (or `validation/`, `test/`), each of class folders, has those
  splits; their class folders must agree.

A bad layout is one line naming the path, before any workdir is touched. Every image is decoded once at the
start with the decoder training uses (TensorFlow's): files that fail are skipped with a warning and counted;
more than 1 % failing is an error. The split's fingerprint (relative paths and sizes) identifies the data a
run trained on; the trainer refuses to resume on a changed folder.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import hashlib
import logging
import os
from typing import Dict, List, Tuple

import numpy as np
import tensorflow as tf

logger = logging.getLogger("recipes")

PREFIX = "folder:"
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".gif", ".bmp")
SPLIT_FOLDERS = ("train", "val", "validation", "test")
MAX_BAD_FRACTION = 0.01


def is_folder(name: str) -> bool:
    return isinstance(name, str) and name.startswith(PREFIX)


@dataclasses.dataclass
class FolderSplit:
    """The image files of one split: paths relative to `directory`, their labels and byte sizes."""

    directory: str
    class_names: Tuple[str, ...]
    files: List[str]
    labels: List[int]
    sizes: List[int]

    def fingerprint(self) -> str:
        """sha256 of the class names and every (relative path, size): what a resumed run must see again."""
        digest = hashlib.sha256("\n".join(self.class_names).encode())
        for path, size in zip(self.files, self.sizes):
            digest.update(f"\n{path}\t{size}".encode())
        return digest.hexdigest()


def _is_image(name: str) -> bool:
    return name.lower().endswith(IMAGE_EXTENSIONS)


def _utf8(parent: str, name: str) -> str:
    """`name` if it is valid UTF-8; a file system's undecodable bytes (Python's surrogate escapes) are refused
    naming the path, since class names and fingerprints are text."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{os.path.join(parent, name)!r} has a name that is not valid UTF-8: rename it (class "
                         "names and file lists are kept as text).") from None
    return name


def _entries(directory: str) -> Tuple[List[str], List[str]]:
    """(subfolders, image files) directly in `directory`, hidden entries left out, sorted."""
    names = sorted(_utf8(directory, n) for n in os.listdir(directory) if not n.startswith("."))
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
        raise ValueError(f"dataset folder {root!r} holds image files directly ({images[0]!r}): put each image in "
                         "a subfolder named after its class.")
    if splits and len(splits) != len(folders):
        other = next(f for f in folders if f not in SPLIT_FOLDERS)
        raise ValueError(f"dataset folder {root!r} mixes split folders ({', '.join(splits)}) with {other!r}: use "
                         "either class folders or train/ and val/ folders of class folders.")
    return {s: os.path.join(root, s) for s in splits} if splits else {"train": root}


def scan(directory: str) -> FolderSplit:
    """The class folders and image files under `directory`, or a ValueError naming what is wrong."""
    classes, images = _entries(directory)
    if images:
        raise ValueError(f"dataset folder {directory!r} holds image files directly ({images[0]!r}) beside its "
                         "class folders: put each image in its class's folder.")
    if not classes:
        raise ValueError(f"dataset folder {directory!r} holds no class subfolders (one folder per class, "
                         f"images inside: {', '.join(IMAGE_EXTENSIONS)}).")
    if len(classes) < 2:
        raise ValueError(f"dataset folder {directory!r} holds one class folder ({classes[0]!r}): a classifier "
                         "needs at least two.")
    files, labels, sizes = [], [], []
    for label, name in enumerate(classes):
        found = []
        for parent, dirs, names in os.walk(os.path.join(directory, name)):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            found += [_utf8(directory, os.path.relpath(os.path.join(parent, n), directory)) for n in names
                      if _is_image(n) and not n.startswith(".")]
        if not found:
            raise ValueError(f"class folder {os.path.join(directory, name)!r} holds no image files "
                             f"({', '.join(IMAGE_EXTENSIONS)}).")
        for rel in sorted(found):
            files.append(rel)
            labels.append(label)
            sizes.append(os.path.getsize(os.path.join(directory, rel)))
    return FolderSplit(directory, tuple(classes), files, labels, sizes)


def decode(path) -> tf.Tensor:
    """An image file as uint8 (H, W, 3): grayscale tiled, alpha dropped, a GIF's first frame. JPEGs use the
    accurate integer IDCT (libjpeg's default, what PIL gives) rather than TensorFlow's faster default."""
    contents = tf.io.read_file(path)
    return tf.cond(tf.io.is_jpeg(contents),
                   lambda: tf.io.decode_jpeg(contents, channels=3, dct_method="INTEGER_ACCURATE"),
                   lambda: tf.io.decode_image(contents, channels=3, expand_animations=False))


def _decodes(path: str) -> bool:
    try:
        image = decode(path)
        return bool(image.shape[0]) and bool(image.shape[1])
    except (tf.errors.OpError, ValueError):
        return False


def undecodable(split: FolderSplit, workers: int = 8) -> List[str]:
    """Relative paths of the files TensorFlow's decoder fails on (each file decoded once)."""
    paths = [os.path.join(split.directory, f) for f in split.files]
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        ok = list(pool.map(_decodes, paths))
    return [f for f, good in zip(split.files, ok) if not good]


_CHECKED: Dict[str, List[str]] = {}  # fingerprint -> undecodable files: a folder is decoded once per process


def check_decodable(whole: FolderSplit) -> List[str]:
    """The undecodable files of a whole folder (a warning names them), or a ValueError when more than 1 % of
    its files fail."""
    key = whole.fingerprint()
    if key not in _CHECKED:
        bad = undecodable(whole)
        if len(bad) > MAX_BAD_FRACTION * len(whole.files):
            raise ValueError(f"{len(bad)} of {len(whole.files)} images in {whole.directory!r} cannot be decoded "
                             f"(more than {MAX_BAD_FRACTION:.0%}), e.g. {bad[0]!r}: fix or remove them.")
        if bad:
            logger.warning("Skipping %d image(s) of %s that cannot be decoded: %s", len(bad), whole.directory,
                           ", ".join(bad[:5]) + (" ..." if len(bad) > 5 else ""))
        _CHECKED[key] = bad
    return _CHECKED[key]


def order(n: int) -> np.ndarray:
    """The fixed shuffle of a split's sorted files that slices (`train[:90%]`) cut."""
    return np.random.default_rng(0).permutation(n)
