"""Makes the timm parity fixtures in tests/fixtures/timm/ (run by hand, not in CI).

For each case: build a timm ViT (tanh GELU, as the original Flax code) with random
non-trivial weights, write them in the official .npz layout, read that file back
into a fresh timm model with timm's own npz loader (`_load_weights`), check the two
timm models agree, and store input (NHWC, [-1, 1]) + the reloaded model's logits.
The test then loads the same .npz into keras_vit and compares logits.

    PYTHONPATH=tools/torchvision_stub .venv/bin/python tools/make_timm_fixture.py [--out DIR] [--full-b16]

torch 2.13.0 CPU + timm; torchvision is replaced by tools/torchvision_stub (see its docstring).
"""

from __future__ import annotations

import argparse
import os
import sys
from functools import partial

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "torchvision_stub"))

import numpy as np  # noqa: E402
import timm  # noqa: E402
import torch  # noqa: E402
from timm.layers import StdConv2dSame  # noqa: E402
from timm.models.resnetv2 import ResNetV2  # noqa: E402
from timm.models.vision_transformer import VisionTransformer, _load_weights  # noqa: E402
from timm.models.vision_transformer_hybrid import HybridEmbed  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from keras_vit.utils import atomic  # noqa: E402


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().cpu().numpy().astype("float32")


def official_layout(model: VisionTransformer) -> dict:
    """timm parameters -> the google-research/vision_transformer .npz keys and shapes."""
    sd, out = model.state_dict(), {}
    d = model.embed_dim
    heads = model.blocks[0].attn.num_heads
    pe = "patch_embed."
    out["embedding/kernel"] = _np(sd[pe + "proj.weight"]).transpose(2, 3, 1, 0)
    out["embedding/bias"] = _np(sd[pe + "proj.bias"])
    out["cls"] = _np(sd["cls_token"])
    out["Transformer/posembed_input/pos_embedding"] = _np(sd["pos_embed"])
    for i in range(len(model.blocks)):
        b, p = f"blocks.{i}.", f"Transformer/encoderblock_{i}/"
        out[p + "LayerNorm_0/scale"], out[p + "LayerNorm_0/bias"] = (
            _np(sd[b + "norm1.weight"]),
            _np(sd[b + "norm1.bias"]),
        )
        out[p + "LayerNorm_2/scale"], out[p + "LayerNorm_2/bias"] = (
            _np(sd[b + "norm2.weight"]),
            _np(sd[b + "norm2.bias"]),
        )
        qkv_w, qkv_b = _np(sd[b + "attn.qkv.weight"]), _np(sd[b + "attn.qkv.bias"])
        for j, name in enumerate(("query", "key", "value")):
            out[f"{p}MultiHeadDotProductAttention_1/{name}/kernel"] = qkv_w[j * d : (j + 1) * d].T.reshape(d, heads, -1)
            out[f"{p}MultiHeadDotProductAttention_1/{name}/bias"] = qkv_b[j * d : (j + 1) * d].reshape(heads, -1)
        out[f"{p}MultiHeadDotProductAttention_1/out/kernel"] = _np(sd[b + "attn.proj.weight"]).T.reshape(heads, -1, d)
        out[f"{p}MultiHeadDotProductAttention_1/out/bias"] = _np(sd[b + "attn.proj.bias"])
        for j, fc in ((0, "fc1"), (1, "fc2")):
            out[f"{p}MlpBlock_3/Dense_{j}/kernel"] = _np(sd[f"{b}mlp.{fc}.weight"]).T
            out[f"{p}MlpBlock_3/Dense_{j}/bias"] = _np(sd[f"{b}mlp.{fc}.bias"])
    out["Transformer/encoder_norm/scale"], out["Transformer/encoder_norm/bias"] = (
        _np(sd["norm.weight"]),
        _np(sd["norm.bias"]),
    )
    out["head/kernel"], out["head/bias"] = _np(sd["head.weight"]).T, _np(sd["head.bias"])
    bb = pe + "backbone."
    if bb + "stem.conv.weight" in sd:
        out["conv_root/kernel"] = _np(sd[bb + "stem.conv.weight"]).transpose(2, 3, 1, 0)
        out["gn_root/scale"], out["gn_root/bias"] = _np(sd[bb + "stem.norm.weight"]), _np(sd[bb + "stem.norm.bias"])
        for s, stage in enumerate(model.patch_embed.backbone.stages):
            for u in range(len(stage.blocks)):
                src, dst = f"{bb}stages.{s}.blocks.{u}.", f"block{s + 1}/unit{u + 1}/"
                pairs = [
                    ("conv1", "norm1", "conv1", "gn1"),
                    ("conv2", "norm2", "conv2", "gn2"),
                    ("conv3", "norm3", "conv3", "gn3"),
                    ("downsample.conv", "downsample.norm", "conv_proj", "gn_proj"),
                ]
                for conv, norm, oconv, onorm in pairs:
                    if src + conv + ".weight" not in sd:
                        continue
                    out[dst + oconv + "/kernel"] = _np(sd[src + conv + ".weight"]).transpose(2, 3, 1, 0)
                    out[dst + onorm + "/scale"] = _np(sd[src + norm + ".weight"])
                    out[dst + onorm + "/bias"] = _np(sd[src + norm + ".bias"])
    return out


