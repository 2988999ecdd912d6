"""CLIP's tokenizer as open_clip applies it: OpenAI's byte-level BPE (49408 ids) over cleaned text, each text
framed by `<start_of_text>` / `<end_of_text>` and padded with zeros to the context length.

The BPE itself runs in Hugging Face `tokenizers` (the library made for it); the vocabulary is open_clip's
`bpe_simple_vocab_16e6.txt.gz` (OpenAI's, MIT), shipped in `keras_vit/data/`. What open_clip's `SimpleTokenizer`
does around the BPE is reproduced from its definition: the text cleaned (`ftfy.fix_text`, HTML entities unescaped
twice, whitespace runs collapsed, then lower-cased for "lower", punctuation removed as well for "canonicalize"),
split by CLIP's pattern (contractions, letter runs, single digits, other non-space runs; case-insensitive), each
piece's UTF-8 bytes mapped to printable characters and merged by BPE with `</w>` ending a word. A text longer
than the context is cut and its last id replaced by `<end_of_text>`, so the pooled token is always there.
"""

from __future__ import annotations

import functools
import gzip
import html
import os
import string
from typing import List, Optional, Sequence, Union

import numpy as np

CLEANERS = ("lower", "whitespace", "canonicalize", "none")
VOCABULARY = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data", "bpe_simple_vocab_16e6.txt.gz")
# CLIP's pre-tokenization pattern (open_clip's `SimpleTokenizer.pat`, compiled there with IGNORECASE)
PATTERN = r"""(?i)'s|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|[^\s\p{L}\p{N}]+"""
SPECIAL_TOKENS = ("<start_of_text>", "<end_of_text>")


# the bytes in the order `byte_characters` lists their characters
_PRINTABLE = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
_BYTE_ORDER = _PRINTABLE + [b for b in range(256) if b not in _PRINTABLE]


def byte_characters() -> List[str]:
    """The printable characters standing for the 256 bytes (GPT-2's byte-level map, which CLIP's BPE uses), in
    the vocabulary's order (`_BYTE_ORDER`): the bytes that are printable Latin-1 characters as themselves, then
    every other byte, in byte order, as chr(256 + k)."""
    return [chr(b) for b in _PRINTABLE] + [chr(256 + k) for k in range(256 - len(_PRINTABLE))]


@functools.lru_cache(maxsize=2)
def _bpe(path: str):
    """A `tokenizers.Tokenizer` for CLIP's BPE from the vocabulary file (read once per process)."""
    from keras_vit.utils.extras import require

    require(["tokenizers", "ftfy"], "text", "CLIP's tokenizer (keras_vit.ClipTokenizer)")
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers

    with gzip.open(path) as f:
        lines = f.read().decode("utf-8").split("\n")
    merges = [tuple(line.split()) for line in lines[1 : 49152 - 256 - 2 + 1]]  # open_clip's slice of the file
    byte_chars = byte_characters()
    vocab = byte_chars + [c + "</w>" for c in byte_chars] + ["".join(m) for m in merges] + list(SPECIAL_TOKENS)
    bpe = models.BPE(
        vocab={token: i for i, token in enumerate(vocab)},
        merges=merges,
        end_of_word_suffix="</w>",
        continuing_subword_prefix="",
    )
    tokenizer = Tokenizer(bpe)
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(PATTERN), behavior="removed", invert=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tokenizer.add_special_tokens(list(SPECIAL_TOKENS))
    return tokenizer, len(vocab)


def _basic_clean(text: str) -> str:
    import ftfy

    return html.unescape(html.unescape(ftfy.fix_text(text))).strip()


_NO_PUNCTUATION = str.maketrans("", "", string.punctuation)


def clean(text: str, mode: str = "lower") -> str:
    """open_clip's cleaning of one text for `mode` ("lower", "whitespace", "canonicalize"); "none": the text as
    given (a `transformers` repository's tokenizer, whose own normaliser is all `transformers` applies)."""
    if mode == "none":
        return text
    text = _basic_clean(text)
    if mode == "canonicalize":  # big_vision's: underscores as spaces, punctuation removed, lower case
        text = text.replace("_", " ").translate(_NO_PUNCTUATION).lower()
    text = " ".join(text.split())
    return text.lower() if mode == "lower" else text


class ClipTokenizer:
    """Texts -> int32 token ids (texts, context_length), as open_clip's CLIP tokenizer gives them.

    Args:
      context_length: ids per text (77 for CLIP; a model's own in its config).
      clean: open_clip's cleaning, "lower" (CLIP's), "whitespace" or "canonicalize".
      vocabulary: the BPE file (default: the one shipped, OpenAI's).
    """

    def __init__(self, context_length: int = 77, clean: str = "lower", vocabulary: Optional[str] = None):
        if clean not in CLEANERS:
            raise ValueError(f"clean={clean!r}; expected one of {CLEANERS}.")
        if int(context_length) < 2:
            raise ValueError(f"context_length={context_length}: a text needs at least its two framing tokens.")
        self.context_length, self.clean = int(context_length), clean
        self._tokenizer, self.vocab_size = _bpe(os.fspath(vocabulary or VOCABULARY))
        self.start_id, self.end_id = (self._tokenizer.token_to_id(t) for t in SPECIAL_TOKENS)

    def encode(self, text: str) -> List[int]:
        """One text's BPE ids, without the framing tokens or padding."""
        if not isinstance(text, str):
            raise TypeError(f"a text must be a str, got {type(text).__name__}.")
        return self._tokenizer.encode(clean(text, self.clean), add_special_tokens=False).ids

    def __call__(self, texts: Union[str, Sequence[str]], context_length: Optional[int] = None) -> np.ndarray:
        texts = [texts] if isinstance(texts, str) else list(texts)
        n = int(context_length or self.context_length)
        out = np.zeros((len(texts), n), "int32")
        for text in texts:
            if not isinstance(text, str):
                raise TypeError(f"a text must be a str, got {type(text).__name__}.")
        cleaned = [clean(text, self.clean) for text in texts]
        encoded = self._tokenizer.encode_batch(cleaned, add_special_tokens=False)  # one call: tokenizers' threads
        for row, encoding in enumerate(encoded):
            ids = [self.start_id, *encoding.ids, self.end_id]
            if len(ids) > n:  # cut, keeping the end-of-text token last (the pooled token)
                ids = ids[:n]
                ids[-1] = self.end_id
            out[row, : len(ids)] = ids
        return out

    def decode(self, ids) -> str:
        """The text of `ids` (framing and padding dropped; words separated by single spaces)."""
        keep = [int(i) for i in np.asarray(ids).ravel() if int(i) not in (0, self.start_id, self.end_id)]
        chars = "".join(self._tokenizer.id_to_token(i) for i in keep)
        byte_of = {c: b for b, c in zip(_BYTE_ORDER, byte_characters())}
        words = chars.split("</w>")
        return " ".join(bytes(byte_of[c] for c in w).decode("utf-8", errors="replace") for w in words).strip()
