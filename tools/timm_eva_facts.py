"""The facts of a timm `Eva` model (the `eva` module: EVA-02, DINOv3, Perception Encoder, RoPE-ViT, ...) in
keras_vit's vocabulary, or the parts keras_vit does not build yet, read off the model timm builds. Used by
`tools/make_timm_architectures.py`; torch and timm only.
"""

from __future__ import annotations

from torch import nn


def _is_identity(module) -> bool:
    return module is None or isinstance(module, nn.Identity)


def rotary(model):
    """(the `rotary_embedding` dict, what of it keras_vit does not build) of an Eva model's `rope`."""
    rope = getattr(model, "rope", None)
    if rope is None:
        return None, []
    kind = type(rope).__name__
    if kind == "RotaryEmbeddingCat":
        bad = [
            what
            for cond, what in ((rope.in_pixels or rope.grid_type != "index", "pixel-frequency rotary embeddings"),)
            if cond
        ]
        ref = rope.ref_feat_shape
        spec = dict(
            form="axial",
            temperature=float(rope.temperature),
            offset=float(rope.grid_offset),
            axis_order=rope.grid_indexing,
            rotate_half=bool(rope.rotate_half),
            reference_grid=[int(r) for r in ref] if ref is not None else None,
        )
        return spec, bad
    if kind == "RotaryEmbeddingDinoV3":
        bad = [
            what
            for cond, what in (
                (rope.min_period is not None, "rotary periods given as min/max"),
                (rope.normalize_coords != "separate", "rotary coordinates normalised jointly"),
            )
            if cond
        ]
        spec = dict(
            form="centered",
            temperature=float(rope.temperature),
            offset=float(rope.grid_offset),
            axis_order=rope.grid_indexing,
            rotate_half=bool(rope.rotate_half),
            reference_grid=None,
        )
        return spec, bad
    if kind == "RotaryEmbeddingMixed":  # learned frequencies: temperature sets their initial magnitudes only
        return dict(
            form="mixed",
            temperature=float(rope.temperature),
            offset=0.0,
            axis_order=rope.grid_indexing,
            rotate_half=False,
            reference_grid=None,
        ), []
    return None, [f"rotary embeddings {kind}"]


def _mlp(block, embed_dim):
    """(mlp_dim, swiglu, mlp_norm, what keras_vit does not build)."""
    mlp = block.mlp
    kind = type(mlp).__name__
    norm = not _is_identity(getattr(mlp, "norm", None))
    if kind == "Mlp":
        act = type(mlp.act).__name__
        bad = [] if act == "GELU" and getattr(mlp.act, "approximate", "none") == "none" else [f"activation {act}"]
        return mlp.fc1.out_features, False, norm, bad + (["a norm inside a GELU MLP"] if norm else [])
    if kind == "GluMlp":
        ok = type(mlp.act).__name__ == "SiLU" and not mlp.gate_last
        return mlp.fc2.in_features, True, norm, [] if ok else [f"a gated MLP with {type(mlp.act).__name__}"]
    if kind == "SwiGLU":
        return mlp.fc1_g.out_features, True, norm, [] if type(mlp.act).__name__ == "SiLU" else ["a non-SiLU SwiGLU"]
    return 0, False, norm, [f"MLP {kind}"]


def _key_value_heads(model):
    """Each block's key/value heads where any block has fewer than query heads (grouped-query attention)."""
    counts = [getattr(b.attn, "num_kv_heads", b.attn.num_heads) for b in model.blocks]
    return counts if any(c != b.attn.num_heads for c, b in zip(counts, model.blocks)) else None


