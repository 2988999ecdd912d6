"""Writes tests/fixtures/transformers_clip/: tiny `CLIPModel` and `SiglipModel` repositories written by `transformers` itself
(`save_pretrained`: config.json, model.safetensors; the tokenizer's and image processor's files), with images,
token ids and transformers' own outputs beside them (`reference.npz`, `tokenizer_battery.json`).

Run with transformers and torch (CPU) installed (`make bench-setup`):
    python tools/make_transformers_clip_fixtures.py

The model has random weights with every parameter perturbed (a tensor mapped to the wrong place, or a bias
dropped, changes the outputs). Its tokenizer is CLIP's byte-level BPE (`CLIPTokenizer`) over a vocabulary of the
256 byte symbols, each also as a word end, a few merges and the two special tokens, written by transformers.
Two repositories share the weights and differ in how the text is pooled, the two ways `transformers` pools a CLIP
text tower: `clip_eos` states the end-of-text token's id (pooled at its first occurrence; here it is not the
highest id), `clip_legacy_eos` states `eos_token_id: 2`, the value of configs written before transformers#24773,
for which transformers pools at the highest id instead. `siglip` has a `tokenizer.json` (SigLIP 2's form);
`siglip_spiece` is the first SigLIP's form: the same weights with a SentencePiece `spiece.model` (a unigram model
trained here, with the T5 / C4 ids SigLIP's vocabulary has: pad 0, end of text 1, unknown 2) written by
transformers' `SiglipTokenizer`, which its battery's ids come from. `siglip2_naflex` is a `Siglip2Model` with a
NaFlex image tower (`siglip2_naflex()`).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile

import numpy as np
import torch
import transformers
from transformers import (
    CLIPConfig,
    CLIPImageProcessor,
    CLIPModel,
    CLIPTokenizer,
    PreTrainedTokenizerFast,
    SiglipConfig,
    SiglipImageProcessor,
    SiglipModel,
    SiglipTokenizer,
)

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "transformers_clip")
CONTEXT = 12
TEXTS = [
    "a photo of a cat.",
    "the cat sat on the mat",
    "Café crème brûlée",
    "I ❤️ emoji 🐱🚀",
    "&amp; &lt;b&gt; HTML stays as written",
    "中文字符 日本語",
    "It's, we're, I'VE",
    "   spaces\t\nand  tabs ",
    "",
    "a text far longer than the context length of this tiny tower, cut by the tokenizer",
    "Ünïcödé ﬁ ligature Ã© mojibake",
    "ends with its end token </s>",
    "</s> starts with it",
    "a\u2581metaspace\u2581inside",
    "UPPER case, punctuation!?;: (all of it)",
]


def _bytes_to_unicode() -> dict:
    """GPT-2 / CLIP's reversible byte -> printable character table."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def _tokenizer(folder: str) -> CLIPTokenizer:
    symbols = list(_bytes_to_unicode().values())
    merges = ["t h", "th e</w>", "c a", "ca t</w>", "o n</w>", "p h", "ph o", "pho t", "phot o</w>"]
    # the special tokens first: the end-of-text id is not the highest, so the two poolings differ
    vocab = ["<|startoftext|>", "<|endoftext|>"] + symbols + [s + "</w>" for s in symbols]
    vocab += [m.replace(" ", "") for m in merges]
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "vocab.json"), "w") as f:
            json.dump({t: i for i, t in enumerate(vocab)}, f)
        with open(os.path.join(tmp, "merges.txt"), "w") as f:
            f.write("#version: 0.2\n" + "\n".join(merges) + "\n")
        tokenizer = CLIPTokenizer(os.path.join(tmp, "vocab.json"), os.path.join(tmp, "merges.txt"))
        tokenizer.model_max_length = CONTEXT
        tokenizer.save_pretrained(folder)
    return CLIPTokenizer.from_pretrained(folder)


def _config(vocab_size: int, eos_token_id: int) -> CLIPConfig:
    return CLIPConfig(
        projection_dim=24,
        text_config=dict(
            vocab_size=vocab_size,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=2,
            max_position_embeddings=CONTEXT,
            hidden_act="quick_gelu",
            bos_token_id=0,
            eos_token_id=eos_token_id,
            pad_token_id=1,
        ),
        vision_config=dict(
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=2,
            image_size=32,
            patch_size=8,
            hidden_act="quick_gelu",
        ),
    )


