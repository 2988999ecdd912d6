"""The model table: one frozen record per ViT variant of the paper (Table 1, appendix) and of AugReg.

This file is the single source of truth for model sizes. Names follow the paper
("ViT-B/16", "R50+ViT-B/16"); the released-checkpoint spelling ("ViT-B_16") is
accepted everywhere a name is.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Optional, Tuple


@dataclasses.dataclass(frozen=True)
class ViTConfig:
    """Sizes of one Vision Transformer variant.

    Attributes:
      name: the paper's name, e.g. "ViT-B/16" or "R50+ViT-B/16".
      patch_size: side of the square patches fed to the linear embedding. For
        hybrids this is the patch size on the ResNet feature map (1 in the paper).
      hidden_size: token width D.
      mlp_dim: hidden width of the MLP block.
      num_heads: attention heads per block.
      num_layers: number of encoder blocks.
      resnet_layers: units per BiT-ResNet stage for hybrids, None for plain ViTs.
      resnet_width: ResNet width factor (64 * width channels in the root).
    """

    name: str
    patch_size: int
    hidden_size: int
    mlp_dim: int
    num_heads: int
    num_layers: int
    resnet_layers: Optional[Tuple[int, ...]] = None
    resnet_width: float = 1

    @property
    def is_hybrid(self) -> bool:
        return self.resnet_layers is not None

    @property
    def effective_patch_size(self) -> int:
        """Pixels per token side: patch size times the ResNet stem's stride."""
        return self.patch_size * resnet_stride(self.resnet_layers)

    def model_kwargs(self) -> dict:
        """Keyword arguments of `keras_vit.VisionTransformer` for this variant."""
        return {field: getattr(self, field) for field in SIZE_FIELDS}


SIZE_FIELDS = ("patch_size", "hidden_size", "mlp_dim", "num_heads", "num_layers", "resnet_layers", "resnet_width")


def get_config(name: str) -> ViTConfig:
    """Deprecated alias of `vit_config` (the name collides with Keras' `get_config`)."""
    import warnings

    warnings.warn(
        "keras_vit.get_config(name) is deprecated; use keras_vit.vit_config(name).", DeprecationWarning, stacklevel=2
    )
    return vit_config(name)


def resnet_stride(resnet_layers: Optional[Tuple[int, ...]]) -> int:
    """Down-sampling of the BiT stem: root conv (2) x max-pool (2) x 2 per later stage; a root-only stem
    (`resnet_layers=()`, AugReg's R+Ti/16) down-samples 4x."""
    if resnet_layers is None:
        return 1
    return 4 * 2 ** max(len(resnet_layers) - 1, 0)


_TI = dict(hidden_size=192, mlp_dim=768, num_heads=3, num_layers=12)
_S = dict(hidden_size=384, mlp_dim=1536, num_heads=6, num_layers=12)
_B = dict(hidden_size=768, mlp_dim=3072, num_heads=12, num_layers=12)
_L = dict(hidden_size=1024, mlp_dim=4096, num_heads=16, num_layers=24)
_H = dict(hidden_size=1280, mlp_dim=5120, num_heads=16, num_layers=32)

MODELS = {
    c.name: c
    for c in (
        ViTConfig("ViT-Ti/16", 16, **_TI),
        ViTConfig("ViT-S/16", 16, **_S),
        ViTConfig("ViT-S/32", 32, **_S),
        ViTConfig("ViT-B/8", 8, **_B),
        ViTConfig("ViT-B/16", 16, **_B),
        ViTConfig("ViT-B/32", 32, **_B),
        ViTConfig("ViT-L/16", 16, **_L),
        ViTConfig("ViT-L/32", 32, **_L),
        ViTConfig("ViT-H/14", 14, **_H),
        # Paper §3.1: a hybrid takes ResNet-50's stage-4 output (stride 32: "/32"), or drops stage 4 and moves
        # its units into stage 3 (stride 16: "/16", a 4x longer sequence)
        ViTConfig("R50+ViT-B/16", 1, resnet_layers=(3, 4, 9), **_B),
        ViTConfig("R50+ViT-B/32", 1, resnet_layers=(3, 4, 6, 3), **_B),
        ViTConfig("R50+ViT-L/16", 1, resnet_layers=(3, 4, 9), **_L),
        ViTConfig("R50+ViT-L/32", 1, resnet_layers=(3, 4, 6, 3), **_L),
        ViTConfig("R26+ViT-S/32", 1, resnet_layers=(2, 2, 2, 2), **_S),
        # AugReg (Steiner et al. 2021): R26+B/32, and R+Ti/16 whose stem is the ResNet root alone (stride 4) under
        # 8x8 patches -- 32 pixels per token despite the name (timm: vit_tiny_r_s16_p8, 49 tokens at 224)
        ViTConfig("R26+ViT-B/32", 1, resnet_layers=(2, 2, 2, 2), **_B),
        ViTConfig("R+ViT-Ti/16", 8, resnet_layers=(), **_TI),
    )
}


