"""The tokenizer a folder's files name, chosen by the files and not by the model class: a Hugging Face
`tokenizer.json` (`HubTokenizer`) first, else a SentencePiece `spiece.model` (`SentencePieceTokenizer`, the first
SigLIP's vocabulary). `transformers`' fixed-size SigLIP 2 repositories are `SiglipModel`s with a Gemma
`tokenizer.json`, so the class would pick the wrong one."""

from __future__ import annotations

import os
from typing import Optional

from keras_vit.vit.hub_tokenizer import TOKENIZER_FILE, HubTokenizer
from keras_vit.vit.sentencepiece_tokenizer import MODEL_FILE, SentencePieceTokenizer

FILES = (TOKENIZER_FILE, MODEL_FILE)


def tokenizer_in(folder: str, context_length: int, clean: str = "whitespace") -> Optional[object]:
    """`folder`'s tokenizer at `context_length` (`clean`: a `tokenizer.json`'s cleaning, `HubTokenizer`'s), or
    None when it holds neither file."""
    if os.path.isfile(os.path.join(folder, TOKENIZER_FILE)):
        return HubTokenizer(folder, context_length, clean=clean)
    if os.path.isfile(os.path.join(folder, MODEL_FILE)):
        return SentencePieceTokenizer(folder, context_length)
    return None