def _siglip_tokenizer(folder: str) -> PreTrainedTokenizerFast:
    from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers

    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
    trainer = trainers.BpeTrainer(vocab_size=90, special_tokens=["<pad>", "</s>", "<unk>"])
    tokenizer.train_from_iterator(TEXTS * 20 + ["a photo of a dog", "two cats on a sofa"] * 20, trainer)
    tokenizer.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 1)])
    wrapped = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        pad_token="<pad>",
        eos_token="</s>",
        unk_token="<unk>",
        model_max_length=SIGLIP_CONTEXT,
    )
    wrapped.save_pretrained(folder)
    return PreTrainedTokenizerFast.from_pretrained(folder)


SIGLIP_CONTEXT = 10


TINY_VISION = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2)


def _siglip_text_config(tokenizer) -> dict:
    """The tiny SigLIP text tower of `siglip` and `siglip2_naflex`, over `tokenizer`'s vocabulary."""
    return dict(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        max_position_embeddings=SIGLIP_CONTEXT,
    )


def _siglip(images) -> None:
    folder = os.path.join(OUT, "siglip")
    tokenizer = _siglip_tokenizer(folder)
    config = SiglipConfig(
        text_config=_siglip_text_config(tokenizer),
        vision_config=dict(TINY_VISION, image_size=32, patch_size=8),
    )
    model = SiglipModel(config).eval()
    _perturb(model)
    model.save_pretrained(folder)
    SiglipImageProcessor(size={"height": 32, "width": 32}).save_pretrained(folder)
    _write_reference(folder, model, tokenizer, images, SIGLIP_CONTEXT)


def _perturb(model) -> None:
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)


def _write_reference(folder: str, model, tokenizer, images, context: int) -> None:
    """transformers' outputs on the images and four texts (`reference.npz`), and its tokenizer's ids for every text
    of the battery (`tokenizer_battery.json`), padded and cut to `context` as its processors do."""
    batch = tokenizer(TEXTS[:4], padding="max_length", max_length=context, truncation=True, return_tensors="pt")
    with torch.no_grad():
        out = model(input_ids=batch["input_ids"], pixel_values=torch.from_numpy(images))
    np.savez(
        os.path.join(folder, "reference.npz"),
        images=images.transpose(0, 2, 3, 1),
        token_ids=batch["input_ids"].numpy().astype("int32"),
        image_embeds=out.image_embeds.numpy(),
        text_embeds=out.text_embeds.numpy(),
        logits_per_image=out.logits_per_image.numpy(),
    )
    ids = tokenizer(TEXTS, padding="max_length", max_length=context, truncation=True)["input_ids"]
    with open(os.path.join(folder, "tokenizer_battery.json"), "w") as f:
        json.dump({"transformers_version": transformers.__version__, "texts": TEXTS, "ids": ids}, f, indent=0)


def _siglip_spiece(images) -> None:
    """`siglip`'s model with a SentencePiece vocabulary of its size, as the first SigLIP's repositories ship."""
    import sentencepiece

    folder = os.path.join(OUT, "siglip_spiece")
    os.makedirs(folder)
    model = SiglipModel.from_pretrained(os.path.join(OUT, "siglip")).eval()
    with tempfile.TemporaryDirectory() as tmp:
        corpus = os.path.join(tmp, "corpus.txt")
        with open(corpus, "w") as f:
            f.write("\n".join((TEXTS + ["a photo of a dog", "two cats on a sofa"]) * 20))
        sentencepiece.SentencePieceTrainer.train(
            input=corpus,
            model_prefix=os.path.join(tmp, "spiece"),
            model_type="unigram",
            vocab_size=model.config.text_config.vocab_size,
            pad_id=0,
            eos_id=1,
            unk_id=2,
            bos_id=-1,
            hard_vocab_limit=False,
            character_coverage=0.98,  # some characters of the battery stay unknown
            minloglevel=2,
        )
        SiglipTokenizer(os.path.join(tmp, "spiece.model"), model_max_length=SIGLIP_CONTEXT).save_pretrained(folder)
    tokenizer = SiglipTokenizer.from_pretrained(folder)
    assert len(tokenizer) <= model.config.text_config.vocab_size, len(tokenizer)
    model.save_pretrained(folder)
    SiglipImageProcessor(size={"height": 32, "width": 32}).save_pretrained(folder)
    _write_reference(folder, model, tokenizer, images, SIGLIP_CONTEXT)
    # the battery at SigLIP's own context (64: nothing cut), and with the settings a tokenizer_config.json may change
    battery_file = os.path.join(folder, "tokenizer_battery.json")
    with open(battery_file) as f:
        battery = json.load(f)
    for key, settings in (
        ("ids_64", {}),
        ("ids_64_not_legacy", {"legacy": False}),
        ("ids_64_cased", {"do_lower_case": False}),
    ):
        variant = SiglipTokenizer.from_pretrained(folder, **settings)
        battery[key] = variant(TEXTS, padding="max_length", max_length=64, truncation=True)["input_ids"]
    with open(battery_file, "w") as f:
        json.dump(battery, f, indent=0)


