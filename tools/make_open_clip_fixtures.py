"""Writes tests/fixtures/open_clip/: tiny image-text models built by open_clip itself, laid out as open_clip's
hub repositories are (`open_clip_config.json` + `open_clip_model.safetensors`), with token ids, images and
open_clip's own outputs beside them (`reference.npz`).

Run with open_clip installed (`pip install --no-deps open-clip-torch ftfy regex`, torch on CPU):
    python tools/make_open_clip_fixtures.py

Each model has random weights with every parameter perturbed (so a tensor mapped to the wrong place, or a
bias dropped, changes the outputs); the configs are open_clip's CLIP text-tower kinds at a tiny size:
- `clip_tiny`: OpenAI CLIP's form (causal text tower pooled at the highest id, a projection matrix, quick GELU);
- `siglip_text_tiny`: SigLIP's text tower form (bidirectional, last-token pooling, a projection with a bias,
  tanh GELU, LayerNorm epsilon 1e-6, a logit bias), on open_clip's own small ViT image tower;
- `siglip_tiny`, `eva02_tiny`, `pe_core_tiny`, `mobileclip2_l14_tiny`: open_clip's configs of ViT-B-16-SigLIP,
  EVA02-B-16, PE-Core-B-16 and MobileCLIP2-L-14 (a timm image trunk under `visual.trunk.`; MobileCLIP2-L-14's text
  tower is bidirectional and pooled at the highest id), shrunk. open_clip passes timm no sizes (it builds the
  trunk at the architecture's full size), so the script shrinks the trunk by adding keywords to open_clip's call
  of `timm.create_model` and records them in the config as `vision_cfg.timm_model_args`, which keras_vit's
  reader applies as timm's `model_args` (open_clip itself has no such key).
"""

from __future__ import annotations

import json
import os

import numpy as np
import torch
from safetensors.torch import save_file

import open_clip
from open_clip.model import CLIP, CustomTextCLIP

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "open_clip")

VISION = dict(image_size=32, patch_size=8, width=32, layers=2, head_width=16, mlp_ratio=2.0)
TRUNK_ARGS = dict(embed_dim=32, depth=2, num_heads=2, patch_size=8, img_size=32)  # timm keywords that shrink a trunk


def _trunk(name: str, pool: str, proj) -> dict:
    cfg = dict(image_size=32, timm_model_name=name, timm_model_pretrained=False, timm_pool=pool, timm_proj=proj)
    return dict(cfg, timm_model_args=TRUNK_ARGS)


_SIGLIP_TEXT = dict(
    context_length=10,
    vocab_size=50,
    width=32,
    heads=4,
    layers=2,
    no_causal_mask=True,
    proj_bias=True,
    pool_type="last",
    norm_kwargs={"eps": 1e-6},
)
_CLIP_TEXT = dict(context_length=12, vocab_size=64, width=32, heads=2, layers=2)
CONFIGS = {
    "clip_tiny": dict(
        embed_dim=24,
        quick_gelu=True,
        vision_cfg=VISION,
        text_cfg=dict(context_length=12, vocab_size=64, width=32, heads=2, layers=2, mlp_ratio=2.0),
    ),
    "siglip_text_tiny": dict(
        embed_dim=24,
        init_logit_bias=-10.0,
        custom_text=True,
        vision_cfg=VISION,
        text_cfg=dict(
            context_length=10,
            vocab_size=50,
            width=32,
            heads=4,
            layers=2,
            mlp_ratio=3.0,
            no_causal_mask=True,
            pool_type="last",
            proj_bias=True,
            act_kwargs={"approximate": "tanh"},
            norm_kwargs={"eps": 1e-6},
        ),
    ),
    "siglip_tiny": dict(
        embed_dim=32,
        init_logit_bias=-10.0,
        custom_text=True,
        vision_cfg=_trunk("vit_base_patch16_siglip_224", "map", "none"),
        text_cfg=_SIGLIP_TEXT,
    ),
    "eva02_tiny": dict(
        embed_dim=24,
        custom_text=True,
        vision_cfg=_trunk("eva02_base_patch16_clip_224", "token", None),
        text_cfg=_CLIP_TEXT,
    ),
    "pe_core_tiny": dict(
        embed_dim=24,
        custom_text=True,
        vision_cfg=_trunk("vit_pe_core_base_patch16_224", "map", None),
        text_cfg=dict(_CLIP_TEXT, context_length=8),
    ),
    "mobileclip2_l14_tiny": dict(  # appended last: the models before it keep their random draws
        embed_dim=24,
        custom_text=True,
        vision_cfg=dict(_trunk("vit_large_patch14_clip_224", "token", None), timm_drop=0.0, timm_drop_path=0.1),
        text_cfg=dict(_CLIP_TEXT, no_causal_mask=True),
    ),
}


