"""Image-caption pairs as datasets, for contrastive training (`recipes.contrastive`):
`--config.dataset.name=captions:<path>`.

`<path>` is one of:

- a table of pairs: `.csv` (comma-separated), `.tsv` (tab-separated) or `.jsonl` (one JSON object per line).
  The image column is `image` or `filepath` (open_clip's `CsvDataset` default), the caption column `caption`
  or `title` (open_clip's); a table with both names of one column, or neither, is refused naming its columns.
  Image paths are relative to the table's folder (or absolute). Every image must exist.
- webdataset shards as img2dataset writes them: a folder of uncompressed `.tar` files, one `.tar`, a brace
  pattern (`shards/{00000..00099}.tar`) or URLs (`https://host/{00000..00099}.tar`, copied to the local disk
  first: `recipes.shard_sources`), each
  sample an image (`<key>.jpg`, `.jpeg`, `.png`, `.gif`, `.bmp`) and its caption (`<key>.txt`, UTF-8), other
  members (img2dataset's `.json`) ignored. The key is a member's path up to the first dot of its file name, as
  webdataset groups them. A sample without its image or caption, two images of one key, or a WebP image (which
  TensorFlow's decoder does not read; `img2dataset --encode_format=jpg` writes JPEGs) is refused naming the shard
  and key. Members are read in place from the shards, by offset.

Such a dataset has one split, "train"; held-out parts are slices over a fixed shuffle of its rows
(`train[:95%]` / `train[95%:]`), as image folders (`recipes.folder`) are cut. Images are checked once for
decoding with the folder's check (undecodable ones skipped, more than 1 % an error, the result recorded in the
workdir) and the split's fingerprint (image paths and sizes, and every caption) is what a resumed run must see
again. An example's label is its row in the split: each image's only positive in a batch is its own caption
(open_clip's `ClipLoss` / `SigLipLoss` targets).
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import json
import os
import tarfile
from typing import Dict, List, Optional, Tuple

import numpy as np
import tensorflow as tf

from recipes import folder, shard_sources

PREFIX = "captions:"
TABLES = {".csv": ",", ".tsv": "\t", ".jsonl": None}
IMAGE_COLUMNS = ("image", "filepath")
CAPTION_COLUMNS = ("caption", "title")
SHARD_IMAGES = (".jpg", ".jpeg", ".png", ".gif", ".bmp")
SHARD_CAPTION = ".txt"
UNREADABLE = (".webp",)


def is_captions(name: str) -> bool:
    return isinstance(name, str) and name.startswith(PREFIX)


@dataclasses.dataclass
class Captioned:
    """Every pair of a caption dataset, in its own order: `split` (the images: paths relative to its directory,
    sizes, modification times), `captions` one per image, and `shards` (None for a table) the tar members'
    {relative path: (shard path, offset, size)}."""

    split: folder.FolderSplit
    captions: List[str]
    shards: Dict[str, Tuple[str, int, int]] = None

    def fingerprint(self, rows) -> str:
        """sha256 of `rows`' images (path, size) and captions: what a resumed run must see again."""
        digest = hashlib.sha256(b"captions")
        for i in rows:
            digest.update(f"\n{self.split.files[i]}\t{self.split.sizes[i]}\t".encode())
            digest.update(hashlib.sha256(self.captions[i].encode()).digest())
        return digest.hexdigest()


def scan(name: str, cache: Optional[str] = None) -> Captioned:
    """The pairs `captions:<path>` names, or a ValueError naming what is wrong with it. `cache`: where shards named
    by URL are copied (`recipes.shard_sources`; default keras_vit's cache)."""
    path = name[len(PREFIX) :]
    if not path:
        raise ValueError(f"config.dataset.name={PREFIX!r} names no file: use {PREFIX}/path/to/captions.csv.")
    if os.path.isdir(path):
        return _scan_shards(_folder_shards(path))
    if path.lower().endswith(".tar") or "{" in path or shard_sources.is_url(path):
        return _scan_shards(shard_sources.local_shards(path, cache))
    ext = os.path.splitext(path)[1].lower()
    if ext not in TABLES:
        raise ValueError(
            f"{name!r}: a caption dataset is a table ({', '.join(TABLES)}) or webdataset shards (a folder of .tar "
            f"files, or one .tar), not {ext or 'a file without extension'!r}."
        )
    if not os.path.isfile(path):
        raise ValueError(f"caption table {path!r} does not exist.")
    return _scan_table(path, TABLES[ext])


def _column(path: str, columns, wanted: Tuple[str, ...], what: str) -> str:
    found = [c for c in wanted if c in columns]
    if len(found) != 1:
        raise ValueError(
            f"caption table {path!r}: {'columns ' + ' and '.join(found) + ' both' if found else 'no column'} "
            f"name its {what} (one of {', '.join(wanted)}); its columns: {', '.join(map(str, columns)) or 'none'}."
        )
    return found[0]


def _rows(path: str, delimiter) -> List[dict]:
    try:
        with open(path, encoding="utf-8", newline="") as f:
            if delimiter is not None:
                return list(csv.DictReader(f, delimiter=delimiter))
            rows = []
            for line_number, line in enumerate(f, 1):
                if not line.strip():
                    continue
                row = json.loads(line)
                if not isinstance(row, dict):
                    raise ValueError(f"line {line_number} is not a JSON object")
                rows.append(row)
            return rows
    except (UnicodeDecodeError, json.JSONDecodeError, csv.Error, ValueError) as e:
        raise ValueError(f"caption table {path!r} cannot be read: {e}") from e