def main() -> None:
    torch.manual_seed(0)
    shutil.rmtree(OUT, ignore_errors=True)
    os.makedirs(OUT)
    rng = np.random.default_rng(0)
    images = rng.uniform(-2, 2, (3, 3, 32, 32)).astype("float32")  # what the image processor gives (NCHW)
    state = None
    for name, legacy in (("clip_eos", False), ("clip_legacy_eos", True)):
        folder = os.path.join(OUT, name)
        tokenizer = _tokenizer(folder)
        eos = tokenizer.convert_tokens_to_ids("<|endoftext|>")
        model = CLIPModel(_config(len(tokenizer), 2 if legacy else eos)).eval()
        if state is None:
            _perturb(model)
            state = model.state_dict()
        model.load_state_dict(state)
        model.save_pretrained(folder)
        CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}).save_pretrained(folder)
        _write_reference(folder, model, tokenizer, images, CONTEXT)
    _siglip(images)
    _siglip_spiece(images)
    print("wrote", OUT)


def siglip2_naflex() -> None:
    """`siglip2_naflex/`: a tiny `Siglip2Model` with a NaFlex image tower (a 4 x 4 position grid resized to each
    image's patch grid, at most 16 patches of 4 pixels), `siglip`'s kind of vocabulary, and its
    `Siglip2ImageProcessor`. `reference.npz`: three photos of other sizes and aspect ratios (from scikit-image), what
    the processor makes of them (`pixel_values`, `pixel_attention_mask`, `spatial_shapes`) and the model's outputs on
    that batch. Written alone (`python tools/make_transformers_clip_fixtures.py siglip2_naflex`): the other folders
    keep their files."""
    from PIL import Image
    from skimage import data
    from transformers import Siglip2Config, Siglip2ImageProcessor, Siglip2Model

    torch.manual_seed(2)
    folder = os.path.join(OUT, "siglip2_naflex")
    shutil.rmtree(folder, ignore_errors=True)
    tokenizer = _siglip_tokenizer(folder)
    config = Siglip2Config(
        text_config=_siglip_text_config(tokenizer),
        vision_config=dict(TINY_VISION, num_patches=16, patch_size=4),
    )
    model = Siglip2Model(config).eval()
    _perturb(model)
    model.save_pretrained(folder)
    processor = Siglip2ImageProcessor(patch_size=4, max_num_patches=16)
    processor.save_pretrained(folder)
    photos = [
        np.asarray(Image.fromarray(data.chelsea()).resize((36, 20), Image.BICUBIC)),  # wider than high
        np.asarray(Image.fromarray(data.astronaut()).resize((24, 40), Image.BICUBIC)),  # higher than wide
        np.asarray(Image.fromarray(data.coffee()).resize((9, 9), Image.BICUBIC)),  # smaller than the budget
    ]
    batch = processor(images=[Image.fromarray(p) for p in photos], return_tensors="pt")
    ids = tokenizer(TEXTS[:4], padding="max_length", max_length=SIGLIP_CONTEXT, truncation=True, return_tensors="pt")
    with torch.no_grad():
        out = model(input_ids=ids["input_ids"], **batch)
    np.savez(
        os.path.join(folder, "reference.npz"),
        **{f"photo_{i}": p for i, p in enumerate(photos)},
        pixel_values=batch["pixel_values"].numpy(),
        pixel_attention_mask=batch["pixel_attention_mask"].numpy(),
        spatial_shapes=batch["spatial_shapes"].numpy(),
        token_ids=ids["input_ids"].numpy().astype("int32"),
        image_embeds=out.image_embeds.numpy(),
        text_embeds=out.text_embeds.numpy(),
        logits_per_image=out.logits_per_image.numpy(),
        transformers_version=np.array(transformers.__version__),
    )


if __name__ == "__main__":
    import sys

    if sys.argv[1:] == ["siglip2_naflex"]:
        siglip2_naflex()
        sys.exit()
    main()
    siglip2_naflex()
