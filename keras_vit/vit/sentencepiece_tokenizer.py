"""A SentencePiece vocabulary (`spiece.model`) applied as `transformers`' `SiglipTokenizer` applies it: the first
SigLIP's repositories (`google/siglip-*`) ship this file and no `tokenizer.json`.

What `SiglipTokenizer` does to one text, in order (transformers 5; facts of its tokenizer, not of SentencePiece):
- "▁" (U+2581, SentencePiece's word marker) in the text becomes a space, and one "▁" is put in front;
- the text is split at the special tokens written in it (`</s>`, `<unk>`, the pad token and the repository's added
  tokens; at each position the longest), which become their ids; a neighbour's whitespace is stripped next to a
  token whose `lstrip` / `rstrip` is set;
- every other piece is canonicalised as big_vision's prompt engineering does: lower-cased (`do_lower_case`, on by
  default), ASCII punctuation removed, runs of whitespace made one space, the ends stripped; then encoded by the
  SentencePiece model after the unknown token's text, whose pieces are then dropped (so that the model's own
  leading-space rule does not apply);
- a leading lone "▁" in front of a special token is dropped;
- the ids are cut to leave room for the end-of-text token, which is appended unless the ids already end with it,
  and padded on the right with the pad token (`</s>` by default) to the context length, as `transformers` does with
  `padding="max_length", truncation=True`.

Settings the repository's `tokenizer_config.json` does not state take `SiglipTokenizer`'s own defaults (end of text
`</s>`, unknown `<unk>`, pad `</s>`, `do_lower_case` true, `legacy` true, special tokens stripping their
neighbours' whitespace on both sides). The model runs in the `sentencepiece` library; neither `transformers` nor
torch is needed.
"""

from __future__ import annotations

import re
import string
from typing import Dict, Optional, Sequence, Union

import numpy as np

from keras_vit.vit.hub_tokenizer import CONFIG_FILE, context, repository_files, text_list, token_name

MODEL_FILE = "spiece.model"
WORD_MARKER = "\u2581"
_NO_PUNCTUATION = str.maketrans("", "", string.punctuation)
# SiglipTokenizer's defaults for what its tokenizer_config.json leaves out
_DEFAULTS = dict(eos_token="</s>", unk_token="<unk>", pad_token="</s>", do_lower_case=True, legacy=True)


def canonicalize(text: str, lower: bool = True) -> str:
    """big_vision's prompt canonicalisation as `SiglipTokenizer` applies it: lower case (when `lower`), ASCII
    punctuation removed, whitespace runs as one space, the ends stripped."""
    text = text.lower() if lower else text
    return re.sub(r"\s+", " ", text.translate(_NO_PUNCTUATION)).strip()


