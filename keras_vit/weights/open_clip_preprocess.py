"""open_clip's `preprocess_cfg` and keras_vit's `DataConfig`, each way: how open_clip prepares a model's images
(`open_clip.transform.PreprocessCfg`: size, mean, std, interpolation, resize mode) as the image tower's data
config, and the image tower's data config as a `preprocess_cfg` where open_clip can state it."""

from __future__ import annotations

# open_clip's defaults for a `preprocess_cfg` key it does not state (`open_clip.transform.PreprocessCfg`)
OPENAI_MEAN, OPENAI_STD = (0.48145466, 0.4578275, 0.40821073), (0.26862954, 0.26130258, 0.27577711)


def data_config(preprocess_cfg, source: str):
    """The image tower's `DataConfig` from open_clip's `preprocess_cfg`: its mean and std (OpenAI's when unstated),
    interpolation (bicubic), and resize mode ("shortest": the shorter side resized, the centre cropped; "squash":
    both sides resized); images resized as PIL does, filtering over the whole footprint (torchvision's `Resize`
    on PIL images)."""
    from keras_vit.vit.data_config import DataConfig

    p = dict(preprocess_cfg or {})
    if p.get("mode", "RGB") != "RGB":
        raise ValueError(f"{source}: preprocess_cfg.mode={p['mode']!r}: keras_vit's image towers take RGB.")
    resize = p.get("resize_mode", "shortest")
    if resize not in ("shortest", "squash"):
        raise ValueError(f"{source}: preprocess_cfg.resize_mode={resize!r}: keras_vit resizes 'shortest' or 'squash'.")
    return DataConfig(
        mean=tuple(p.get("mean", OPENAI_MEAN)),
        std=tuple(p.get("std", OPENAI_STD)),
        crop_pct=1.0,
        crop_mode="center" if resize == "shortest" else "squash",
        interpolation=p.get("interpolation", "bicubic"),
        antialias=True,
    )


def preprocess_cfg(image) -> dict:
    """The `preprocess_cfg` of an image tower's data config and input size (its crop fraction is not open_clip's
    to state: `keras_vit.weights.open_clip_config` checks the round trip)."""
    d = image.data_config
    return dict(
        size=list(image.base_image_size),
        mode="RGB",
        mean=list(d.mean),
        std=list(d.std),
        interpolation=d.interpolation,
        resize_mode="squash" if d.crop_mode == "squash" else "shortest",
    )
