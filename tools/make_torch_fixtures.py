"""Writes tests/fixtures/torch_reference/: tiny random ViTs and their logits, produced by timm and by
Hugging Face `transformers` themselves (the outside frameworks), for keras_vit's parity tests.

Run in an environment with torch, timm, transformers and safetensors (not keras_vit's test venv), one part
per process (timm needs the torchvision stand-in on the path, which `transformers` must not see):
    PYTHONPATH=tools/torchvision_stub python tools/make_torch_fixtures.py timm
    python tools/make_torch_fixtures.py transformers
Every weight is random (seeded); nothing is downloaded.
"""

import json
import os
import sys

import numpy as np
import torch

OUT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "fixtures", "torch_reference")
SIZES = dict(image=32, patch=8, width=32, depth=2, heads=2, mlp=64, classes=5)


def _randomise(module: torch.nn.Module, seed: int) -> None:
    """Every parameter drawn afresh (framework inits leave heads and biases at zero)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.2)


def _images() -> np.ndarray:
    return np.random.default_rng(0).uniform(-1, 1, (2, SIZES["image"], SIZES["image"], 3)).astype("float32")


def _run(model, images) -> np.ndarray:
    model.eval()
    with torch.no_grad():
        out = model(torch.from_numpy(images.transpose(0, 3, 1, 2).copy()))
    return (out.logits if hasattr(out, "logits") else out).numpy()


def timm_fixtures(images) -> dict:
    import timm
    from safetensors.torch import save_file
    from timm.models.vision_transformer import VisionTransformer, _load_weights

    s = SIZES
    kw = dict(
        img_size=s["image"],
        patch_size=s["patch"],
        embed_dim=s["width"],
        depth=s["depth"],
        num_heads=s["heads"],
        mlp_ratio=s["mlp"] / s["width"],
        num_classes=s["classes"],
    )
    model = VisionTransformer(**kw)
    _randomise(model, 1)
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, os.path.join(OUT, "timm_vit.safetensors"))
    np.save(os.path.join(OUT, "timm_vit_logits.npy"), _run(model, images))

    # an AugReg-layout .npz (official keys, no pre_logits) read by timm's own npz loader
    rng = np.random.default_rng(2)
    d, m, h, p, n = s["width"], s["mlp"], s["heads"], s["patch"], (s["image"] // s["patch"]) ** 2
    arrays = {
        "embedding/kernel": (p, p, 3, d),
        "embedding/bias": (d,),
        "cls": (1, 1, d),
        "Transformer/posembed_input/pos_embedding": (1, n + 1, d),
        "Transformer/encoder_norm/scale": (d,),
        "Transformer/encoder_norm/bias": (d,),
        "head/kernel": (d, s["classes"]),
        "head/bias": (s["classes"],),
    }
    for i in range(s["depth"]):
        b = f"Transformer/encoderblock_{i}/"
        for ln in ("LayerNorm_0", "LayerNorm_2"):
            arrays.update({f"{b}{ln}/scale": (d,), f"{b}{ln}/bias": (d,)})
        a = b + "MultiHeadDotProductAttention_1/"
        for part in ("query", "key", "value"):
            arrays.update({f"{a}{part}/kernel": (d, h, d // h), f"{a}{part}/bias": (h, d // h)})
        arrays.update(
            {
                f"{a}out/kernel": (h, d // h, d),
                f"{a}out/bias": (d,),
                f"{b}MlpBlock_3/Dense_0/kernel": (d, m),
                f"{b}MlpBlock_3/Dense_0/bias": (m,),
                f"{b}MlpBlock_3/Dense_1/kernel": (m, d),
                f"{b}MlpBlock_3/Dense_1/bias": (d,),
            }
        )
    params = {k: (rng.normal(size=shape) * 0.2).astype("float32") for k, shape in arrays.items()}
    path = os.path.join(OUT, "augreg_layout.npz")
    np.savez(path, **params)
    augreg = VisionTransformer(**kw)
    _load_weights(augreg, path)
    np.save(os.path.join(OUT, "augreg_layout_timm_logits.npy"), _run(augreg, images))
    hybrid_fixture(images)
    return dict(timm=timm.__version__, timm_kwargs={k: v for k, v in kw.items()})


def hybrid_fixture(images) -> None:
    """AugReg's R+Ti/16 shape of hybrid (a root-only ResNet stem, then 8x8 patches) at toy width, as an
    AugReg-layout .npz with the old (1, 1, 1, C) GroupNorm parameters, read by timm's own npz loader."""
    from timm.models.vision_transformer_hybrid import _create_vision_transformer_hybrid, _resnetv2

    s = SIZES
    model = _create_vision_transformer_hybrid(
        "vit_tiny_r_s16_p8_224",
        backbone=_resnetv2(layers=()),
        pretrained=False,
        img_size=64,
        patch_size=2,
        embed_dim=s["width"],
        depth=1,
        num_heads=s["heads"],
        mlp_ratio=s["mlp"] / s["width"],
        num_classes=s["classes"],
    )
    rng = np.random.default_rng(4)
    params = {}
    for key, value in model.state_dict().items():  # shapes only: the file is written in the official layout
        params[key] = (rng.normal(size=tuple(value.shape)) * 0.2).astype("float32")
    d, _m, h = s["width"], s["mlp"], s["heads"]
    official = {
        "conv_root/kernel": params["patch_embed.backbone.conv.weight"].transpose(2, 3, 1, 0),
        "gn_root/scale": 1 + params["patch_embed.backbone.norm.weight"].reshape(1, 1, 1, -1),
        "gn_root/bias": params["patch_embed.backbone.norm.bias"].reshape(1, 1, 1, -1),
        "embedding/kernel": params["patch_embed.proj.weight"].transpose(2, 3, 1, 0),
        "embedding/bias": params["patch_embed.proj.bias"],
        "cls": params["cls_token"],
        "Transformer/posembed_input/pos_embedding": params["pos_embed"],
        "Transformer/encoder_norm/scale": params["norm.weight"],
        "Transformer/encoder_norm/bias": params["norm.bias"],
        "head/kernel": params["head.weight"].T,
        "head/bias": params["head.bias"],
    }
    b, a = "Transformer/encoderblock_0/", "Transformer/encoderblock_0/MultiHeadDotProductAttention_1/"
    qkv_w, qkv_b = params["blocks.0.attn.qkv.weight"], params["blocks.0.attn.qkv.bias"]
    for i, part in enumerate(("query", "key", "value")):
        official[f"{a}{part}/kernel"] = qkv_w[i * d : (i + 1) * d].T.reshape(d, h, d // h)
        official[f"{a}{part}/bias"] = qkv_b[i * d : (i + 1) * d].reshape(h, d // h)
    official.update(
        {
            f"{a}out/kernel": params["blocks.0.attn.proj.weight"].T.reshape(h, d // h, d),
            f"{a}out/bias": params["blocks.0.attn.proj.bias"],
            f"{b}LayerNorm_0/scale": params["blocks.0.norm1.weight"],
            f"{b}LayerNorm_0/bias": params["blocks.0.norm1.bias"],
            f"{b}LayerNorm_2/scale": params["blocks.0.norm2.weight"],
            f"{b}LayerNorm_2/bias": params["blocks.0.norm2.bias"],
            f"{b}MlpBlock_3/Dense_0/kernel": params["blocks.0.mlp.fc1.weight"].T,
            f"{b}MlpBlock_3/Dense_0/bias": params["blocks.0.mlp.fc1.bias"],
            f"{b}MlpBlock_3/Dense_1/kernel": params["blocks.0.mlp.fc2.weight"].T,
            f"{b}MlpBlock_3/Dense_1/bias": params["blocks.0.mlp.fc2.bias"],
        }
    )
    path = os.path.join(OUT, "augreg_r_ti_layout.npz")
    np.savez(path, **{k: np.ascontiguousarray(v, dtype="float32") for k, v in official.items()})
    timm_loaded = _create_vision_transformer_hybrid(
        "vit_tiny_r_s16_p8_224",
        backbone=_resnetv2(layers=()),
        pretrained=False,
        img_size=64,
        patch_size=2,
        embed_dim=s["width"],
        depth=1,
        num_heads=s["heads"],
        mlp_ratio=s["mlp"] / s["width"],
        num_classes=s["classes"],
    )
    from timm.models.vision_transformer import _load_weights

    _load_weights(timm_loaded, path)
    x64 = np.random.default_rng(5).uniform(-1, 1, (2, 64, 64, 3)).astype("float32")
    np.save(os.path.join(OUT, "augreg_r_ti_input.npy"), x64)
    np.save(os.path.join(OUT, "augreg_r_ti_timm_logits.npy"), _run(timm_loaded, x64))


def transformers_fixtures(images) -> dict:
    import transformers
    from transformers import ViTConfig, ViTForImageClassification

    s = SIZES
    config = ViTConfig(
        hidden_size=s["width"],
        num_hidden_layers=s["depth"],
        num_attention_heads=s["heads"],
        intermediate_size=s["mlp"],
        image_size=s["image"],
        patch_size=s["patch"],
        num_labels=s["classes"],
        hidden_act="gelu",
        layer_norm_eps=1e-6,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    model = ViTForImageClassification(config)
    _randomise(model, 3)
    model.save_pretrained(os.path.join(OUT, "hf_vit"), safe_serialization=True)
    np.save(os.path.join(OUT, "hf_vit_logits.npy"), _run(model, images))
    # a headless ViTModel whose pooler (Dense + tanh on the class token) is the official representation layer
    from transformers import ViTModel

    backbone = ViTModel(config, add_pooling_layer=True)
    _randomise(backbone, 6)
    backbone.save_pretrained(os.path.join(OUT, "hf_vit_model"), safe_serialization=True)
    backbone.eval()
    with torch.no_grad():
        pooled = backbone(torch.from_numpy(images.transpose(0, 3, 1, 2).copy())).pooler_output.numpy()
    np.save(os.path.join(OUT, "hf_vit_model_pooler.npy"), pooled)
    return dict(transformers=transformers.__version__)


def main(part: str) -> None:
    os.makedirs(OUT, exist_ok=True)
    torch.manual_seed(0)
    images = _images()
    np.save(os.path.join(OUT, "input.npy"), images)
    info_path = os.path.join(OUT, "versions.json")
    info = json.load(open(info_path)) if os.path.exists(info_path) else {}
    info.update(torch=torch.__version__, sizes=SIZES)
    info.update(timm_fixtures(images) if part == "timm" else transformers_fixtures(images))
    with open(info_path, "w") as f:
        json.dump(info, f, indent=2, sort_keys=True)
    print(json.dumps(info, indent=2))


if __name__ == "__main__":
    main(sys.argv[1])
