"""What an official-layout file is, read off its arrays' shapes: patch size, width, depth, heads, MLP width,
hybrid stages, class token or GAP, representation layer, head, LayerScale, and where the class token's position
embedding lives. `keras_vit.load_model` builds from this when the source keeps no config of its own."""

from __future__ import annotations

import re
from typing import Dict, Optional, Sequence, Tuple

import numpy as np

from keras_vit.vit import table
from keras_vit.vit.variant import Variant
from keras_vit.weights.keys import POSEMB_KEY

_BLOCK = re.compile(r"^Transformer/encoderblock_(\d+)/")
_UNIT = re.compile(r"^block(\d+)/unit(\d+)/")


def _indices(pattern, keys) -> list:
    return sorted({tuple(int(g) for g in m.groups()) for m in map(pattern.match, keys) if m})


LAYER_SCALE_READ = 1e-5  # the init recorded for a model read off a file with LayerScale (its values are loaded)


def prefix_tokens(params: Dict[str, np.ndarray]) -> int:
    """How many tokens come before the patches: class, distillation and register tokens."""
    return sum(int(params[k].shape[1]) for k in ("cls", "dist", "reg") if k in params)


def posemb_prefix_rows(params: Dict[str, np.ndarray], included: bool = True) -> int:
    """Rows of the file's position table that belong to the prefix tokens (class, distillation, registers).

    Where they are is a fact of the source's layout, never read off the row count: the original code and timm's
    default (`no_embed_class=False`) give every prefix token a row (`included=True`); DeiT-III and DINOv2 with
    registers (timm's `no_embed_class=True`, keras_vit's `prefix_position_embedding=False`) give them none."""
    return prefix_tokens(params) if included else 0


def _block_number(key: str) -> int:
    return int(_BLOCK.match(key).group(1))


def first_block(params: Dict[str, np.ndarray]) -> str:
    """The key prefix of the first block's parts: the block's, or with parallel branches its first branch's."""
    branch = "Transformer/encoderblock_0/branch_0/"
    return branch if any(k.startswith(branch) for k in params) else "Transformer/encoderblock_0/"


def variant_from_npz(params: Dict[str, np.ndarray]) -> dict:
    """The family options the arrays show (activation and LayerNorm epsilon cannot be seen: the source says):
    each record field that declares how the arrays show it (`Variant.seen_in`), then those read off several
    arrays together."""
    block = first_block(params)
    kw = Variant.seen_in(params, block)
    if block + "LayerScale_0/scale" in params:
        kw["layer_scale_init"] = LAYER_SCALE_READ  # the file's trained scales are loaded over it
        if block + "LayerScale_2/scale" not in params and not kw.get("parallel_layers"):
            kw["attention_only_layer_scale"] = True  # Sapiens2 (parallel layers have one LayerScale anyway)
    attention = block + "MultiHeadDotProductAttention_1/"
    if attention + "query/bias" in params and attention + "key/bias" not in params:
        kw["key_bias"] = False  # EVA: query and value biases only
    if block + "LayerNorm_0/scale" in params and block + "LayerNorm_0/bias" not in params:
        kw["rms_norm"] = True  # AIMv2, Sapiens2: RMSNorm has a scale only
    if attention + "out/kernel" in params and attention + "out/bias" not in params:
        kw["projection_bias"] = False  # AIMv2
    heads = [
        (params[k].shape[1], params[k.replace("/query/", "/key/")].shape[1])
        for k in sorted(
            (k for k in params if k.endswith("MultiHeadDotProductAttention_1/query/kernel")), key=_block_number
        )
    ]
    if any(q != kv for q, kv in heads):  # grouped-query attention: the key kernels' own head counts
        kw["key_value_heads"] = tuple(int(kv) for _, kv in heads)
    if POSEMB_KEY not in params and POSEMB_KEY + "_y" not in params:
        kw["absolute_position_embedding"] = False  # rotary embeddings alone
    if "Transformer/encoder_norm/scale" not in params and "fc_norm/scale" not in params:
        kw["final_norm"] = False  # RADIO, InternViT
    for key, option in (
        (block + "MultiHeadDotProductAttention_1/query/bias", "qkv_bias"),
        ("embedding/bias", "patch_bias"),
    ):
        if key not in params:
            kw[option] = False
    return kw


def _num_heads(params: Dict[str, np.ndarray], query: str) -> int:
    """The attention's heads: the output projection's (differential attention has twice as many query heads of
    half the width), else the query kernel's."""
    out = query.replace("/query/", "/out/")
    return int(params[out].shape[0] if out in params else params[query].shape[1])