class SentencePieceTokenizer:
    """Texts -> int32 ids (texts, context_length) with a repository's SentencePiece `spiece.model`.

    Args:
      path: the repository folder (holding `spiece.model` and, usually, `tokenizer_config.json`) or the model file.
      context_length: ids per text.
    """

    def __init__(self, path, context_length: int):
        from keras_vit.utils.extras import require

        require(["sentencepiece"], "text", "a SentencePiece vocabulary (keras_vit.SentencePieceTokenizer)")
        import sentencepiece

        files = repository_files(path, MODEL_FILE)
        file, folder, config = files
        settings = {k: token_name(config.get(k, v)) for k, v in _DEFAULTS.items()}
        if config.get("sp_model_kwargs"):  # sampling or other encoder options: ids that vary from call to call
            raise ValueError(
                f"{folder!r}: {CONFIG_FILE} sets sp_model_kwargs={config['sp_model_kwargs']!r}, which keras_vit "
                "does not apply."
            )
        processor = sentencepiece.SentencePieceProcessor()
        try:
            processor.Load(file)
        except (OSError, RuntimeError) as e:
            raise ValueError(f"{file!r} is not a SentencePiece model: {e}") from None
        if not settings["legacy"]:  # transformers' non-legacy form: the model's own leading space switched off
            from sentencepiece import sentencepiece_model_pb2

            proto = sentencepiece_model_pb2.ModelProto.FromString(processor.serialized_model_proto())
            if proto.normalizer_spec.add_dummy_prefix:
                proto.normalizer_spec.add_dummy_prefix = False
                processor.LoadFromSerializedProto(proto.SerializeToString())
        self._processor, self.lower = processor, bool(settings["do_lower_case"])
        self._special = self._special_tokens(config, settings, folder)
        names = sorted(self._special, key=len, reverse=True)
        self._split = re.compile("(" + "|".join(map(re.escape, names)) + ")")
        self.eos_id, self.pad_id = (self._special[settings[k]][0] for k in ("eos_token", "pad_token"))
        self._unk_text = settings["unk_token"]
        self._unk_pieces = len(processor.encode(self._unk_text, out_type=str))
        self.context_length = context(context_length)
        self.source_files = files.read
        self.vocab_size = max([processor.get_piece_size()] + [i + 1 for i, _, _ in self._special.values()])

    def _special_tokens(self, config: dict, settings: dict, folder: str) -> Dict[str, tuple]:
        """{text: (id, lstrip, rstrip)} of the tokens split out of a text: the file's added tokens and the named
        special ones (those not listed take SiglipTokenizer's stripping on both sides); `_named`: the special ones."""
        special, self._named = {}, set()
        for key, token in (config.get("added_tokens_decoder") or {}).items():
            if token.get("single_word"):
                raise ValueError(
                    f"{folder!r}: added token {token.get('content')!r} is single_word, which keras_vit does not apply."
                )
            special[token["content"]] = (int(key), bool(token.get("lstrip")), bool(token.get("rstrip")))
            if token.get("special"):
                self._named.add(token["content"])
        for key in ("eos_token", "unk_token", "pad_token"):
            name = settings[key]
            self._named.add(name)
            if name not in special:
                piece = self._processor.piece_to_id(name)
                if self._processor.id_to_piece(piece) != name:
                    raise ValueError(f"{folder!r}: the {key} {name!r} is not in {MODEL_FILE}'s vocabulary.")
                special[name] = (piece, True, True)
        return special

    def _pieces(self, text: str) -> list:
        """One piece of text between special tokens, canonicalised and encoded after the unknown token's text."""
        text = canonicalize(text, self.lower)
        pieces = self._processor.encode(self._unk_text + text, out_type=str)
        return pieces[self._unk_pieces :] if len(pieces) >= self._unk_pieces else pieces

    def tokens(self, text: str) -> list:
        """The text's pieces and special tokens, before ids, the end-of-text token and padding."""
        parts = self._split.split(WORD_MARKER + text.replace(WORD_MARKER, " "))
        for i, part in enumerate(parts):
            if part in self._special:
                _, lstrip, rstrip = self._special[part]
                if lstrip and i > 0:
                    parts[i - 1] = parts[i - 1].rstrip()
                if rstrip and i + 1 < len(parts):
                    parts[i + 1] = parts[i + 1].lstrip()
        out = []
        for i, part in enumerate(parts):
            if part and i % 2:  # the split's captured tokens sit at odd positions
                out.append(part)
            elif part:
                out.extend(self._pieces(part))
        if len(out) > 1 and out[0] == WORD_MARKER and out[1] in self._named:
            out = out[1:]
        return out

    def encode(self, text: str) -> list:
        """The text's ids, without the end-of-text token or padding."""
        special, processor = self._special, self._processor
        return [special[t][0] if t in special else processor.piece_to_id(t) for t in self.tokens(text)]

    def __call__(self, texts: Union[str, Sequence[str]], context_length: Optional[int] = None) -> np.ndarray:
        texts = text_list(texts)
        n = int(context_length or self.context_length)
        out = np.full((len(texts), n), self.pad_id, "int32")
        for row, text in enumerate(texts):
            ids = self.encode(text)
            if len(ids) + 1 > n:  # room for the end-of-text token
                ids = ids[: n - 1]
            if not ids or ids[-1] != self.eos_id:
                ids.append(self.eos_id)
            out[row, : len(ids)] = ids[:n]
        return out
