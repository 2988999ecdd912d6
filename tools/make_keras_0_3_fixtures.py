"""Writes tests/fixtures/keras_0_3/: one `.keras` file per model family as keras_vit 0.3 saved them (the flat
family keywords of 0.3's `VisionTransformer.get_config`), with the outputs that model gave, so that a later
layout of the model (its record, its layers' paths) is checked against files users already have:

    KERAS_BACKEND=tensorflow python tools/make_keras_0_3_fixtures.py

It was run once on main at commit 8f384e0 (keras_vit 0.3.0 before the record of issue 55). Each model is a
committed fixture of another source read by that version (the timm repositories of tests/fixtures/timm_hub and
tests/fixtures/backbones, the original code's tiny checkpoints of tests/fixtures/flax_reference) and saved with
Keras' own `model.save`. Files per case: `<case>.keras` and `<case>.npz` (`input`: the images, `output`: the
model's output on them). `manifest.json` names the commit, the Keras version and each case's source.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import keras  # noqa: E402
import numpy as np  # noqa: E402

import keras_vit  # noqa: E402

FIXTURES = os.path.join(ROOT, "tests", "fixtures")
OUT = os.path.join(FIXTURES, "keras_0_3")
# bare files and what they need said: the architecture's name (a stem's widths are fixed by it) or the input size
BARE = {
    "mci_small": dict(
        build=dict(
            patch_size=16,
            hidden_size=64,
            mlp_dim=256,
            num_heads=2,
            num_layers=1,
            input_shape=(32, 48, 3),
            classes=5,
            convolutional_stem=[[16, 4], [16, 2]],
            activation="gelu",
            prefix_position_embedding=False,
        ),
        old_grid=(2, 3),
    ),
    "hybrid_units": dict(num_heads=2),
    "official_vit_tiny_rep_gap": dict(input_shape=(32, 48, 3)),
}


def _cases():
    """(case, source folder, input array, load_model keywords) for every committed family fixture."""
    hub = os.path.join(FIXTURES, "timm_hub")
    for case in sorted(os.listdir(hub)):
        folder = os.path.join(hub, case)
        source = os.path.join(folder, "model.safetensors") if case in BARE else folder
        yield case, source, np.load(os.path.join(folder, "input.npy")), BARE.get(case, {})
    backbones = os.path.join(FIXTURES, "backbones")
    for case in sorted(os.listdir(backbones)):
        folder = os.path.join(backbones, case)
        if os.path.isdir(folder):
            source = os.path.join(folder, "model.safetensors") if case in BARE else folder
            yield case, source, np.load(os.path.join(backbones, f"{case}_input.npy")), BARE.get(case, {})
    flax = os.path.join(FIXTURES, "flax_reference")
    for case in ("vit_tiny", "hybrid_tiny", "vit_tiny_rep_gap"):
        folder = os.path.join(flax, case)
        if os.path.exists(os.path.join(folder, "weights.npz")):
            name = f"official_{case}"
            yield (
                name,
                os.path.join(folder, "weights.npz"),
                np.load(os.path.join(folder, "input.npy")),
                BARE.get(name, {}),
            )
    yield "custom_any_size", None, np.random.default_rng(0).uniform(0, 255, (2, 48, 32, 3)), {}


def _load(source, kwargs: dict):
    if source is None:  # what no file states: preprocessing inside, any input size, a pooled backbone, remat
        keras.utils.set_random_seed(0)
        return keras_vit.VisionTransformer(
            8,
            32,
            64,
            4,
            2,
            input_shape=(None, None, 3),
            include_top=False,
            pooling="avg",
            include_preprocessing=True,
            remat=True,
            layer_scale_init=0.1,
            qk_norm=True,
            num_register_tokens=2,
            prefix_position_embedding=False,
            position_grid=(3, 2),
            activation="gelu",
            name="custom",
        )
    kwargs = dict(kwargs)
    if "build" in kwargs:  # MobileCLIP's stem: the bare file's widths belong to the architecture
        model = keras_vit.VisionTransformer(**kwargs.pop("build"), classifier_activation=None)
        keras_vit.load_weights(model, source, **kwargs)
        return model
    return keras_vit.load_model(source, classifier_activation=None, **kwargs)


def main() -> None:
    os.makedirs(OUT, exist_ok=True)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    manifest = {"commit": commit, "keras": keras.__version__, "keras_vit": keras_vit.__version__, "cases": {}}
    for case, source, x, kwargs in _cases():
        try:
            model = _load(source, kwargs)
        except Exception as error:  # a source this version cannot read is reported, not fixed here
            print(f"{case}: skipped ({type(error).__name__}: {str(error)[:200]})")
            continue
        x = x.astype("float32")
        output = model.predict(x, verbose=0)
        model.save(os.path.join(OUT, f"{case}.keras"))
        np.savez(os.path.join(OUT, f"{case}.npz"), input=x, output=output)
        manifest["cases"][case] = os.path.relpath(source, ROOT) if source else "VisionTransformer(...), seed 0"
        print(f"{case}: {model.name}, output {output.shape}")
    with open(os.path.join(OUT, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)


if __name__ == "__main__":
    main()
