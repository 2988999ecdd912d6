"""`keras_vit.ClipTokenizer` gives open_clip's token ids: a battery of texts (accents, emoji, HTML entities,
mojibake, ligatures, CJK, contractions in capitals, a text longer than the context, the empty text) tokenized by
open_clip 3.3 itself (tests/fixtures/open_clip/tokenizer_battery.json, tools/make_open_clip_fixtures.py), for each
of its cleaning modes, at CLIP's context and a short one that cuts texts."""

import json
import os
import sys

import numpy as np
import pytest

import keras_vit
from conftest import ROOT

BATTERY = json.load(open(os.path.join(ROOT, "tests", "fixtures", "open_clip", "tokenizer_battery.json")))


@pytest.mark.parametrize("case", sorted(BATTERY["ids"]))
def test_ids_equal_open_clips(case):
    clean, context = case.split("/")
    ours = keras_vit.ClipTokenizer(int(context), clean=clean)(BATTERY["texts"])
    assert ours.dtype == np.int32 and ours.shape == (len(BATTERY["texts"]), int(context))
    for text, row, want in zip(BATTERY["texts"], ours, BATTERY["ids"][case]):
        assert [int(i) for i in row if i] == want, text


def test_the_frame_padding_cut_and_round_trip():
    tok = keras_vit.ClipTokenizer(8)
    assert (tok.start_id, tok.end_id, tok.vocab_size) == (49406, 49407, 49408)
    empty = tok("")[0]
    assert list(empty[:3]) == [49406, 49407, 0] and not empty[2:].any()
    cut = tok("one two three four five six seven eight nine")[0]
    assert cut[0] == tok.start_id and cut[-1] == tok.end_id and cut.argmax() == 7  # CLIP pools the highest id
    assert tok.decode(tok("A Photo of a CAT!")[0]) == "a photo of a cat !"
    with pytest.raises(TypeError, match="a text must be a str, got int"):
        tok([3])
    with pytest.raises(ValueError, match="clean='upper'"):
        keras_vit.ClipTokenizer(clean="upper")


HUB = json.load(open(os.path.join(ROOT, "tests", "fixtures", "open_clip", "hub_tokenizer_battery.json")))


@pytest.mark.parametrize("case", sorted(HUB["ids"]))
def test_a_repositorys_tokenizer_json_gives_open_clips_ids(case):
    """open_clip's `HFTokenizer` (transformers' fast tokenizer) on a tiny trained `tokenizer.json`."""
    clean, context = case.split("/")
    folder = os.path.join(ROOT, "tests", "fixtures", "open_clip", "hub_tokenizer")
    ours = keras_vit.HubTokenizer(folder, int(context), clean=clean)(HUB["texts"])
    assert ours.tolist() == HUB["ids"][case]


def test_a_hub_tokenizer_without_a_pad_token_is_refused(tmp_path):
    folder = os.path.join(ROOT, "tests", "fixtures", "open_clip", "hub_tokenizer")
    (tmp_path / "tokenizer.json").write_bytes(open(os.path.join(folder, "tokenizer.json"), "rb").read())
    (tmp_path / "tokenizer_config.json").write_text("{}")
    with pytest.raises(ValueError, match="names no pad_token"):
        keras_vit.HubTokenizer(tmp_path, 8)


def test_without_the_text_extra_the_tokenizers_name_it(monkeypatch):
    from keras_vit.vit import clip_tokenizer

    clip_tokenizer._bpe.cache_clear()
    monkeypatch.setitem(sys.modules, "tokenizers", None)  # an install without it
    with pytest.raises(ImportError, match=r"needs tokenizers: pip install 'keras-vision-transformer\[text\]'"):
        keras_vit.ClipTokenizer()
    with pytest.raises(ImportError, match=r"\[text\]"):
        keras_vit.HubTokenizer(os.path.join(ROOT, "tests", "fixtures", "open_clip", "hub_tokenizer"), 8)
    clip_tokenizer._bpe.cache_clear()
