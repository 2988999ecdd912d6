"""Makes keras_vit/data/timm_architectures.json: the facts of every architecture timm registers in its
`vision_transformer`, `vision_transformer_hybrid`, `deit`, `eva` and `naflexvit` modules, read off the model timm
itself builds (on the meta device: no weights, no download), in keras_vit's vocabulary, with timm's own parameter count and
the parts keras_vit does not build yet. `keras_vit.create_model("<timm name>")` and the timm repository reader
use it, because timm's `config.json` on the hub often states only the architecture's name. Run by hand:

    PYTHONPATH=tools/torchvision_stub python tools/make_timm_architectures.py

with torch 2.13.0 (CPU) and timm 1.0.31.
"""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "torchvision_stub"))

import timm  # noqa: E402
import torch  # noqa: E402
from timm_eva_facts import eva_facts  # noqa: E402
from torch import nn  # noqa: E402

MODULES = ("vision_transformer", "vision_transformer_hybrid", "deit", "eva", "naflexvit")
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "keras_vit", "data", "timm_architectures.json")


def _activation(act) -> str:
    name = type(act).__name__
    if name == "GELU":
        return "gelu_tanh" if getattr(act, "approximate", "none") == "tanh" else "gelu"
    return {"GELUTanh": "gelu_tanh", "QuickGELU": "quick_gelu"}.get(name, f"unsupported:{name}")


def _is_identity(module) -> bool:
    return module is None or isinstance(module, nn.Identity)


def _stem(model):
    """(resnet_layers, resnet_width) of a hybrid whose backbone is the BiT ResNet keras_vit builds (timm's
    ResNetV2 without pre-activation, "same" padding, or its stem alone); None otherwise."""
    backbone = getattr(model.patch_embed, "backbone", None)
    if backbone is None:
        return None
    if type(backbone).__name__ == "ResNetV2":
        blocks = [b for stage in backbone.stages for b in stage.blocks]
        if (
            any(type(b).__name__ != "Bottleneck" for b in blocks)
            or type(backbone.stem.conv).__name__ != "StdConv2dSame"
        ):
            return None
        return [len(stage.blocks) for stage in backbone.stages], backbone.stem.conv.out_channels / 64
    if type(backbone).__name__ == "Sequential" and type(getattr(backbone, "conv", None)).__name__ == "StdConv2dSame":
        return [], backbone.conv.out_channels / 64
    return None


def _convolutional_stem(model):
    """MobileCLIP's stem (timm's ConvStem: non-overlapping convolutions, each with BatchNorm (epsilon 1e-5) and the
    exact GELU, the last one the patch embedding with its bias; no projection after it) as keras_vit's
    `convolutional_stem` [[channels, size], ...] and the total stride; None for any other backbone."""
    backbone = getattr(model.patch_embed, "backbone", None)
    if type(backbone).__name__ != "ConvStem" or not _is_identity(model.patch_embed.proj):
        return None
    layers, stride = [], 1
    for i, unit in enumerate(backbone):
        conv, last = unit.conv, i == len(backbone) - 1
        k, s = conv.kernel_size[0], conv.stride[0]
        if conv.kernel_size != (k, k) or conv.stride != (k, k) or s != k or conv.padding != (0, 0) or conv.groups != 1:
            return None
        norm_ok = (
            (_is_identity(unit.bn) or type(unit.bn).__name__ == "Sequential" and not len(unit.bn))
            if last
            else (
                type(unit.bn).__name__ == "BatchNormAct2d"
                and unit.bn.eps == 1e-5
                and type(unit.bn.act).__name__ == "GELU"
                and unit.bn.act.approximate == "none"
            )
        )
        if not norm_ok or (conv.bias is not None) != last:
            return None
        stride *= k
        if not last:
            layers.append([int(conv.out_channels), int(k)])
    return layers, stride


def _naflex_unsupported(model) -> list:
    """What keras_vit does not build yet of a NaFlexVit's embedding, as (bad, words) checks."""
    e = model.embeds
    learned = e.pos_embed_type == "learned"
    return [
        (e.norm_input is not None, "a norm on the flattened pixels"),
        (not _is_identity(e.norm), "a norm after the patch projection"),
        (e.patch_interpolator is not None, "FlexiViT's patch-size interpolator"),
        (not e.channels_last, "patches flattened channels first"),
        (e.pos_embed_use_grid_sample, "position tables sampled with grid_sample"),
        (model.rope is not None, "rotary embeddings in a NaFlexVit"),
        (
            learned and e.pos_embed_interp_mode not in ("bicubic", "bilinear"),
            f"position interpolation {e.pos_embed_interp_mode!r}",
        ),
        (
            learned and e.pos_embed_interp_mode == "bicubic" and not e.pos_embed_antialias,
            "bicubic position resampling without antialiasing",
        ),
        (
            learned and e.pos_embed_align_corners and (e.pos_embed_antialias or e.pos_embed_interp_mode != "bilinear"),
            "align_corners with antialiasing or bicubic resampling",
        ),
    ]


