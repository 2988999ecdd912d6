"""A caption run's token ids, kept in its workdir so that a resumed run (a preempted job restarts many times) does
not tokenize every caption again: about 30,000 captions a second on one CPU core, half a minute per million at
each start.

The ids are a function of the captions and the tokenizer, so the file is named by a digest of both: the tokenizer's
settings as `recipes.contrastive` applies them (kind, cleaning, context length), the vocabulary file's bytes and
every caption, in order. Another caption, order, context length or vocabulary is another file; a file that does not
read back as int32 ids of the captions' count and the context length is ignored and written again. Written through
a temporary file and a rename (`recipes.atomic`), locally or on gs://.
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import logging
import os
from typing import Callable, Optional, Sequence

import numpy as np

FOLDER = "caption_ids"
logger = logging.getLogger("recipes")


@functools.lru_cache(maxsize=None)
def _file_digest(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def key(settings: dict, vocabulary: str, captions: Sequence[str]) -> str:
    """The digest naming the ids of `captions` under a tokenizer's `settings` and `vocabulary` file."""
    digest = hashlib.sha256(json.dumps(settings, sort_keys=True).encode())
    digest.update(_file_digest(vocabulary).encode())
    for caption in captions:
        digest.update(hashlib.sha256(caption.encode()).digest())
    return digest.hexdigest()[:32]


def cached(
    tokenize: Callable[[Sequence[str]], np.ndarray],
    captions: Sequence[str],
    settings: dict,
    vocabulary: str,
    directory: Optional[str],
) -> np.ndarray:
    """`tokenize(captions)` as int32 (captions, context length) ids, read from `directory/caption_ids/` where an
    earlier start of the run wrote them, else computed and written there (`directory` None: computed only)."""
    if not directory:
        return np.asarray(tokenize(captions), "int32")
    import tensorflow as tf

    from recipes import atomic

    path = os.path.join(directory, FOLDER, key(settings, vocabulary, captions) + ".npy")
    shape = (len(captions), int(settings["context_length"]))
    if tf.io.gfile.exists(path):
        try:
            with tf.io.gfile.GFile(path, "rb") as f:
                ids = np.load(io.BytesIO(f.read()), allow_pickle=False)
            if ids.dtype == np.int32 and ids.shape == shape:
                return ids
        except (OSError, ValueError) as e:
            logger.warning("%s could not be read (%s): tokenizing the captions again", path, e)
        else:
            logger.warning("%s holds %s %s ids, not %s int32: tokenizing again", path, ids.dtype, ids.shape, shape)
    ids = np.asarray(tokenize(captions), "int32")
    tf.io.gfile.makedirs(os.path.dirname(path))
    atomic.write_with(path, lambda local: np.save(local, ids, allow_pickle=False), suffix=".npy")
    return ids
