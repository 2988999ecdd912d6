"""Text embeddings of a whole file of texts with an image-text model's text tower: the batch-inference command's
`--texts` mode, for a search index of captions or a zero-shot label bank too large to embed at once.

    python -m keras_vit.inference captions.txt --texts --weights=hf-hub:timm/ViT-B-16-SigLIP --output=index

Each line of the UTF-8 file is one text (an empty line is an empty text; a final line break ends the last line,
`\\r\\n` line ends are read as `\\n`). The output is the image mode's (`keras_vit.analysis.shards`): shards of
`--shard_size` texts, each written whole with its `text` column and `embedding` (the text tower's projected
features, what `model.encode_text(ids, normalize=False)` gives; `--l2_normalize` for unit vectors), and a manifest
that records every setting and vouches for each shard by size and SHA-256. A killed run started again continues
at its first unrecorded shard and ends with the files an uninterrupted run writes; the texts themselves are vouched
for by the SHA-256 of their content, so a run over other texts, weights or settings in the same `--output` is
refused by name.
"""

from __future__ import annotations

import hashlib
import os
from typing import List, NamedTuple, Optional, Sequence, Union

import numpy as np

from keras_vit.analysis import shards
from keras_vit.utils.progress import Progress

TASK = "text"


def read_texts(path: str) -> List[str]:
    """The texts of a UTF-8 file, one per line (a byte-order mark and `\\r` before each line break dropped)."""
    with open(path, "rb") as f:
        data = f.read()
    try:
        content = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"{path!r} is not UTF-8 text (byte {e.start} of {len(data)}): save it as UTF-8.") from None
    lines = content.removeprefix("\ufeff").split("\n")
    if lines[-1] == "":
        lines.pop()
    lines = [line.removesuffix("\r") for line in lines]
    if not lines:
        raise ValueError(f"{path!r} holds no texts.")
    return lines


class TextSource(NamedTuple):
    """Texts to embed and where they come from (a file's absolute path, or "<list>")."""

    location: str
    texts: List[str]


def open_texts(texts: Union[str, os.PathLike, Sequence[str], TextSource]) -> TextSource:
    """The texts of a file (one per line, `read_texts`) or of a list, checked: strings without line breaks (the
    output's `.npy` listing and the file form hold one text per line)."""
    if isinstance(texts, TextSource):
        return texts
    if isinstance(texts, (str, os.PathLike)):
        path = os.fspath(texts)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{path!r} is not a file of texts (one per line).")
        return TextSource(os.path.abspath(path), read_texts(path))
    texts = list(texts)
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"text {i} is a {type(text).__name__}, not a str.")
        if "\n" in text or "\r" in text:
            raise ValueError(f"text {i} holds a line break: one text is one line ({text[:40]!r}).")
    if not texts:
        raise ValueError("no texts to embed.")
    return TextSource("<list>", texts)


def texts_digest(texts: Sequence[str]) -> str:
    """SHA-256 of the texts, each with its length: which texts an output was made from."""
    digest = hashlib.sha256()
    for text in texts:
        data = text.encode("utf-8", "surrogatepass")
        digest.update(f"{len(data)}:".encode() + data)
    return digest.hexdigest()


def run_text_inference(
    model,
    texts: Union[str, os.PathLike, Sequence[str], TextSource],
    output: str,
    *,
    fmt: str = "parquet",
    batch_size: int = 256,
    shard_size: Optional[int] = None,
    dtype: str = "float32",
    l2_normalize: bool = False,
    weights: str = "",
    progress: bool = True,
) -> dict:
    """Embeds every text with `model`'s text tower and writes the results to the folder `output`.

    Args:
        model: a `keras_vit.ImageTextModel` whose `text_preprocessor()` knows its tokenizer.
        texts: a UTF-8 file of one text per line, a list of texts, or the `TextSource` `open_texts` made.
        output: the folder for the shards and `manifest.json`; an earlier run's there is continued.
        fmt: "parquet", "npy" or "csv".
        batch_size / shard_size: texts per model call / per output file (default 10,000).
        dtype: "float32" or "float16" for the embeddings; `l2_normalize` scales each to unit length.
        weights: what the model was loaded from, recorded in the manifest.
    Returns:
        the manifest (`settings`, `shards`, `complete`).
    """
    from keras_vit.vit.image_text import ImageTextModel

    if not isinstance(model, ImageTextModel):
        raise TypeError(
            f"text embeddings need an image-text model (keras_vit.load_image_text); got {type(model).__name__}."
        )
    shards.check_settings(dtype, batch_size, shard_size)
    shards.check_format(fmt, "features", False)
    location, texts = open_texts(texts)
    tokenizer = model.text_preprocessor()  # a model without a tokenizer is refused before anything is written
    shard_size = shard_size or 10_000
    settings = dict(
        shards.run_settings(TASK, fmt, dtype, l2_normalize, shard_size, weights, model),
        context_length=int(tokenizer.context_length),
        source=dict(kind="texts", location=location, texts=len(texts), sha256=texts_digest(texts)),
    )
    manifest = shards.open_output(output, settings)
    start = len(manifest["shards"]) * shard_size
    meter = Progress(
        f"text embeddings of {location}",
        len(texts),
        unit="texts",
        done=start,
        log=None if progress else (lambda line: None),
    )
    for first in range(start, len(texts), shard_size):
        last = min(first + shard_size, len(texts))
        chunk, outputs = texts[first:last], []
        for i in range(0, len(chunk), batch_size):
            ids = tokenizer(chunk[i : i + batch_size])
            outputs.append(np.asarray(model.text_model.predict(ids, batch_size=len(ids), verbose=0), "float32"))
            meter.update(len(ids))
        values = shards.embedding_columns(np.concatenate(outputs), dtype, l2_normalize)
        shards.add_shard(
            output, manifest, fmt, first, dict(texts=last - first), chunk, values, key=shards.row_key(TASK)
        )
    meter.close()
    return shards.complete(output, manifest)