def _naflex_position(e) -> dict:
    """A NaFlexVit's position table in keras_vit's keywords (`position_resampling`)."""
    if e.pos_embed_type == "none":
        return dict(absolute_position_embedding=False)
    return dict(
        position_resampling=dict(
            grid=list(e.pos_embed_grid_size),
            factorized=e.pos_embed_type == "factorized",
            interpolation=e.pos_embed_interp_mode,
            antialias=bool(e.pos_embed_antialias),
            align_corners=bool(e.pos_embed_align_corners),
            aspect_preserving=bool(e.pos_embed_ar_preserving),
        )
    )


def _unsupported(model, block) -> list:
    """What keras_vit does not build yet, in words."""
    out = []
    if type(model).__name__ == "NaFlexVit":
        embedding = _naflex_unsupported(model)
    else:
        hybrid = type(model.patch_embed).__name__ == "HybridEmbed"
        embedding = [
            (type(model).__name__ not in ("VisionTransformer", "VisionTransformerDistilled"), type(model).__name__),
            (
                hybrid and _stem(model) is None and _convolutional_stem(model) is None,
                f"a hybrid CNN stem other than BiT's ResNet ({type(getattr(model.patch_embed, 'backbone', None)).__name__})",
            ),
            (
                type(model.patch_embed).__name__ not in ("PatchEmbed", "HybridEmbed"),
                f"patch embedding {type(model.patch_embed).__name__}",
            ),
            (
                not _is_identity(getattr(model.patch_embed, "norm", None))
                and type(model.patch_embed.norm) is not type(_norm(block)),
                "a patch-embedding norm of another kind",
            ),
            (getattr(model, "pos_embed", None) is None, "no learned position embeddings"),
        ]
    checks = embedding + [
        (
            type(block).__name__
            not in ("Block", "ResPostBlock", "ParallelScalingBlock", "DiffParallelScalingBlock", "_ThingsBranch"),
            f"block {type(block).__name__}",
        ),
        (
            not _parallel(block) and type(getattr(block, "attn", None)).__name__ not in ("Attention", "DiffAttention"),
            f"attention {type(getattr(block, 'attn', None)).__name__}",
        ),
        (
            not _parallel(block) and type(getattr(block, "mlp", None)).__name__ not in ("Mlp", "SwiGLU", "GluMlp"),
            f"MLP {type(getattr(block, 'mlp', None)).__name__}",
        ),
        (model.global_pool not in ("token", "avg", "map"), f"global_pool={model.global_pool!r}"),
    ]
    out += [what for bad, what in checks if bad]
    if not out and _parallel(block):
        checks = [
            (type(block.in_norm).__name__ not in ("LayerNorm", "RmsNorm"), f"norm {type(block.in_norm).__name__}"),
            (
                getattr(block, "out_proj", None) is None
                and (block.attn_out_proj.bias is None) != (block.mlp_out_proj.bias is None),
                "bias on one projection kind only",
            ),
            (getattr(block, "dual_lambda", False), "differential attention with dual lambdas"),
            (block.in_split[1] != model.embed_dim, "an attention width other than the embedding's"),
            (_activation(block.mlp_act).startswith("unsupported"), f"activation {type(block.mlp_act).__name__}"),
        ]
        out += [what for bad, what in checks if bad]
    elif not out:
        attn, mlp = block.attn, block.mlp
        gated = type(mlp).__name__ != "Mlp"
        first = mlp.fc1_g if type(mlp).__name__ == "SwiGLU" else mlp.fc1
        diff = type(attn).__name__ == "DiffAttention"
        checks = [
            (
                diff and (attn.dual_lambda or not _is_identity(attn.q_norm)),
                "differential attention with dual lambdas or qk-norm",
            ),
            (type(block.norm1).__name__ not in ("LayerNorm", "RmsNorm"), f"norm {type(block.norm1).__name__}"),
            ((attn.proj.bias is None) != (first.bias is None), "bias on one projection kind only"),
            (attn.qkv.out_features != 3 * model.embed_dim, "an attention width other than the embedding's"),
            (not gated and _activation(mlp.act).startswith("unsupported"), f"activation {type(mlp.act).__name__}"),
            (
                gated and (type(mlp.act).__name__ != "SiLU" or getattr(mlp, "gate_last", False)),
                f"a gated MLP with {type(mlp.act).__name__}",
            ),
        ]
        pool = getattr(model, "attn_pool", None)
        if pool is not None:
            checks += [
                (pool.latent_len != 1, "a MAP head with several queries"),
                (not _is_identity(pool.q_norm) or pool.pos_embed is not None, "a MAP head with extras"),
                (_activation(pool.mlp.act).startswith("unsupported"), "a MAP head with another activation"),
            ]
        out += [what for bad, what in checks if bad]
    return out