def _refuse_unstated(params: Dict[str, np.ndarray], path: str) -> None:
    """A ValueError for the sources whose file alone does not state how to build them: NaFlex (its patch size,
    channel order and resampling rule) and MobileCLIP's convolutional stem (its activation, norm and strides)."""
    what = None
    if (
        "embedding/patch_kernel" in params
        or POSEMB_KEY + "_y" in params
        or getattr(params.get(POSEMB_KEY), "ndim", 3) == 4
    ):
        what = (
            "a NaFlex checkpoint (timm's NaFlexVit: a flat patch projection, a position table resampled per "
            "input). Its patch size, channel order and resampling rule are"
        )
    elif "convolutional_stem/conv_0/kernel" in params:
        what = (
            "a checkpoint with a convolutional stem (timm's ConvStem: MobileCLIP). Its activation, norm and strides are"
        )
    if what:
        raise ValueError(
            f"{path!r} is {what} not in the file: load it by its timm architecture's name "
            "(keras_vit.create_model(name, weights=...)) or from its repository directory. Nothing was "
            "loaded."
        )


def architecture_from_npz(
    params: Dict[str, np.ndarray],
    path: str = "checkpoint",
    *,
    prefix_position_embedding: bool = True,
    grid: Optional[Tuple[int, int]] = None,
) -> dict:
    """`VisionTransformer` keywords read off an official-layout file's shapes (see `read_npz`).

    Patch size, width, depth, heads, MLP width, hybrid stages and width, class token or GAP,
    representation layer and head size. `prefix_position_embedding` says where the source keeps the prefix
    tokens' position rows (the layout's fact, `posemb_prefix_rows`). The input size is set only where the grid
    rows left are a square count, the size every layout without a config trains at; another count cannot be
    read from the file: the source's config states it (`input_shape`), or the caller passes it. `grid`: the
    (rows, cols) the source states (a `save_npz` file's record), which sets the input size at any shape.
    """
    _refuse_unstated(params, path)
    block = first_block(params)
    packed = block + "MlpBlock_3/Dense_packed/kernel"
    need = [
        "embedding/kernel",
        packed if packed in params else block + "MlpBlock_3/Dense_0/kernel",
        block + "MultiHeadDotProductAttention_1/query/kernel",
    ]
    missing = [k for k in need if k not in params]
    if missing and "img/embedding/kernel" in params and "txt/Embed_0/embedding" in params:
        raise ValueError(
            f"{path!r} is a big_vision image-text checkpoint (img/ and txt/ towers): load it with "
            "keras_vit.load_big_vision_siglip(path, model=<open_clip's name of it>), whose image_model is the image "
            "tower."
        )
    if missing:
        raise ValueError(f"{path!r} is not an official ViT checkpoint: it lacks {', '.join(missing)}.")
    p, _, _, d = params["embedding/kernel"].shape
    blocks = [i for (i,) in _indices(_BLOCK, params)]
    if blocks != list(range(len(blocks))):
        raise ValueError(f"{path!r} has encoder blocks {blocks}: expected 0..{len(blocks) - 1} without gaps.")
    kw = dict(
        patch_size=int(p),
        hidden_size=int(d),
        num_layers=len(blocks),
        num_heads=_num_heads(params, need[2]),
        mlp_dim=int(params[need[1]].shape[-1]) // (2 if need[1] == packed else 1),
        classifier="token" if "cls" in params else "map" if "MAPHead_0/probe" in params else "gap",
        representation_size=int(params["pre_logits/kernel"].shape[-1]) if "pre_logits/kernel" in params else None,
    )
    if "head/kernel" in params:
        kw["classes"] = int(params["head/kernel"].shape[-1])
    else:
        kw["include_top"] = False
    if "conv_root/kernel" in params:
        units = _indices(_UNIT, params)  # none: a root-only stem (R+Ti/16)
        stages = [
            sum(1 for s, _ in units if s == stage) for stage in range(1, 1 + max((s for s, _ in units), default=0))
        ]
        kw["resnet_layers"] = tuple(stages)
        kw["resnet_width"] = params["conv_root/kernel"].shape[-1] / 64
        if float(kw["resnet_width"]).is_integer():
            kw["resnet_width"] = int(kw["resnet_width"])
    kw.update(variant_from_npz(params))
    if prefix_tokens(params) and not prefix_position_embedding:
        kw["prefix_position_embedding"] = False
    if POSEMB_KEY not in params:  # rotary embeddings alone: no table to read a grid from
        kw["absolute_position_embedding"] = False
        return kw
    n = params[POSEMB_KEY].shape[1] - posemb_prefix_rows(params, prefix_position_embedding)
    side = int(round(np.sqrt(max(n, 0))))
    if grid is None and n > 0 and side * side == n:
        grid = (side, side)
    if grid is not None:
        stride = p * table.resnet_stride(kw.get("resnet_layers"))
        first = params["conv_root/kernel"] if "conv_root/kernel" in params else params["embedding/kernel"]
        kw["input_shape"] = (grid[0] * stride, grid[1] * stride, int(first.shape[2]))
    return kw


