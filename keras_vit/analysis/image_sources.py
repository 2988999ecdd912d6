"""The images a batch-inference run reads: a folder (every image file below it), a file list (a text file of
one path per line) or a TFDS split, each an ordered listing with a fingerprint so a resumed run can tell it
is reading the same images.

Files are read as PIL reads them, as timm's `ImageDataset` does (`Image.open(...).convert("RGB")`: CMYK and
palette images converted, a GIF's first frame, EXIF orientation not applied unless asked), except images of
more than 8 bits, which `keras_vit.analysis.images.read_image` scales by their format's maximum instead of
clipping them to white. A file that cannot be read is an error for that file only (the run lists it).
Folders and lists need no TensorFlow; a TFDS split needs `tensorflow-datasets`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from typing import Iterator, List, Optional, Tuple

import numpy as np

from keras_vit.utils.listing import files_below, utf8_name

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".gif", ".bmp", ".tif", ".tiff", ".webp")
TFDS_PREFIX = "tfds:"
_EIGHT_BIT_MODES = ("1", "L", "LA", "P", "PA", "RGB", "RGBA", "RGBX", "CMYK", "YCbCr", "LAB", "HSV")


def read_pixels(path: str, exif_transpose: bool = False) -> np.ndarray:
    """An image file as (H, W, 3) pixels: uint8 for 8-bit images (PIL's RGB conversion, as timm reads them),
    float32 in [0, 255] for deeper ones. Raises OSError / ValueError naming the file when it cannot be read."""
    from PIL import Image, ImageOps, UnidentifiedImageError

    from keras_vit.analysis.images import read_image

    try:
        with Image.open(path) as image:
            if exif_transpose:
                image = ImageOps.exif_transpose(image)
            if image.mode not in _EIGHT_BIT_MODES:
                return read_image(path)
            pixels = np.asarray(image.convert("RGB"))
    except (UnidentifiedImageError, OSError, SyntaxError) as e:
        raise ValueError(f"{path!r} is not a readable image: {e}") from e
    if pixels.shape[0] == 0 or pixels.shape[1] == 0:
        raise ValueError(f"{path!r} has no pixels ({pixels.shape[1]}x{pixels.shape[0]}).")
    return pixels


@dataclasses.dataclass
class ImageSource:
    """An ordered listing of images: `names` (what the output calls each one), how to read the i-th, and a
    fingerprint of everything that changes what is read (paths, sizes, modification times)."""

    kind: str  # "folder", "list" or "tfds"
    location: str
    names: List[str]
    paths: List[str] = dataclasses.field(default_factory=list)
    fingerprint: str = ""
    tfds: Optional[Tuple[str, str, Optional[str]]] = None  # (name, split, data_dir)

    def __len__(self) -> int:
        return len(self.names)

    def describe(self) -> dict:
        return dict(kind=self.kind, location=self.location, images=len(self.names), fingerprint=self.fingerprint)


def _fingerprint(entries) -> str:
    digest = hashlib.sha256()
    for name, size, mtime in entries:
        digest.update(f"{name}\t{size}\t{mtime}\n".encode("utf-8", "surrogateescape"))
    return digest.hexdigest()


def folder_source(directory: str) -> ImageSource:
    """Every image file below `directory` (hidden entries left out, links to folders not followed), in sorted
    order of their paths relative to it."""
    if not os.path.isdir(directory):
        raise ValueError(f"{directory!r} is not a folder.")
    found = files_below(directory, keep=lambda name: name.lower().endswith(IMAGE_EXTENSIONS), name_check=utf8_name)
    if not found:
        raise ValueError(f"folder {directory!r} holds no image files ({', '.join(IMAGE_EXTENSIONS)}).")
    found.sort()
    return ImageSource(
        "folder",
        os.path.abspath(directory),
        [f[0] for f in found],
        [os.path.join(directory, f[0]) for f in found],
        _fingerprint(found),
    )


def list_source(list_file: str) -> ImageSource:
    """The image files a text file names, one per line (blank lines and `#` comments skipped; relative paths
    are relative to the list's folder), in the list's order. A missing file is listed as bad by the run."""
    with open(list_file, encoding="utf-8") as f:
        lines = [line.strip() for line in f]
    names = [line for line in lines if line and not line.startswith("#")]
    if not names:
        raise ValueError(f"file list {list_file!r} names no images.")
    base = os.path.dirname(os.path.abspath(list_file))
    paths = [n if os.path.isabs(n) else os.path.join(base, n) for n in names]
    entries = []
    for name, path in zip(names, paths):
        try:
            stat = os.stat(path)
            entries.append((name, stat.st_size, stat.st_mtime_ns))
        except OSError:
            entries.append((name, -1, -1))
    return ImageSource("list", os.path.abspath(list_file), names, paths, _fingerprint(entries))


def tfds_source(name: str, split: str, data_dir: Optional[str] = None) -> ImageSource:
    """A prepared TFDS split; its images are named `<split>/<index>`, in the split's order."""
    try:
        import tensorflow_datasets as tfds
    except ImportError:
        raise ImportError(
            "reading a TFDS split needs tensorflow and tensorflow-datasets: pip install "
            "'keras-vision-transformer[train]' (a folder or a file list needs neither)."
        ) from None
    try:
        builder = tfds.builder(name, data_dir=data_dir)
        count = builder.info.splits[split].num_examples
    except Exception as e:  # DatasetNotFoundError, unknown split, unprepared data: one line with the cause
        raise ValueError(f"cannot read TFDS {name!r} split {split!r} (data_dir={data_dir!r}): {e}") from None
    names = [f"{split}/{i}" for i in range(count)]
    key = hashlib.sha256(f"{name}\t{split}\t{count}\t{builder.info.version}".encode()).hexdigest()
    return ImageSource("tfds", f"{name}:{split}", names, [], key, (name, split, data_dir))


def open_source(spec: str, data_dir: Optional[str] = None) -> ImageSource:
    """`spec`: a folder, a text file listing images, or `tfds:<name>:<split>`."""
    if spec.startswith(TFDS_PREFIX):
        name, _, split = spec[len(TFDS_PREFIX) :].rpartition(":")
        if not name or not split:
            raise ValueError(f"{spec!r}: a TFDS source is tfds:<name>:<split>, e.g. tfds:imagenet_v2:test.")
        return tfds_source(name, split, data_dir)
    if os.path.isdir(spec):
        return folder_source(spec)
    if os.path.isfile(spec):
        if spec.lower().endswith(IMAGE_EXTENSIONS):
            raise ValueError(
                f"{spec!r} is one image: give a folder of images, or a text file listing them (or "
                "use `python -m keras_vit.predict` for a few images)."
            )
        return list_source(spec)
    raise ValueError(f"{spec!r} is neither a folder, a file list nor tfds:<name>:<split>.")


def tfds_images(source: ImageSource, start: int) -> Iterator[Tuple[int, np.ndarray]]:
    """(index, uint8 pixels) of a TFDS source from `start` on."""
    import tensorflow_datasets as tfds

    name, split, data_dir = source.tfds
    builder = tfds.builder(name, data_dir=data_dir)
    key = next((k for k, f in builder.info.features.items() if isinstance(f, tfds.features.Image)), None)
    if key is None:
        raise ValueError(f"TFDS {name!r} has no image feature.")
    ds = builder.as_dataset(split=f"{split}[{start}:]", shuffle_files=False)
    for offset, example in enumerate(tfds.as_numpy(ds)):
        pixels = example[key]
        yield start + offset, np.repeat(pixels, 3, axis=-1) if pixels.shape[-1] == 1 else pixels[..., :3]