def eva_facts(model) -> dict:
    """The table entry of an Eva model: facts, or `unsupported` naming each missing part."""
    block, d = model.blocks[0], model.embed_dim
    attn = block.attn
    spec, bad = rotary(model)
    mlp_dim, swiglu, mlp_norm, mlp_bad = _mlp(block, d)
    bad += mlp_bad
    qkv = getattr(attn, "qkv", None)
    checks = [
        (type(block).__name__ not in ("EvaBlock", "EvaBlockPostNorm"), f"block {type(block).__name__}"),
        (getattr(attn, "gate", None) is not None, "gated attention"),
        (type(block.norm1).__name__ not in ("LayerNorm", "RmsNorm"), f"norm {type(block.norm1).__name__}"),
        (attn.head_dim * attn.num_heads != d, "an attention width other than the embedding's"),
        (model.global_pool not in ("token", "avg", "map"), f"global_pool={model.global_pool!r}"),
        (not _is_identity(getattr(model.patch_embed, "norm", None)), "a norm in the patch embedding"),
        (attn.proj.bias is None, "an attention projection without bias"),
    ]
    pool = getattr(model, "attn_pool", None)
    if pool is not None:
        checks += [
            (pool.latent_len != 1, "a MAP head with several queries"),
            (not _is_identity(pool.q_norm) or pool.pos_embed is not None, "a MAP head with extras"),
            (pool.mlp.fc1.out_features != mlp_dim, "a MAP head whose MLP width differs from the blocks'"),
        ]
    bad += [what for cond, what in checks if cond]
    size = model.patch_embed.img_size
    entry = dict(image_size=list(size), classes=int(model.num_classes), unsupported=bad)
    if bad:
        return entry
    patch = model.patch_embed.patch_size
    bias = (
        getattr(attn, "q_bias", None) is not None
        or (qkv is not None and qkv.bias is not None)
        or (getattr(attn, "q_proj", None) is not None and attn.q_proj.bias is not None)
    )
    entry.update(
        patch_size=int(patch[0]) if patch[0] == patch[1] else list(patch),
        hidden_size=int(d),
        mlp_dim=int(mlp_dim),
        num_heads=int(attn.num_heads),
        num_layers=len(model.blocks),
        classifier={"token": "token", "avg": "gap", "map": "map"}[model.global_pool],
        activation="gelu",
        layer_norm_epsilon=float(block.norm1.eps),
        layer_scale_init=float(block.init_values) if getattr(block, "gamma_1", None) is not None else None,
        num_register_tokens=int(model.reg_token.shape[1]) if model.reg_token is not None else 0,
        distillation_token=False,
        pre_norm=not _is_identity(model.norm_pre),
        fc_norm=not _is_identity(model.fc_norm),
        final_norm=not (_is_identity(model.norm) and _is_identity(model.fc_norm)),
        qk_norm=not _is_identity(attn.q_norm),
        qkv_bias=bool(bias),
        patch_bias=model.patch_embed.proj.bias is not None,
        prefix_position_embedding=not model.no_embed_class,
        dynamic_image_size=bool(getattr(model, "dynamic_img_size", False)),
        class_token=True if model.global_pool != "token" and model.cls_token is not None else None,
        rotary_embedding=spec,
        absolute_position_embedding=model.pos_embed is not None,
        swiglu=swiglu,
        mlp_norm=mlp_norm,
        attention_norm=not _is_identity(attn.norm),
        rms_norm=type(block.norm1).__name__ == "RmsNorm",
        post_norm=type(block).__name__ == "EvaBlockPostNorm",
        attention_only_layer_scale=getattr(block, "gamma_1", None) is not None
        and getattr(block, "gamma_2", None) is None,
        key_value_heads=_key_value_heads(model),
        key_bias=not bias
        or (
            qkv is not None
            and qkv.bias is not None  # False: EVA's query and value biases only
            or getattr(attn, "k_proj", None) is not None
            and attn.k_proj.bias is not None
        ),
        attention_pooling_heads=int(pool.num_heads) if pool is not None and pool.num_heads != attn.num_heads else None,
        pooling_includes_prefix=pool is not None and model.num_prefix_tokens > 0,
    )
    if model.cls_token is None and model.global_pool == "token":
        entry["unsupported"] = ["token pooling without a class token"]
    return entry