def build(cfg: dict):
    import open_clip.timm_model as timm_model

    kwargs = {k: v for k, v in cfg.items() if k != "custom_text"}
    vision = dict(kwargs["vision_cfg"])
    shrink = vision.pop("timm_model_args", None)
    kwargs["vision_cfg"] = vision
    create = timm_model.timm.create_model
    if shrink:  # open_clip's call of timm.create_model, with the sizes added
        timm_model.timm.create_model = lambda *a, **k: create(*a, **{**k, **shrink})
    try:
        return (CustomTextCLIP if cfg.get("custom_text") else CLIP)(**kwargs)
    finally:
        timm_model.timm.create_model = create


def main() -> None:
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    for name, cfg in CONFIGS.items():
        model = build(cfg).eval()
        with torch.no_grad():
            for p in model.parameters():  # every tensor away from its initial value (biases are zeros)
                p.add_(torch.randn_like(p) * 0.05)
            model.logit_scale.fill_(float(np.log(7.5)))
        folder = os.path.join(OUT, name)
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "open_clip_config.json"), "w") as f:
            json.dump({"model_cfg": cfg, "preprocess_cfg": {"mean": [0.5] * 3, "std": [0.5] * 3}}, f, indent=2)
        state = {k: v.contiguous() for k, v in model.state_dict().items()}
        save_file(state, os.path.join(folder, "open_clip_model.safetensors"))
        t = cfg["text_cfg"]
        ids = rng.integers(1, t["vocab_size"] - 1, (4, t["context_length"]))
        ids[1, -1] = t["vocab_size"] - 1  # the highest id last (CLIP's pooling picks its end-of-text token)
        ids[0, 5:] = 0  # a short text, padded with zeros after its highest id (CLIP's end-of-text position)
        ids[0, 4] = t["vocab_size"] - 1
        # images as both frameworks take them after preprocessing: pixels in [0, 1] normalised by mean and std 0.5
        images = rng.uniform(-1.0, 1.0, (3, 3, 32, 32)).astype("float32")
        with torch.no_grad():
            text = model.encode_text(torch.from_numpy(ids)).numpy()
            image = model.encode_image(torch.from_numpy(images)).numpy()
            image_features, text_features, scale = model(torch.from_numpy(images), torch.from_numpy(ids))[:3]
            logits = scale * image_features @ text_features.T
            if getattr(model, "logit_bias", None) is not None:
                logits = logits + model.logit_bias
        # open_clip's zero-shot classifier for three classes and its 7 simple templates, with a stand-in tokenizer
        # for the tiny vocabulary (each character's code point modulo it; the prompts' ids are saved beside)
        from open_clip.zero_shot_classifier import build_zero_shot_classifier
        from open_clip.zero_shot_metadata import SIMPLE_IMAGENET_TEMPLATES

        prompt_ids = {}

        def tokenizer(texts):
            rows = []
            for text in texts:
                ids = [1 + ord(ch) % (t["vocab_size"] - 2) for ch in text][: t["context_length"] - 1]
                ids = ids + [t["vocab_size"] - 1] + [0] * (t["context_length"] - 1 - len(ids))
                prompt_ids[text] = ids
                rows.append(ids)
            return torch.tensor(rows)

        classes = ["cat", "dog", "a red car"]
        with torch.no_grad():
            zero_shot = build_zero_shot_classifier(model, tokenizer, classes, SIMPLE_IMAGENET_TEMPLATES, 2).numpy()
        np.savez(
            os.path.join(folder, "reference.npz"),
            zero_shot_classes=np.array(classes),
            zero_shot_weights=zero_shot,
            prompt_texts=np.array(list(prompt_ids)),
            prompt_ids=np.array(list(prompt_ids.values())),
            ids=ids,
            images_nchw=images,
            text_features=text,
            image_features=image,
            logits=logits.numpy(),
            open_clip_version=np.array(open_clip.__version__),
            torch_version=np.array(torch.__version__),
        )
        print(name, {k: tuple(v.shape) for k, v in state.items() if k.startswith(("text", "token", "positional"))})


