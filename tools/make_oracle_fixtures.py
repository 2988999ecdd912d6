"""Writes tests/fixtures/oracle/: sources that vary one fact keras_vit's earlier fixtures held fixed, each written by
its own framework with that framework's logits, so the default suite checks keras_vit against the source's own
code without torch.

    PYTHONPATH=tools/torchvision_stub python tools/make_oracle_fixtures.py timm
    python tools/make_oracle_fixtures.py transformers
    python tools/make_oracle_fixtures.py processor

Cases (every parameter perturbed, nothing downloaded):
- timm, bare state dicts (`<case>.safetensors` + `<case>_logits.npy`): "timm_grid_2x4" (a 16x32 input, patch 8:
  a 2x4 grid + class row, 9 rows, a square count), "timm_avg_class_token" (`global_pool="avg"` with the class
  token kept: timm adds `fc_norm` by its rule).
- transformers ViT directories (`hf_<case>/` + `hf_<case>_logits.npy`): "grid_4x6" (`image_size=[32, 48]`, 25
  rows, a square count), "no_qkv_bias" (`qkv_bias=False`), "eps_1e-5" (`layer_norm_eps=1e-5`), "quick_gelu"
  (`hidden_act="quick_gelu"`), "gelu_new" and "relu" (an activation keras_vit's MLP lacks: refused by name).
- transformers' `ViTImageProcessor` (`hf_processor.npz`): its resized pixels of scikit-image's photos for its
  default config and a bicubic ImageNet one (`PROCESSORS`).
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np
import torch

OUT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "fixtures", "oracle")


def _perturb(module: torch.nn.Module, seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.add_(0.2 * torch.randn(p.shape, generator=g))


def _images(h: int, w: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1, 1, (2, h, w, 3)).astype("float32")  # NHWC, normalised


def _logits(model, x: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        out = model(torch.from_numpy(x).permute(0, 3, 1, 2))
    return (out.logits if hasattr(out, "logits") else out).numpy()


def timm_cases(versions: dict) -> None:
    import timm
    from safetensors.torch import save_file

    small = dict(patch_size=8, embed_dim=32, depth=1, num_heads=2, num_classes=5)
    cases = {"timm_grid_2x4": dict(img_size=(16, 32)), "timm_avg_class_token": dict(img_size=32, global_pool="avg")}
    for seed, (case, extra) in enumerate(cases.items()):
        torch.manual_seed(seed)
        model = timm.create_model("vit_base_patch16_224", pretrained=False, **small, **extra).eval()
        _perturb(model, seed)
        save_file(
            {k: v.contiguous() for k, v in model.state_dict().items()},
            os.path.join(OUT, f"{case}.safetensors"),
            metadata={"format": "pt"},
        )
        size = extra["img_size"] if isinstance(extra["img_size"], tuple) else (extra["img_size"],) * 2
        x = _images(*size, seed)
        np.save(os.path.join(OUT, f"{case}_input.npy"), x)
        np.save(os.path.join(OUT, f"{case}_logits.npy"), _logits(model, x))
    versions["timm"] = timm.__version__


def transformers_cases(versions: dict) -> None:
    import transformers
    from transformers import ViTConfig, ViTForImageClassification

    base = dict(
        patch_size=8,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        num_labels=5,
        image_size=32,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    cases = {
        "grid_4x6": dict(image_size=[32, 48]),
        "no_qkv_bias": dict(qkv_bias=False),
        "eps_1e-5": dict(layer_norm_eps=1e-5),
        "quick_gelu": dict(hidden_act="quick_gelu"),
        "gelu_new": dict(hidden_act="gelu_new"),
        "relu": dict(hidden_act="relu"),
    }
    for seed, (case, extra) in enumerate(cases.items()):
        torch.manual_seed(seed)
        model = ViTForImageClassification(ViTConfig(**{**base, **extra})).eval()
        _perturb(model, seed)
        model.save_pretrained(os.path.join(OUT, f"hf_{case}"), safe_serialization=True)
        size = extra.get("image_size", [32, 32])
        x = _images(*size, seed)
        np.save(os.path.join(OUT, f"hf_{case}_input.npy"), x)
        np.save(os.path.join(OUT, f"hf_{case}_logits.npy"), _logits(model, x))
    versions["transformers"] = transformers.__version__


PROCESSORS = {
    "default": {},
    "bicubic_imagenet": dict(resample=3, image_mean=[0.485, 0.456, 0.406], image_std=[0.229, 0.224, 0.225]),
}


def processor_cases(versions: dict) -> None:
    """transformers' `ViTImageProcessor` on scikit-image's photos (landscape and tall): its resized pixels
    (normalisation undone, exact in uint8) for each processor config, in `hf_processor.npz`. Without torchvision
    transformers 5 runs its PIL backend (`ViTImageProcessorPil`), the one older versions have."""
    import transformers
    from PIL import Image
    from skimage import data
    from transformers import ViTImageProcessor

    photos = {
        "astronaut": data.astronaut(),
        "chelsea": data.chelsea(),
        "rocket_tall": np.ascontiguousarray(data.rocket().transpose(1, 0, 2)),
    }
    out = {}
    for name, extra in PROCESSORS.items():
        processor = ViTImageProcessor(**extra)
        mean, std = np.asarray(processor.image_mean), np.asarray(processor.image_std)
        for photo, image in photos.items():
            x = processor(Image.fromarray(image), return_tensors="np")["pixel_values"][0].transpose(1, 2, 0)
            out[f"{name}/{photo}"] = np.round((x * std + mean) * 255.0).clip(0, 255).astype("uint8")
    out["configs"] = np.asarray(json.dumps(PROCESSORS))
    np.savez_compressed(os.path.join(OUT, "hf_processor.npz"), **out)
    versions["transformers"] = transformers.__version__


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    path = os.path.join(OUT, "versions.json")
    versions = json.load(open(path)) if os.path.exists(path) else {}
    versions["torch"] = torch.__version__
    {"timm": timm_cases, "transformers": transformers_cases, "processor": processor_cases}[sys.argv[1]](versions)
    with open(path, "w") as f:
        json.dump(versions, f, indent=1)
