"""A repository's `tokenizer.json` applied as open_clip applies a Hugging Face tokenizer (`HFTokenizer`): the text
cleaned (open_clip's cleaning, "whitespace" by default), tokenized with the file's own normaliser, pre-tokenizer,
model and post-processor (its start / end tokens), cut to the context length (the post-processor's tokens kept)
and padded on the right with the repository's pad token, as `transformers` does with `padding="max_length",
truncation=True`. The tokenizer runs in Hugging Face `tokenizers`; neither `transformers` nor torch is needed.
"""

from __future__ import annotations

import json
import os
from typing import List, NamedTuple, Optional, Sequence, Union

import numpy as np

from keras_vit.vit.clip_tokenizer import CLEANERS, clean

TOKENIZER_FILE, CONFIG_FILE = "tokenizer.json", "tokenizer_config.json"


def token_name(value) -> Optional[str]:
    """A special token as `tokenizer_config.json` states it: a string, or an object with its "content"."""
    return value.get("content") if isinstance(value, dict) else value


class RepositoryFiles(NamedTuple):
    """A repository tokenizer's files: its vocabulary `file`, the `folder` holding it and the folder's
    `tokenizer_config.json` as a dict (empty without one)."""

    file: str
    folder: str
    config: dict

    @property
    def read(self) -> List[str]:
        """The files read: the vocabulary, and the config where there is one."""
        return [f for f in (self.file, os.path.join(self.folder, CONFIG_FILE)) if os.path.exists(f)]


def repository_files(path, vocabulary: str) -> RepositoryFiles:
    """`path` (a repository folder, or its `vocabulary` file itself) located and its `tokenizer_config.json` read;
    a missing vocabulary, a config that is not a JSON object or one asking for left padding refused by name."""
    path = os.fspath(path)
    file = os.path.join(path, vocabulary) if os.path.isdir(path) else path
    folder = os.path.dirname(file)
    if not os.path.exists(file):
        raise FileNotFoundError(f"{path!r} has no {vocabulary}.")
    config = {}
    if os.path.exists(os.path.join(folder, CONFIG_FILE)):
        with open(os.path.join(folder, CONFIG_FILE)) as f:
            config = json.load(f)
        if not isinstance(config, dict):
            raise ValueError(f"{os.path.join(folder, CONFIG_FILE)!r} is not a JSON object.")
    if config.get("padding_side", "right") != "right":
        raise ValueError(f"{folder!r}: padding_side={config['padding_side']!r}; text towers read right-padded ids.")
    return RepositoryFiles(file, folder, config)


def context(context_length) -> int:
    """The ids per text, at least one."""
    if int(context_length) < 1:
        raise ValueError(f"context_length={context_length}: at least one id per text.")
    return int(context_length)


def text_list(texts: Union[str, Sequence[str]]) -> List[str]:
    """One text or several as a list; anything but a str refused naming its type."""
    texts = [texts] if isinstance(texts, str) else list(texts)
    bad = [t for t in texts if not isinstance(t, str)]
    if bad:
        raise TypeError(f"a text must be a str, got {type(bad[0]).__name__}.")
    return texts


class HubTokenizer:
    """Texts -> int32 ids (texts, context_length) with a repository's `tokenizer.json`.

    Args:
      path: the repository folder (holding `tokenizer.json` and `tokenizer_config.json`) or the `tokenizer.json`.
      context_length: ids per text.
      clean: open_clip's cleaning before the tokenizer ("whitespace", open_clip's default for these; "lower",
        "canonicalize": SigLIP's); "none" for a `transformers` repository (the file's normaliser only).
    """

    def __init__(self, path, context_length: int, clean: str = "whitespace"):
        from keras_vit.utils.extras import require

        require(["tokenizers", "ftfy"], "text", "a repository's tokenizer (keras_vit.HubTokenizer)")
        from tokenizers import Tokenizer

        if clean not in CLEANERS:
            raise ValueError(f"clean={clean!r}; expected one of {CLEANERS}.")
        files = repository_files(path, TOKENIZER_FILE)
        file, folder, config = files
        try:
            self._tokenizer = Tokenizer.from_file(file)
        except Exception as e:  # tokenizers raises a bare Exception on a malformed file
            raise ValueError(f"{file!r} is not a tokenizer.json Hugging Face tokenizers reads: {e}") from None
        pad = token_name(config.get("pad_token"))
        if pad is None:
            raise ValueError(
                f"{folder!r}: {CONFIG_FILE} names no pad_token, and padding to the context length needs one "
                "(transformers refuses padding without it too)."
            )
        self.pad_id = self._tokenizer.token_to_id(pad)
        if self.pad_id is None:
            raise ValueError(f"{folder!r}: the pad token {pad!r} is not in {TOKENIZER_FILE}'s vocabulary.")
        self.context_length, self.clean = context(context_length), clean
        self.source_files = files.read
        self.vocab_size = self._tokenizer.get_vocab_size(with_added_tokens=True)

    def __call__(self, texts: Union[str, Sequence[str]], context_length: Optional[int] = None) -> np.ndarray:
        texts = text_list(texts)
        n = int(context_length or self.context_length)
        tokenizer = self._tokenizer
        tokenizer.enable_truncation(max_length=n)
        tokenizer.enable_padding(length=n, pad_id=self.pad_id, pad_token=tokenizer.id_to_token(self.pad_id))
        try:
            encoded = tokenizer.encode_batch([clean(t, self.clean) for t in texts])
        finally:
            tokenizer.no_truncation()
            tokenizer.no_padding()
        return np.array([e.ids for e in encoded], "int32").reshape(len(texts), n)