# texts whose token ids open_clip's own tokenizer gives (tests/test_clip_tokenizer.py compares ours)
BATTERY = [
    "a photo of a cat.",
    "Café crème brûlée",
    "I \u2764\ufe0f emoji \U0001f431\U0001f680",
    "&amp; &lt;b&gt;bold&lt;/b&gt; &quot;q&quot; &amp;amp;",
    "mojibake: Ã©tÃ© â€œquotedâ€\x9d",
    "\ufb01ne ligatures \ufb02",
    "中文字符 日本語 한국어",
    "It's, we're, I'VE, they'LL",
    "   spaces\t\nand\u00a0nbsp  ",
    "",
    "x " * 100,
    "numbers 12345 3.14",
    "<start_of_text> literal <end_of_text>",
    "Don't STOP",
    "under_score snake_case",
    "a photo of a {}.",
]


def tokenizer_battery() -> None:
    from open_clip.tokenizer import SimpleTokenizer

    out = {"open_clip_version": open_clip.__version__, "texts": BATTERY, "ids": {}}
    for clean in ("lower", "whitespace", "canonicalize"):
        for context in (77, 8):
            ids = SimpleTokenizer(clean=clean, context_length=context)(BATTERY).numpy()
            out["ids"][f"{clean}/{context}"] = [[int(i) for i in row if i] for row in ids]  # zeros dropped
    with open(os.path.join(OUT, "tokenizer_battery.json"), "w") as f:
        json.dump(out, f, ensure_ascii=False, indent=0)


def hub_tokenizer_battery() -> None:
    """A tiny `tokenizer.json` (byte-level BPE trained here, a start and an end token added by its post-processor)
    laid out as a hub repository's tokenizer, and the ids open_clip's `HFTokenizer` (through `transformers`' fast
    tokenizer) gives for the battery, per cleaning mode, at two context lengths."""
    from open_clip.tokenizer import HFTokenizer
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    folder = os.path.join(OUT, "hub_tokenizer")
    os.makedirs(folder, exist_ok=True)
    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300,
        special_tokens=["<pad>", "<s>", "</s>", "<unk>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    corpus = BATTERY * 5 + ["a photo of a cat", "a photo of a dog", "the quick brown fox jumps over the lazy dog"] * 20
    tokenizer.train_from_iterator(corpus, trainer)
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", special_tokens=[("<s>", 1), ("</s>", 2)]
    )
    tokenizer.save(os.path.join(folder, "tokenizer.json"))
    with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
        json.dump(
            {
                "tokenizer_class": "PreTrainedTokenizerFast",
                "bos_token": "<s>",
                "eos_token": "</s>",
                "pad_token": "<pad>",
                "unk_token": "<unk>",
                "model_max_length": 16,
            },
            f,
            indent=1,
        )
    import transformers

    out = {"open_clip_version": open_clip.__version__, "transformers_version": transformers.__version__}
    out.update(texts=BATTERY, ids={})
    for clean in ("lower", "whitespace", "canonicalize"):
        for context in (16, 6):
            ids = HFTokenizer(folder, context_length=context, clean=clean)(BATTERY).numpy()
            out["ids"][f"{clean}/{context}"] = ids.tolist()
    with open(os.path.join(OUT, "hub_tokenizer_battery.json"), "w") as f:
        json.dump(out, f, ensure_ascii=False, indent=0)