class _ThingsBranch:
    """timm's ParallelThingsBlock seen as its first branch: a plain block's attention, MLP, norms and LayerScales
    (every branch is built alike), with how many branches there are (keras_vit's `parallel_branches`)."""

    def __init__(self, block):
        first, ffn = block.attns[0], block.ffns[0]
        self.attn, self.norm1, self.ls1 = first.attn, first.norm, first.ls
        self.mlp, self.norm2, self.ls2 = ffn.mlp, ffn.norm, ffn.ls
        self.num_parallel = int(block.num_parallel)


def _parallel(block) -> bool:
    """timm's ParallelScalingBlock: ViT-22B's parallel layers (keras_vit's `parallel_layers`); its differential
    attention form too (DiffParallelScalingBlock)."""
    return type(block).__name__ in ("ParallelScalingBlock", "DiffParallelScalingBlock")


def _norm(block):
    """The block's (first) norm."""
    return block.in_norm if _parallel(block) else block.norm1


def _block_facts(block) -> dict:
    """The facts that live in each block, in keras_vit's keywords."""
    if _parallel(block):
        return dict(
            mlp_dim=int(block.in_split[0]),
            num_heads=int(block.num_heads),
            activation=_activation(block.mlp_act),
            layer_norm_epsilon=float(block.in_norm.eps),
            layer_scale_init=None if _is_identity(block.ls) else float(block.ls.init_values),
            qk_norm=not _is_identity(block.q_norm),
            qkv_bias=block.in_proj.bias is not None,
            swiglu=False,
            mlp_norm=False,
            attention_norm=False,
            rms_norm=type(block.in_norm).__name__ == "RmsNorm",
            projection_bias=(block.attn_out_proj if block.out_proj is None else block.out_proj).bias is not None,
            post_norm=False,
            parallel_layers=True,
            differential_attention=type(block).__name__ == "DiffParallelScalingBlock",
        )
    attn, mlp, norm = block.attn, block.mlp, block.norm1
    kind = type(mlp).__name__
    return dict(
        mlp_dim=int(mlp.fc1_g.out_features if kind == "SwiGLU" else mlp.fc2.in_features),
        num_heads=int(attn.num_heads),
        layer_norm_epsilon=float(norm.eps),
        layer_scale_init=None if _is_identity(getattr(block, "ls1", None)) else float(block.ls1.init_values),
        qk_norm=not _is_identity(attn.q_norm),
        qkv_bias=attn.qkv.bias is not None,
        swiglu=kind != "Mlp",
        mlp_norm=not _is_identity(getattr(mlp, "norm", None)),
        attention_norm=not _is_identity(getattr(attn, "norm", None)),
        rms_norm=type(norm).__name__ == "RmsNorm",
        projection_bias=attn.proj.bias is not None,
        post_norm=type(block).__name__ == "ResPostBlock",
        parallel_layers=False,
        parallel_branches=getattr(block, "num_parallel", 1),
        differential_attention=type(attn).__name__ == "DiffAttention",
    )


def timm_layout(model) -> dict:
    """How timm lays out the tensors of a block (keras_vit's timm writer follows it): q, k, v fused in one `qkv`
    (else `q_proj` / `k_proj` / `v_proj`), a SwiGLU packed in one `fc1` (timm's GluMlp; else `fc1_g` / `fc1_x`),
    and a parallel block's two output projections fused in one `out_proj`."""
    block = model.blocks[0]
    block = _ThingsBranch(block) if type(block).__name__ == "ParallelThingsBlock" else block
    attn, mlp = getattr(block, "attn", None), getattr(block, "mlp", None)
    return dict(
        qkv_fused=attn is None or getattr(attn, "qkv", None) is not None,
        mlp_packed=type(mlp).__name__ == "GluMlp",
        out_fused=getattr(block, "out_proj", None) is not None,
    )


def _data_config(model) -> dict:
    """The evaluation preprocessing of the name's default pretrained tag (timm's `pretrained_cfg`)."""
    cfg = model.pretrained_cfg or {}
    return dict(
        mean=[float(m) for m in cfg.get("mean", (0.5, 0.5, 0.5))],
        std=[float(s) for s in cfg.get("std", (0.5, 0.5, 0.5))],
        crop_pct=float(cfg.get("crop_pct", 0.9)),
        crop_mode=cfg.get("crop_mode", "center"),
        interpolation=cfg.get("interpolation", "bicubic"),
        tag=cfg.get("tag"),
    )


