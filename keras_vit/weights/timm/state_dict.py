"""timm `vit_*` state dicts in a `.safetensors` file: read to the official keys, and a model laid out as timm's.

Read with the `safetensors` package's numpy API (no torch at run time; `keras_vit.weights.safetensors_read`).
What a bare state dict does not state is taken from timm's `VisionTransformer` defaults and said so.
"""

from __future__ import annotations

from typing import Dict, Optional, Tuple

import numpy as np

from keras_vit.vit.variant import Variant
from keras_vit.weights import architecture, keys
from keras_vit.weights.keys import _heads_for
from keras_vit.weights.safetensors_read import read_converted, read_sharded_converted
from keras_vit.weights.timm import model_args, reader, writer


# What a bare timm state dict does not state, taken from timm's `VisionTransformer` defaults: exact GELU
# (`act_layer=None`), LayerNorm epsilon 1e-6, a position row for every prefix token (`no_embed_class=False`).
TIMM_DEFAULTS = dict(activation="gelu", layer_norm_epsilon=1e-6)
# and timm's `Block`: normalised before each branch (a `ResPostBlock` file, vit_*_rpn_*, has the same tensors), no
# rotary embeddings (EVA-02's, PE's and RoPE-ViT's fixed ones hold no tensor): named in the warning too
UNSEEN_DEFAULTS = dict(post_norm=False, rotary_embedding=None)


def read_timm(
    path: str, num_heads: Optional[int] = None, sharded: bool = False
) -> Tuple[Dict[str, np.ndarray], dict, dict]:
    """({official key: array}, keywords the file states, keywords taken from timm's defaults) of a timm ViT
    `.safetensors` state dict (`sharded`: `path` is a `model.safetensors.index.json` and its shards).

    A bare state dict states its shapes and parts only. What it leaves out comes from timm's defaults
    (`TIMM_DEFAULTS`) and timm's pooling rule: an `fc_norm` goes with average pooling (`global_pool="avg"`,
    `fc_norm=None`), so such a file pools by averaging even when it keeps a class token."""
    implied = dict(position_interpolation="bicubic")
    assumed = dict(TIMM_DEFAULTS)

    def convert(sd: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
        if keys.detect(sd) != "timm":
            raise ValueError(f"{path!r} is not a timm ViT state dict (no patch_embed.* or embeds.proj.* keys).")
        first = next((k for k in ("patch_embed.proj.weight", "embeds.proj.weight") if k in sd), None)
        width = sd[first].shape[0] if first else 0
        implied["num_heads"] = _heads_for(width, path, num_heads)
        if any(k.startswith("patch_embed.backbone.") for k in sd) and "patch_embed.backbone.0.conv.weight" not in sd:
            implied["stem_numerics"] = "timm"  # timm's ResNet hybrids standardise and normalise with their own epsilons
        if "fc_norm.weight" in sd and not any(k.startswith("attn_pool.") for k in sd):
            assumed["classifier"] = "gap"
            if "cls_token" in sd:
                assumed["class_token"] = True
        if any(t in sd for t in ("cls_token", "reg_token", "dist_token")):
            assumed["prefix_position_embedding"] = True
        params = reader.timm_to_official(sd, implied["num_heads"], path)
        seen = Variant.seen_in(params, architecture.first_block(params))
        for field, value in UNSEEN_DEFAULTS.items():  # facts no tensor shows, unless this file's do
            if field not in seen:
                assumed[field] = value
        return params

    return (read_sharded_converted if sharded else read_converted)(path, convert), implied, assumed


# keywords by which a caller states a model's position information
_POSITION_KEYWORDS = ("variant", "rotary_embedding", "absolute_position_embedding", "position_resampling")


def refuse_unstated_positions(path: str, arch: dict, keywords: dict) -> None:
    """A bare state dict without a position table, loaded without naming its architecture, is refused naming the
    timm architectures it could be: their position information is rotary, which no tensor of the file states
    (a DINOv3 file built as a plain ViT would have none at all)."""
    if arch.get("absolute_position_embedding", True) or arch.get("rotary_embedding"):
        return
    if any(k in keywords for k in _POSITION_KEYWORDS):
        return
    from keras_vit.vit import timm_table

    width = arch.get("hidden_size")
    without = [
        n for n in timm_table.list_timm_models() if not timm_table.facts(n).get("absolute_position_embedding", True)
    ]
    same = [n for n in without if timm_table.facts(n).get("hidden_size") == width]
    names = same or without
    listed = f"{', '.join(names[:6])}{', ...' if len(names) > 6 else ''}"
    raise ValueError(
        f"{path!r} has no position table and names no architecture: timm's ViTs without one take their positions "
        "from rotary embeddings, which no tensor of a state dict states "
        f"({f'of width {width}: ' if same else 'e.g. '}{listed}). Load it by name: "
        "keras_vit.create_model('<timm name>', weights=path), or a repository directory with its config.json. "
        "Nothing was loaded."
    )


def laid_out_as_timm(
    model, params: Dict[str, np.ndarray], n: int, entry: Optional[dict] = None
) -> Dict[str, np.ndarray]:
    """Official keys -> timm's state dict: its `VisionTransformer`, its NaFlexVit for a resampled table, or the
    registered architecture (`model_args.registered_architecture`) that has the model's parts timm builds by name."""
    if model.variant.timm_writer_lacks():
        entry = entry or model_args.registered_architecture(model)[2]
        return writer.official_to_timm(params, n, writer.TimmLayout.of(entry))
    sd = writer.official_to_timm(params, n)
    resampling = model.variant.position_resampling
    return sd if resampling is None else writer.naflex_out(sd, params, resampling.grid)