def stated_grid(
    params: Dict[str, np.ndarray],
    input_shape: Sequence[int],
    prefix_position_embedding: bool = True,
    source: str = "checkpoint",
) -> Tuple[int, int]:
    """The patch grid a source's config states (`input_shape`, its trained size), checked against the rows of
    its position table: a config that disagrees with its own weights is refused, naming both."""
    if "convolutional_stem/conv_0/kernel" in params:  # its repository states the stem; kernels are strides
        stride = int(params["embedding/kernel"].shape[0]) * int(
            np.prod([v.shape[0] for k, v in params.items() if k.startswith("convolutional_stem/conv_")])
        )
    else:
        arch = architecture_from_npz(params, source, prefix_position_embedding=prefix_position_embedding)
        stride = arch["patch_size"] * table.resnet_stride(arch.get("resnet_layers"))
    h, w = int(input_shape[0]), int(input_shape[1])
    grid = (h // stride, w // stride)
    prefix = posemb_prefix_rows(params, prefix_position_embedding)
    if POSEMB_KEY not in params:
        return grid  # no table: nothing in the weights says otherwise
    rows = int(params[POSEMB_KEY].shape[1])
    if h % stride or w % stride or grid[0] * grid[1] + prefix != rows:
        raise ValueError(
            f"{source!r}: its config states a {h}x{w} input ({grid[0]}x{grid[1]} patches of "
            f"{stride} px{f' + {prefix} prefix row(s)' if prefix else ''}), but its position table has "
            f"{rows} rows; the config does not describe these weights. Nothing was loaded."
        )
    return grid


_FAMILY_PARTS = {
    "layer_scale_init": "LayerScale",
    "num_register_tokens": "register tokens",
    "distillation_token": "a distillation token",
    "pre_norm": "a LayerNorm after the embeddings",
    "fc_norm": "a LayerNorm after pooling",
    "final_norm": "a final LayerNorm",
    "qk_norm": "qk-norm",
    "qkv_bias": "query/key/value biases",
    "patch_bias": "a patch-embedding bias",
    "swiglu": "a SwiGLU MLP",
    "mlp_norm": "a norm inside the MLP",
    "attention_norm": "a norm on the attention output",
    "key_bias": "a key bias",
    "rms_norm": "RMSNorm",
    "patch_norm": "a norm on the patch embeddings",
    "projection_bias": "projection biases",
    "attention_only_layer_scale": "LayerScale on attention only",
    "parallel_layers": "parallel layers (one norm before attention and MLP side by side)",
    "differential_attention": "differential attention",
    "absolute_position_embedding": "a learned position table",
}


def check_family(model, params, source) -> None:
    """A checkpoint of another family (parts the model lacks, or lacks parts it has) is refused naming each
    difference, before any other check: the arrays would not fit, and the message should say why."""
    theirs, ours = variant_from_npz(params), model.variant
    defaults = dict(
        layer_scale_init=None,
        num_register_tokens=0,
        distillation_token=False,
        pre_norm=False,
        fc_norm=False,
        final_norm=True,
        qk_norm=False,
        qkv_bias=True,
        patch_bias=True,
        swiglu=False,
        mlp_norm=False,
        attention_norm=False,
        absolute_position_embedding=True,
        key_bias=True,
        rms_norm=False,
        patch_norm=False,
        projection_bias=True,
        attention_only_layer_scale=False,
        parallel_layers=False,
        differential_attention=False,
    )
    differ = []
    for field, what in _FAMILY_PARTS.items():
        file_has = theirs.get(field, defaults[field])
        if field == "swiglu" and any("/MlpBlock_3/Dense_packed/" in k for k in params):
            file_has = model_has = getattr(ours, field)  # a packed gated MLP: the model says its activation
        elif field == "layer_scale_init":
            file_has, model_has = file_has is not None, ours.layer_scale_init is not None
        else:
            model_has = getattr(ours, field)
        if file_has != model_has:
            differ.append(f"{what}: checkpoint {file_has!r}, model {model_has!r}")
    learned = any(k.endswith("/rotary_frequencies") for k in params)
    mixed = ours.rotary_embedding is not None and ours.rotary_embedding.form == "mixed"
    if learned != mixed:
        differ.append(f"learned rotary frequencies (RoPE-Mixed): checkpoint {learned}, model {mixed}")
    if ("MAPHead_0/probe" in params) != (model.classifier == "map"):
        differ.append(f"a MAP head: checkpoint {'MAPHead_0/probe' in params}, model {model.classifier == 'map'}")
    if differ:
        raise ValueError(
            f"Checkpoint {source!r} is another ViT family than model {model.name!r}: "
            f"{'; '.join(differ)}. keras_vit.load_model(source) builds the checkpoint's own; nothing "
            "was loaded."
        )