def losses() -> None:
    """open_clip's ClipLoss and SigLipLoss on random normalised embeddings (tests/test_contrastive.py)."""
    from open_clip.loss import ClipLoss, SigLipLoss

    rng = np.random.default_rng(1)
    image, text = (rng.standard_normal((6, 16)).astype("float32") for _ in range(2))
    image /= np.linalg.norm(image, axis=1, keepdims=True)
    text /= np.linalg.norm(text, axis=1, keepdims=True)
    scale, bias = np.float32(np.log(10.0)), np.float32(-3.0)
    with torch.no_grad():
        args = (torch.from_numpy(image), torch.from_numpy(text), torch.tensor(scale).exp())
        clip = float(ClipLoss()(*args))
        siglip = float(SigLipLoss()(*args, torch.tensor(bias)))
    np.savez(
        os.path.join(OUT, "losses.npz"),
        image=image,
        text=text,
        logit_scale=scale,
        logit_bias=bias,
        clip_loss=clip,
        siglip_loss=siglip,
    )


def _big_vision_block(prefix: str, width: int, heads: int, mlp: int, rng, out: dict) -> None:
    """One encoder block's tensors under `prefix`, in big_vision's shapes (kernels (in, out); attention kernels
    (width, heads, head width) and (heads, head width, width))."""
    head = width // heads
    for name in ("LayerNorm_0", "LayerNorm_1"):
        out[f"{prefix}{name}/scale"] = rng.normal(1.0, 0.1, width)
        out[f"{prefix}{name}/bias"] = rng.normal(0.0, 0.1, width)
    for n in ("query", "key", "value"):
        out[f"{prefix}MultiHeadDotProductAttention_0/{n}/kernel"] = rng.normal(0.0, 0.2, (width, heads, head))
        out[f"{prefix}MultiHeadDotProductAttention_0/{n}/bias"] = rng.normal(0.0, 0.1, (heads, head))
    out[f"{prefix}MultiHeadDotProductAttention_0/out/kernel"] = rng.normal(0.0, 0.2, (heads, head, width))
    out[f"{prefix}MultiHeadDotProductAttention_0/out/bias"] = rng.normal(0.0, 0.1, width)
    out[f"{prefix}MlpBlock_0/Dense_0/kernel"] = rng.normal(0.0, 0.2, (width, mlp))
    out[f"{prefix}MlpBlock_0/Dense_0/bias"] = rng.normal(0.0, 0.1, mlp)
    out[f"{prefix}MlpBlock_0/Dense_1/kernel"] = rng.normal(0.0, 0.2, (mlp, width))
    out[f"{prefix}MlpBlock_0/Dense_1/bias"] = rng.normal(0.0, 0.1, width)


def _stacked(tree: dict, block: str, depth: int) -> dict:
    """big_vision's `scan=True` layout: `<block>_i/...` of every block as one `<block>/...` with a depth axis."""
    out = {k: v for k, v in tree.items() if f"{block}_" not in k}
    for key in [k for k in tree if f"{block}_0/" in k]:
        rest = key.split(f"{block}_0/", 1)
        out[f"{rest[0]}{block}/{rest[1]}"] = np.stack(
            [tree[key.replace(f"{block}_0/", f"{block}_{i}/")] for i in range(depth)]
        )
    return out


