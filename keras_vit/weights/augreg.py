"""The AugReg checkpoints ("How to train your ViT", Steiner et al. 2021) and their naming scheme.

Sources (public): google-research/vision_transformer README, "Available ViT models" (the recommended
pre-trained files, their 384 px ImageNet fine-tunes and the top-1 it publishes for them), and the
`gs://vit_models/augreg/index.csv` naming scheme (docs/reference.md, "AugReg file names"). AugReg files have no pre_logits.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import re
from typing import Dict, Optional

MODEL_CODES = {  # AugReg model code -> keras_vit table name
    "Ti_16": "ViT-Ti/16",
    "S_16": "ViT-S/16",
    "S_32": "ViT-S/32",
    "B_8": "ViT-B/8",
    "B_16": "ViT-B/16",
    "B_32": "ViT-B/32",
    "L_16": "ViT-L/16",
    "R_Ti_16": "R+ViT-Ti/16",
    "R26_S_32": "R26+ViT-S/32",
    "R26_B_32": "R26+ViT-B/32",
    "R50_L_32": "R50+ViT-L/32",
}
PRETRAIN_CLASSES = {"i21k": 21843, "i21k_30": 21843, "i1k": 1000}
# fine-tuning datasets of the index and their class counts (TFDS)
FINETUNE_CLASSES = {"imagenet2012": 1000, "cifar100": 100, "oxford_iiit_pet": 37, "resisc45": 45}
AUGMENTATIONS = ("none", "light0", "light1", "light2", "medium1", "medium2", "strong1", "strong2")

_NUM = r"\d+(?:\.\d+)?(?:e-?\d+)?"
_PATTERN = re.compile(
    rf"^(?P<code>{'|'.join(sorted(MODEL_CODES, key=len, reverse=True))})-(?P<pretrain>i21k_30|i21k|i1k)"
    rf"-(?P<epochs>\d+)ep-lr_(?P<lr>{_NUM})-aug_(?P<aug>{'|'.join(AUGMENTATIONS)})-wd_(?P<wd>{_NUM})"
    rf"-do_(?P<dropout>{_NUM})-sd_(?P<stochastic_depth>{_NUM})"
    rf"(?:--(?P<dataset>[a-z0-9_]+)-steps_(?P<steps>\d+k?)-lr_(?P<ft_lr>{_NUM})-res_(?P<resolution>\d+))?$"
)

# The README's recommended pre-training per model, the learning rate of its 384 px ImageNet fine-tune, and
# that fine-tune's published ImageNet top-1 (%)
RECOMMENDED = {
    "L_16": ("L_16-i21k-300ep-lr_0.001-aug_strong1-wd_0.1-do_0.0-sd_0.0", "0.01", 85.59),
    "B_16": ("B_16-i21k-300ep-lr_0.001-aug_medium1-wd_0.1-do_0.0-sd_0.0", "0.03", 85.49),
    "S_16": ("S_16-i21k-300ep-lr_0.001-aug_light1-wd_0.03-do_0.0-sd_0.0", "0.03", 83.73),
    "R50_L_32": ("R50_L_32-i21k-300ep-lr_0.001-aug_medium1-wd_0.1-do_0.1-sd_0.1", "0.01", 85.99),
    "R26_S_32": ("R26_S_32-i21k-300ep-lr_0.001-aug_light1-wd_0.1-do_0.0-sd_0.0", "0.01", 83.85),
    "Ti_16": ("Ti_16-i21k-300ep-lr_0.001-aug_none-wd_0.03-do_0.0-sd_0.0", "0.03", 78.22),
    "B_32": ("B_32-i21k-300ep-lr_0.001-aug_light1-wd_0.1-do_0.0-sd_0.0", "0.01", 83.59),
    "S_32": ("S_32-i21k-300ep-lr_0.001-aug_none-wd_0.1-do_0.0-sd_0.0", "0.01", 79.58),
    "R_Ti_16": ("R_Ti_16-i21k-300ep-lr_0.001-aug_none-wd_0.03-do_0.0-sd_0.0", "0.03", 75.40),
}
# short names, timm's tags: the recommended pre-training, and its ImageNet fine-tunes at 224 and 384 px (the 224
# file follows the index's scheme with the 384 run's learning rate; the README publishes no 224 accuracy)
SHORT = {"augreg_in21k": None, "augreg_in21k_ft_in1k": 224, "augreg_in21k_ft_in1k_384": 384}


@dataclasses.dataclass(frozen=True)
class AugRegName:
    """The fields of an AugReg filename."""

    code: str
    pretrain: str
    epochs: int
    lr: float
    aug: str
    wd: float
    dropout: float
    stochastic_depth: float
    dataset: Optional[str] = None
    steps: Optional[str] = None
    ft_lr: Optional[float] = None
    resolution: Optional[int] = None

    @property
    def model(self) -> str:
        return MODEL_CODES[self.code]


def parse_name(filename: str) -> AugRegName:
    """Fields of an AugReg filename (a path, a URL or a bare name; `.npz` optional), or a ValueError."""
    stem = os.path.basename(str(filename))
    stem = stem[:-4] if stem.endswith(".npz") else stem
    match = _PATTERN.match(stem)
    if not match:
        close = difflib.get_close_matches(stem, [r[0] for r in RECOMMENDED.values()], n=3, cutoff=0.6)
        raise ValueError(
            f"{filename!r} is not an AugReg filename ({{model}}-{{i1k|i21k|i21k_30}}-300ep-lr_..-aug_.."
            f"-wd_..-do_..-sd_..[--{{dataset}}-steps_..-lr_..-res_..]); model codes: "
            f"{', '.join(MODEL_CODES)}" + (f"; close: {', '.join(close)}" if close else "") + "."
        )
    g = match.groupdict()
    return AugRegName(
        code=g["code"],
        pretrain=g["pretrain"],
        epochs=int(g["epochs"]),
        lr=float(g["lr"]),
        aug=g["aug"],
        wd=float(g["wd"]),
        dropout=float(g["dropout"]),
        stochastic_depth=float(g["stochastic_depth"]),
        dataset=g["dataset"],
        steps=g["steps"],
        ft_lr=float(g["ft_lr"]) if g["ft_lr"] else None,
        resolution=int(g["resolution"]) if g["resolution"] else None,
    )


def published_top1(stem: str) -> Optional[float]:
    """The README's ImageNet top-1 for a recommended 384 px fine-tune, None for any other file."""
    for code, (pretrain, lr, top1) in RECOMMENDED.items():
        if stem == f"{pretrain}--imagenet2012-steps_20k-lr_{lr}-res_384":
            return top1
    return None


def recommended_files() -> Dict[str, Dict[str, str]]:
    """{model code: {short name: filename stem}} for the README's recommended checkpoints."""
    out = {}
    for code, (pretrain, lr, _) in RECOMMENDED.items():
        out[code] = {
            short: pretrain if res is None else f"{pretrain}--imagenet2012-steps_20k-lr_{lr}-res_{res}"
            for short, res in SHORT.items()
        }
    return out