def _scan_table(path: str, delimiter) -> Captioned:
    rows = _rows(path, delimiter)
    if not rows:
        raise ValueError(f"caption table {path!r} holds no rows.")
    columns = list(rows[0])
    image_key = _column(path, columns, IMAGE_COLUMNS, "images")
    caption_key = _column(path, columns, CAPTION_COLUMNS, "captions")
    directory = os.path.dirname(os.path.abspath(path))
    files, captions, sizes, mtimes = [], [], [], []
    for number, row in enumerate(rows, 2 if delimiter is not None else 1):
        image, caption = row.get(image_key), row.get(caption_key)
        where = f"caption table {path!r}, {'row' if delimiter is not None else 'line'} {number}"
        if not isinstance(image, str) or not image:
            raise ValueError(f"{where}: no image path in column {image_key!r}.")
        if not isinstance(caption, str):
            raise ValueError(f"{where}: the caption in column {caption_key!r} is not text ({caption!r}).")
        full = os.path.join(directory, image)
        if not os.path.isfile(full):
            raise ValueError(f"{where}: image {image!r} does not exist ({full}).")
        stat = os.stat(full)
        files.append(os.path.relpath(full, directory))
        captions.append(caption)
        sizes.append(stat.st_size)
        mtimes.append(stat.st_mtime_ns)
    return Captioned(folder.FolderSplit(directory, (), files, [], sizes, mtimes), captions)


def _folder_shards(path: str) -> List[str]:
    directory = os.path.abspath(path)
    names = sorted(n for n in os.listdir(directory) if n.endswith(".tar") and not n.startswith("."))
    if not names:
        raise ValueError(f"caption shards folder {path!r} holds no .tar files.")
    return [os.path.join(directory, n) for n in names]


def _scan_shards(paths: List[str]) -> Captioned:
    """The samples of shards given by absolute path, in order; files are named `<shard path>/<member>` relative
    to the shards' common folder."""
    directory = os.path.commonpath([os.path.dirname(p) for p in paths])
    names = [os.path.relpath(p, directory) for p in paths]
    files, captions, sizes, mtimes, shards = [], [], [], [], {}
    for shard_name in names:
        shard = os.path.join(directory, shard_name)
        mtime = os.stat(shard).st_mtime_ns
        for key, image, caption in _samples(shard):
            rel = f"{shard_name}/{image.name}"
            files.append(rel)
            captions.append(caption)
            sizes.append(image.size)
            mtimes.append(mtime)
            shards[rel] = (shard, image.offset_data, image.size)
    return Captioned(folder.FolderSplit(directory, (), files, [], sizes, mtimes), captions, shards)


def _samples(shard: str) -> List[tuple]:
    """(key, image member, caption) of each sample of a webdataset shard, in the shard's order."""
    try:
        archive = tarfile.open(shard, "r:")
    except tarfile.TarError as e:
        raise ValueError(f"caption shard {shard!r} is not an uncompressed tar file: {e}") from e
    with archive:
        groups: Dict[str, dict] = {}
        for member in archive:
            if not member.isfile():
                continue
            head, tail = os.path.split(member.name)
            if tail.startswith("."):
                continue
            stem, _, ext = tail.partition(".")
            key, ext = (f"{head}/{stem}" if head else stem), "." + ext.lower()
            group = groups.setdefault(key, {})
            where = f"caption shard {shard!r}, sample {key!r}"
            if ext in UNREADABLE:
                raise ValueError(
                    f"{where}: {member.name!r} is WebP, which TensorFlow's decoder does not read; write JPEGs "
                    "(img2dataset --encode_format=jpg)."
                )
            if ext in SHARD_IMAGES:
                if "image" in group:
                    raise ValueError(f"{where} holds two images ({group['image'].name!r}, {member.name!r}).")
                group["image"] = member
            elif ext == SHARD_CAPTION:
                try:
                    group["caption"] = archive.extractfile(member).read().decode("utf-8")
                except UnicodeDecodeError as e:
                    raise ValueError(f"{where}: caption {member.name!r} is not UTF-8 ({e}).") from e
        samples = []
        for key, group in groups.items():
            if "image" not in group or "caption" not in group:
                missing = "image" if "image" not in group else "caption (.txt)"
                raise ValueError(f"caption shard {shard!r}, sample {key!r}: no {missing}.")
            samples.append((key, group["image"], group["caption"]))
    if not samples:
        raise ValueError(f"caption shard {shard!r} holds no samples (an image and a .txt caption per key).")
    return samples


def member_reader(captioned: Captioned):
    """path -> uint8 image for the split's images: files decoded as image folders' are (`folder.decode`); shard
    members read from their shard by offset, then decoded the same way."""
    if captioned.shards is None:
        return folder.decode
    members = {os.path.join(captioned.split.directory, k): v for k, v in captioned.shards.items()}

    def read(path) -> bytes:
        shard, offset, size = members[path.decode() if isinstance(path, bytes) else str(path)]
        with open(shard, "rb") as f:
            f.seek(offset)
            return f.read(size)

    def decode(path):
        contents = tf.numpy_function(read, [path], tf.string, stateful=False)
        return folder.decode_bytes(tf.reshape(contents, []))

    return decode


def split_rows(captioned: Captioned, split: str, name: str, slicer) -> np.ndarray:
    """The rows of `split` ("train", or a slice of it) over the fixed shuffle of the pairs."""
    n = len(captioned.captions)
    order = folder.order(n)
    return np.asarray([int(order[k]) for _, k in slicer({"train": n}, split, name, "caption dataset")], dtype="int64")