def big_vision_siglip() -> None:
    """`big_vision_siglip/`: a tiny SigLIP in big_vision's `.npz` layout (`img/`, `txt/`, `t`, `b`), every tensor
    drawn here in big_vision's shapes, read by open_clip's own converter (`convert.load_big_vision_weights`, which
    copies each into the model and fails on a shape it does not expect) into `siglip_tiny`'s architecture; its
    outputs beside, and the state dict it made (`open_clip_state.safetensors`). Two files of the same values:
    `plain.npz` (a block per key) and `scanned.npz` (big_vision's `scan=True` blocks stacked on a depth axis, under
    a train state's `params/`)."""
    from open_clip.convert import load_big_vision_weights

    cfg = CONFIGS["siglip_tiny"]
    model = build(cfg).eval()
    trunk, text_cfg = TRUNK_ARGS, cfg["text_cfg"]
    width, heads, depth, patch, image = (
        trunk[k] for k in ("embed_dim", "num_heads", "depth", "patch_size", "img_size")
    )
    rng = np.random.default_rng(7)
    w: dict = {}
    w["img/embedding/kernel"] = rng.normal(0.0, 0.2, (patch, patch, 3, width))
    w["img/embedding/bias"] = rng.normal(0.0, 0.1, width)
    w["img/pos_embedding"] = rng.normal(0.0, 0.2, (1, (image // patch) ** 2, width))
    for i in range(depth):
        _big_vision_block(f"img/Transformer/encoderblock_{i}/", width, heads, 4 * width, rng, w)
    w["img/Transformer/encoder_norm/scale"] = rng.normal(1.0, 0.1, width)
    w["img/Transformer/encoder_norm/bias"] = rng.normal(0.0, 0.1, width)
    w["img/MAPHead_0/probe"] = rng.normal(0.0, 0.2, (1, 1, width))
    _big_vision_block("img/MAPHead_0/", width, heads, 4 * width, rng, w)
    del w["img/MAPHead_0/LayerNorm_1/scale"], w["img/MAPHead_0/LayerNorm_1/bias"]  # the MAP head has one norm
    t_width, t_heads, t_layers = text_cfg["width"], text_cfg["heads"], text_cfg["layers"]
    w["txt/Embed_0/embedding"] = rng.normal(0.0, 0.2, (text_cfg["vocab_size"], t_width))
    w["txt/pos_embedding"] = rng.normal(0.0, 0.2, (1, text_cfg["context_length"], t_width))
    for i in range(t_layers):
        _big_vision_block(f"txt/Encoder_0/encoderblock_{i}/", t_width, t_heads, 4 * t_width, rng, w)
    w["txt/Encoder_0/encoder_norm/scale"] = rng.normal(1.0, 0.1, t_width)
    w["txt/Encoder_0/encoder_norm/bias"] = rng.normal(0.0, 0.1, t_width)
    w["txt/head/kernel"] = rng.normal(0.0, 0.2, (t_width, cfg["embed_dim"]))
    w["txt/head/bias"] = rng.normal(0.0, 0.1, cfg["embed_dim"])
    w["t"] = np.array([np.log(9.0)])
    w["b"] = np.array([-4.0])
    w = {k: np.asarray(v, "float32") for k, v in w.items()}
    folder = os.path.join(OUT, "big_vision_siglip")
    os.makedirs(folder, exist_ok=True)
    np.savez(os.path.join(folder, "plain.npz"), **w)
    scanned = _stacked(_stacked(w, "img/Transformer/encoderblock", depth), "txt/Encoder_0/encoderblock", t_layers)
    np.savez(os.path.join(folder, "scanned.npz"), **{f"params/{k}": v for k, v in scanned.items()})
    ids = rng.integers(1, text_cfg["vocab_size"], (3, text_cfg["context_length"]))
    images = rng.uniform(-1.0, 1.0, (2, 3, image, image)).astype("float32")
    outputs = []
    for name in ("plain.npz", "scanned.npz"):
        load_big_vision_weights(model, os.path.join(folder, name))
        with torch.no_grad():
            image_features, text_features, scale, bias = model(torch.from_numpy(images), torch.from_numpy(ids))[:4]
            outputs.append(
                dict(
                    image_features=model.encode_image(torch.from_numpy(images)).numpy(),
                    text_features=model.encode_text(torch.from_numpy(ids)).numpy(),
                    logits=(scale * image_features @ text_features.T + bias).numpy(),
                )
            )
    for key in outputs[0]:
        np.testing.assert_array_equal(outputs[0][key], outputs[1][key])  # one model, two layouts
    # the state open_clip's converter made: what keras_vit.save_open_clip must write for the file
    save_file(
        {k: v.contiguous() for k, v in model.state_dict().items()}, os.path.join(folder, "open_clip_state.safetensors")
    )
    np.savez(
        os.path.join(folder, "reference.npz"),
        ids=ids,
        images_nchw=images,
        open_clip_version=np.array(open_clip.__version__),
        torch_version=np.array(torch.__version__),
        **outputs[0],
    )


if __name__ == "__main__":
    import sys

    if sys.argv[1:] == ["big_vision_siglip"]:  # this fixture alone (the others keep the files they have)
        big_vision_siglip()
        sys.exit()
    main()
    tokenizer_battery()
    hub_tokenizer_battery()
    losses()
    big_vision_siglip()