def randomise(model: torch.nn.Module, seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            z = torch.randn(p.shape, generator=g)
            is_scale = p.ndim == 1 and ("norm" in name) and name.endswith("weight")
            p.copy_(1.0 + 0.1 * z if is_scale else 0.05 * z)


def plain_vit(image: int, depth: int, classes: int, **kw) -> VisionTransformer:
    return VisionTransformer(
        img_size=image,
        patch_size=kw.pop("patch", 16),
        embed_dim=kw.pop("dim", 192),
        depth=depth,
        num_heads=kw.pop("heads", 3),
        mlp_ratio=4.0,
        num_classes=classes,
        act_layer="gelu_tanh",
        **kw,
    )


def hybrid_vit(image: int, classes: int) -> VisionTransformer:
    backbone = ResNetV2(
        layers=(1, 1),
        channels=(256, 512),
        width_factor=0.5,
        num_classes=0,
        global_pool="",
        preact=False,
        stem_type="same",
        conv_layer=partial(StdConv2dSame, eps=1e-8),
    )
    return VisionTransformer(
        img_size=image,
        patch_size=1,
        embed_dim=64,
        depth=2,
        num_heads=2,
        mlp_ratio=2.0,
        num_classes=classes,
        act_layer="gelu_tanh",
        embed_layer=partial(HybridEmbed, backbone=backbone),
    )


def make(case: str, build, config: dict, out_dir: str, image: int, seed: int) -> float:
    torch.manual_seed(seed)
    model = build().eval()
    randomise(model, seed)
    os.makedirs(os.path.join(out_dir, case), exist_ok=True)
    path = os.path.join(out_dir, case, "weights.npz")
    atomic.write_file(path, lambda tmp: np.savez(tmp, **official_layout(model)))
    reloaded = build().eval()
    _load_weights(reloaded, path)  # timm's own reader of the official layout
    x = np.random.default_rng(seed).uniform(-1, 1, (2, image, image, 3)).astype("float32")
    with torch.no_grad():
        xt = torch.from_numpy(x).permute(0, 3, 1, 2)
        logits, original = reloaded(xt).numpy(), model(xt).numpy()
    atomic.write_file(os.path.join(out_dir, case, "input.npy"), lambda tmp: np.save(tmp, x))
    atomic.write_file(os.path.join(out_dir, case, "logits.npy"), lambda tmp: np.save(tmp, logits))
    gap = float(np.abs(logits - original).max())
    config = dict(
        config,
        image_size=image,
        timm_version=timm.__version__,
        torch_version=torch.__version__,
        reload_vs_original_max_abs=gap,
        act_layer="gelu_tanh",
        seed=seed,
    )
    atomic.write_json(os.path.join(out_dir, case, "config.json"), config)
    print(f"{case}: timm reload vs original max |diff| {gap:.2e}; logits range {logits.min():.2f}..{logits.max():.2f}")
    return gap


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "timm"))
    p.add_argument("--full-b16", action="store_true", help="also ViT-B/16 at 224 (343 MB; not committed)")
    p.add_argument("--full-out", default="/tmp/timm_full", help="where the ViT-B/16 case goes")
    args = p.parse_args()
    if args.full_b16:
        make(
            "vit_b16_224",
            lambda: plain_vit(224, 12, 1000, patch=16, dim=768, heads=12),
            dict(patch_size=16, hidden_size=768, mlp_dim=3072, num_heads=12, num_layers=12, classes=1000),
            args.full_out,
            224,
            2,
        )
        return
    make(
        "vit_ti16_depth2_64",
        lambda: plain_vit(64, 2, 10),
        dict(patch_size=16, hidden_size=192, mlp_dim=768, num_heads=3, num_layers=2, classes=10),
        args.out,
        64,
        0,
    )
    make(
        "hybrid_r2x1_w05_64",
        lambda: hybrid_vit(64, 7),
        dict(
            patch_size=1,
            hidden_size=64,
            mlp_dim=128,
            num_heads=2,
            num_layers=2,
            classes=7,
            resnet_layers=[1, 1],
            resnet_width=0.5,
        ),
        args.out,
        64,
        1,
    )


if __name__ == "__main__":
    main()
