"""How a checkpoint's images were prepared at evaluation: the data config a model records and its
preprocessing applies.

Each checkpoint was evaluated with its own resize, crop and normalisation, and gives the right logits only
when fed the same way:

- The original ViT code (our releases: the 2020 files, AugReg, SAM) resizes the whole image to the model's
  square size (aspect ratio not kept, no crop), bilinearly without antialiasing, and maps pixels to [-1, 1]
  (mean = std = 0.5 in [0, 1] units). That is `ORIGINAL`, the default of every model.
- timm (and most files on the hub) resizes the shorter side to `size / crop_pct` with an antialiased bicubic
  kernel, crops the centre at `size`, and normalises by the checkpoint's mean and std (`TIMM_VIT`: ViT files
  without a `pretrained_cfg`).
- `transformers`' ViT image processor resizes both sides to the size (bilinear, antialiased as PIL does) and
  normalises by the mean and std in `preprocessor_config.json` (`TRANSFORMERS_VIT` when there is none).

The image size is not part of the record: it is always the model's own (`model.base_image_size`), so a
model rebuilt at another resolution keeps its preprocessing. `labels` names the classes of the head: a shipped label
set ("imagenet1k", "imagenet21k") where the source says it, or the class names themselves (a model fine-tuned on an
image folder carries its folder's names), so predictions, batch inference and exports name what the head predicts.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Sequence, Tuple, Union

from keras_vit.vit.labels import label_count

CROP_MODES = ("squash", "center")
INTERPOLATIONS = ("bilinear", "bicubic", "nearest")
PASS_ORDERS = ("pillow13", "pillow12")
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


@dataclasses.dataclass(frozen=True)
class DataConfig:
    """The evaluation preprocessing of a checkpoint (image size excepted: that is the model's).

    Attributes:
      mean, std: per-channel normalisation in [0, 1] units: pixels p in [0, 255] become (p / 255 - mean) / std.
        One value applies to every channel.
      crop_pct: the kept fraction of the resized image: it is first resized to `size / crop_pct`, then the
        centre `size` is cropped (1.0: nothing cropped).
      crop_mode: "squash": both sides resized to `size / crop_pct`, aspect ratio not kept (the original code,
        `transformers`); "center": the shorter side resized to `size / crop_pct`, aspect ratio kept (timm).
      interpolation: "bilinear", "bicubic" or "nearest".
      antialias: whether downscaling filters over the whole footprint (PIL, timm, `transformers`) or samples
        the nearest source pixels only (the original code's `tf.image.resize`).
      labels: the classes of the head, in output order: a shipped label set's name ("imagenet1k",
        "imagenet21k"), a tuple of class names, or None when unknown. A model whose head has another number of
        classes keeps no labels (`for_head`).
      pass_order: which of the two resize passes (columns, rows) runs first, as PIL does it; it shows where a
        bicubic pass overshoots [0, 255] and is clipped. "pillow13" (current Pillow): rows first when the height
        shrinks by more than twice as many pixels as the width, else columns first; "pillow12": always columns
        first, for evaluations made under Pillow <= 12. The layer also runs inside exports, where there is no
        Pillow to ask, so the order is part of the config.
    """

    mean: Tuple[float, ...] = (0.5, 0.5, 0.5)
    std: Tuple[float, ...] = (0.5, 0.5, 0.5)
    crop_pct: float = 1.0
    crop_mode: str = "squash"
    interpolation: str = "bilinear"
    antialias: bool = False
    labels: Union[None, str, Tuple[str, ...]] = None
    pass_order: str = "pillow13"

    def __post_init__(self):
        for field in ("mean", "std"):
            value = getattr(self, field)
            value = (value,) if isinstance(value, (int, float)) and not isinstance(value, bool) else value
            if (
                not isinstance(value, Sequence)
                or isinstance(value, str)
                or not value
                or not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in value)
            ):
                raise ValueError(f"data_config {field} must be a number or a list of numbers, got {value!r}.")
            object.__setattr__(self, field, tuple(float(v) for v in value))
        if any(s <= 0 for s in self.std):
            raise ValueError(f"data_config std must be > 0, got {list(self.std)}.")
        if any(not 0 <= m <= 1 for m in self.mean) or any(s > 1 for s in self.std):
            raise ValueError(
                f"data_config mean {list(self.mean)} and std {list(self.std)} must be in [0, 1] pixel "
                "units, as timm and transformers write them (ImageNet's mean is 0.485, 0.456, 0.406); "
                "values in [0, 255] units are 255 times too large: divide them by 255."
            )
        if len(self.mean) != len(self.std) and 1 not in (len(self.mean), len(self.std)):
            raise ValueError(f"data_config mean has {len(self.mean)} values and std {len(self.std)}.")
        if isinstance(self.crop_pct, bool) or not isinstance(self.crop_pct, (int, float)) or not 0 < self.crop_pct <= 1:
            raise ValueError(f"data_config crop_pct must be in (0, 1], got {self.crop_pct!r}.")
        object.__setattr__(self, "crop_pct", float(self.crop_pct))
        if self.crop_mode not in CROP_MODES:
            raise ValueError(f"data_config crop_mode must be one of {CROP_MODES}, got {self.crop_mode!r}.")
        if self.interpolation not in INTERPOLATIONS:
            raise ValueError(f"data_config interpolation must be one of {INTERPOLATIONS}, got {self.interpolation!r}.")
        if not isinstance(self.antialias, bool):
            raise ValueError(f"data_config antialias must be True or False, got {self.antialias!r}.")
        if self.pass_order not in PASS_ORDERS:
            raise ValueError(f"data_config pass_order must be one of {PASS_ORDERS}, got {self.pass_order!r}.")
        if self.labels is not None and not isinstance(self.labels, str):
            names = self.labels
            if (
                not isinstance(names, Sequence)
                or not names
                or not all(isinstance(n, str) and n.strip() and "\n" not in n for n in names)
            ):
                raise ValueError(
                    "data_config labels must be a label set's name, a list of class names (non-empty strings "
                    f"of one line each) or None, got {_short(names)}."
                )
            object.__setattr__(self, "labels", tuple(names))

    @classmethod
    def from_dict(cls, value) -> "DataConfig":
        """A `DataConfig` from itself, a dict of its fields (unknown fields named in the error), or None
        (`ORIGINAL`)."""
        if value is None:
            return ORIGINAL
        if isinstance(value, DataConfig):
            return value
        if not isinstance(value, dict):
            raise ValueError(f"data_config must be a dict or a keras_vit.DataConfig, got {type(value).__name__}.")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(value) - known)
        if unknown:
            raise ValueError(f"data_config has unknown fields {unknown}; known: {sorted(known)}.")
        return cls(**value)

    def to_dict(self) -> dict:
        """JSON-serialisable fields (what `get_config`, `.keras` files and `metadata.json` hold)."""
        return dict(
            mean=list(self.mean),
            std=list(self.std),
            crop_pct=self.crop_pct,
            crop_mode=self.crop_mode,
            interpolation=self.interpolation,
            antialias=self.antialias,
            labels=list(self.labels) if isinstance(self.labels, tuple) else self.labels,
            pass_order=self.pass_order,
        )

    def for_head(self, classes: int) -> "DataConfig":
        """This config for a head of `classes` classes: its labels kept when they name that many classes, else
        dropped (a model fine-tuned from an ImageNet-21k checkpoint with a 2-class head predicts no 21k class)."""
        if self.labels is None or label_count(self.labels) == classes:
            return self
        return dataclasses.replace(self, labels=None)

    def for_channels(self, channels: int) -> Tuple[Tuple[float, ...], Tuple[float, ...]]:
        """(mean, std) with one value per channel of a `channels`-channel image; a clear error when the
        recorded values cannot be spread over them (a mean of 3 values for a 1-channel model that differ)."""
        out = []
        for field, value in (("mean", self.mean), ("std", self.std)):
            if len(value) == channels:
                out.append(value)
            elif len(value) == 1 or len(set(value)) == 1:
                out.append((value[0],) * channels)
            else:
                raise ValueError(
                    f"data_config {field} has {len(value)} values {list(value)}, which a "
                    f"{channels}-channel model cannot use: give one value or {channels}."
                )
        return out[0], out[1]

    def input_range(self, channels: int = 3) -> Tuple[float, float]:
        """(low, high) that pixels in [0, 255] span after normalisation ((-1, 1) for `ORIGINAL`)."""
        mean, std = self.for_channels(channels)
        return (min((0.0 - m) / s for m, s in zip(mean, std)), max((1.0 - m) / s for m, s in zip(mean, std)))

    def resized_size(self, height: int, width: int, size: Tuple[int, int]) -> Tuple[int, int]:
        """(H, W) an image of `height` x `width` is resized to before the centre crop to `size`: timm's and
        torchvision's integer rules (the shorter side to floor(size / crop_pct), the longer in proportion,
        truncated)."""
        scaled = tuple(int(math.floor(s / self.crop_pct)) for s in size)
        if self.crop_mode == "squash":
            return scaled
        if scaled[0] == scaled[1]:
            short, long = (height, width) if height <= width else (width, height)
            new_long = scaled[0] * long // short
            return (scaled[0], new_long) if height <= width else (new_long, scaled[0])
        ratio = max(scaled[0] / height, scaled[1] / width)
        return int(round(height * ratio)), int(round(width * ratio))


ORIGINAL = DataConfig()
TIMM_VIT = DataConfig(crop_pct=0.9, crop_mode="center", interpolation="bicubic", antialias=True)
TRANSFORMERS_VIT = DataConfig(antialias=True)


def center_crop_offset(have: int, want: int) -> int:
    """torchvision's centre-crop offset: round((have - want) / 2) with Python's round (half to even)."""
    return int(round((have - want) / 2.0))


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