def _canonical(name: str) -> str:
    # "ViT-B_16", "vit-b/16", "R50+ViT-B_16", "ViT_B16" -> "vitb16" / "r50vitb16"
    return re.sub(r"[^a-z0-9]", "", name.lower())


_BY_CANONICAL = {_canonical(n): c for n, c in MODELS.items()}


def list_models(family: Optional[str] = None) -> list:
    """Model names `create_model` builds. None or "paper": the paper's table, in its order; "timm": every timm
    architecture keras_vit builds; a family ("vit", "deit", "deit3", "dinov2", "dinov3", "eva02", "pe", "rope",
    "aimv2", "clip", "siglip", "siglip2", "gap", "hybrid", "mobileclip", "naflex"): the timm architectures of that
    family (`keras_vit.vit.timm_table`; "siglip2": those with SigLIP 2 weights)."""
    if family in (None, "paper"):
        return list(MODELS)
    from keras_vit.vit import timm_table

    return timm_table.list_timm_models(None if family == "timm" else family)


def vit_config(name: str) -> ViTConfig:
    """The table row of a variant, by the paper's name ("ViT-B/16") or the checkpoint's ("ViT-B_16").

    The same record a built model carries as `model.vit_config`. (Named `get_config` before 0.3;
    that name is Keras' for a layer's constructor keywords.)
    """
    if isinstance(name, ViTConfig):
        return name
    if not isinstance(name, str):
        raise ValueError(f"Model name must be a string, got {type(name).__name__}. Known models: {', '.join(MODELS)}.")
    config = _BY_CANONICAL.get(_canonical(name))
    if config is None:
        raise ValueError(
            f"Unknown model name {name!r}. Known models: {', '.join(MODELS)} "
            "(checkpoint spellings such as 'ViT-B_16' are accepted too)."
        )
    return config


def find_config(
    patch_size: int,
    hidden_size: int,
    mlp_dim: int,
    num_heads: int,
    num_layers: int,
    resnet_layers: Optional[Tuple[int, ...]] = None,
    resnet_width: float = 1,
) -> Optional[ViTConfig]:
    """The table row with exactly these sizes, or None for a custom model."""
    resnet_layers = tuple(resnet_layers) if resnet_layers is not None else None
    for config in MODELS.values():
        if (
            config.patch_size,
            config.hidden_size,
            config.mlp_dim,
            config.num_heads,
            config.num_layers,
            config.resnet_layers,
        ) == (patch_size, hidden_size, mlp_dim, num_heads, num_layers, resnet_layers) and (
            resnet_layers is None or float(config.resnet_width) == float(resnet_width)
        ):
            return config
    return None


def custom_config(
    patch_size: int,
    hidden_size: int,
    mlp_dim: int,
    num_heads: int,
    num_layers: int,
    resnet_layers: Optional[Tuple[int, ...]] = None,
    resnet_width: float = 1,
) -> ViTConfig:
    """The row for these sizes: the table's own when it has one, else a custom row named after its sizes."""
    sizes = dict(
        patch_size=int(patch_size),
        hidden_size=int(hidden_size),
        mlp_dim=int(mlp_dim),
        num_heads=int(num_heads),
        num_layers=int(num_layers),
        resnet_layers=tuple(int(n) for n in resnet_layers) if resnet_layers is not None else None,
        resnet_width=resnet_width,
    )
    found = find_config(**sizes)
    if found is not None:
        return found
    stem = (
        f"R{'-'.join(map(str, sizes['resnet_layers'])) or 'root'}x{resnet_width:g}+"
        if sizes["resnet_layers"] is not None
        else ""
    )
    name = (
        f"{stem}ViT-D{hidden_size}-L{num_layers}-H{num_heads}-MLP{mlp_dim}/"
        f"{patch_size * resnet_stride(sizes['resnet_layers'])}"
    )
    return ViTConfig(name, **sizes)