def facts(name: str) -> dict:
    with torch.device("meta"):
        model = timm.create_model(name, pretrained=False)
    block = model.blocks[0]
    block = _ThingsBranch(block) if type(block).__name__ == "ParallelThingsBlock" else block
    count = sum(p.numel() for p in model.parameters())
    if type(model).__name__ == "Eva":
        return dict(
            params=int(count), data_config=_data_config(model), timm_layout=timm_layout(model), **eva_facts(model)
        )
    naflex = type(model).__name__ == "NaFlexVit"  # SigLIP 2 NaFlex, RADIO: a table resampled per input
    embed = model.embeds if naflex else model.patch_embed
    size = model.pretrained_cfg.get("input_size", (3, 224, 224))[1:] if naflex else embed.img_size
    entry = dict(
        params=int(count),
        image_size=list(size) if isinstance(size, (tuple, list)) else [size, size],
        classes=int(model.num_classes),
        unsupported=_unsupported(model, block),
        data_config=_data_config(model),
        timm_layout=timm_layout(model),
    )
    if entry["unsupported"]:
        return entry
    conv_stem = None if naflex else _convolutional_stem(model)
    patch = (conv_stem[1],) * 2 if conv_stem else embed.patch_size  # MobileCLIP: the stem's whole stride
    has_class_token = (embed.cls_token if naflex else getattr(model, "cls_token", None)) is not None
    pool = getattr(model, "attn_pool", None)
    block_facts = _block_facts(block)
    if "activation" not in block_facts:  # a gated MLP's is SiLU; the MAP head's MLP says the model's activation
        mlp = block.mlp
        block_facts["activation"] = _activation(
            mlp.act if type(mlp).__name__ == "Mlp" else pool.mlp.act if pool is not None else nn.GELU()
        )
    entry.update(
        patch_size=int(patch[0]) if patch[0] == patch[1] else list(patch),
        hidden_size=int(model.embed_dim),
        num_layers=len(model.blocks),
        classifier={"token": "token", "avg": "gap", "map": "map"}[model.global_pool],
        **block_facts,
        num_register_tokens=int(getattr(model, "num_reg_tokens", 0)),
        distillation_token=getattr(model, "dist_token", None) is not None,
        pre_norm=not _is_identity(model.norm_pre),
        fc_norm=not _is_identity(model.fc_norm),
        final_norm=not (_is_identity(model.norm) and _is_identity(model.fc_norm)),
        patch_bias=True if conv_stem else embed.proj.bias is not None,
        prefix_position_embedding=not (naflex or getattr(model, "no_embed_class", False)),
        dynamic_image_size=naflex or bool(getattr(model, "dynamic_img_size", False)),
        class_token=True if model.global_pool != "token" and has_class_token else None,
        pooling_includes_prefix=bool(getattr(model, "pool_include_prefix", False)) and model.num_prefix_tokens > 0,
        patch_norm=not naflex and not _is_identity(getattr(embed, "norm", None)),
    )
    if naflex:
        entry.update(_naflex_position(embed))
    if conv_stem:
        entry["convolutional_stem"] = conv_stem[0]
    stem = None if naflex else _stem(model)
    if stem is not None:
        width = stem[1]
        entry.update(
            resnet_layers=stem[0], resnet_width=int(width) if float(width).is_integer() else width, stem_numerics="timm"
        )
    if not has_class_token and model.global_pool == "token":
        entry["unsupported"] = ["token pooling without a class token"]
    return entry


def main() -> None:
    table = {}
    for module in MODULES:
        for name in timm.list_models(module=module):
            try:
                tags = sorted(t.split(".", 1)[1] for t in timm.list_pretrained(name + ".*"))
                table[name] = dict(module=module, tags=tags, **facts(name))
            except Exception as e:  # noqa: BLE001 (recorded: the table says why)
                table[name] = dict(module=module, unsupported=[f"timm could not build it here: {e}"])
    with open(OUT, "w") as f:
        json.dump(
            dict(timm=timm.__version__, torch=torch.__version__, architectures=table), f, indent=1, sort_keys=True
        )
    bad = {n: e["unsupported"] for n, e in table.items() if e["unsupported"]}
    print(f"{len(table)} architectures, {len(table) - len(bad)} buildable; not yet:")
    for n, why in sorted(bad.items()):
        print(f"  {n}: {'; '.join(why)}")


if __name__ == "__main__":
    main()
