"""Arrays a source packs otherwise than the model holds them, unpacked once the model says how: timm's GluMlp
(the gated MLP's two input layers in one kernel, whose activation the file does not state) and timm's NaFlexVit
(the patch projection as a Linear over flattened patches)."""

from __future__ import annotations

from typing import Dict

import keras
import numpy as np


def unpack_gated_mlp(model: keras.Model, params: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
    """`params` with each packed gated MLP kernel (`MlpBlock_3/Dense_packed`: gate rows first, as timm's GluMlp)
    split into the SwiGLU's `gate` and `Dense_0`, when `model` has a SwiGLU MLP; the file does not state its
    activation, so into any other model the packed key stays and is refused by name."""
    packed = [k for k in params if "/MlpBlock_3/Dense_packed/" in k]
    if not packed:
        return params
    if not model.variant.swiglu:
        raise ValueError(
            f"The checkpoint holds a packed gated MLP ({packed[0]}: timm's GluMlp, twice the output "
            f"layer's width), whose activation a state dict does not state, and model {model.name!r} has "
            "the paper's MLP: build it with swiglu=True if it is a SwiGLU, or by its timm architecture's "
            "name. Nothing was loaded."
        )
    out = {k: v for k, v in params.items() if k not in packed}
    for key in packed:
        gate, value = np.split(params[key], 2, axis=-1)
        out[key.replace("/Dense_packed/", "/gate/")] = gate
        out[key.replace("/Dense_packed/", "/Dense_0/")] = value
    return out


def unflatten_patch_kernel(params: Dict[str, np.ndarray], targets) -> Dict[str, np.ndarray]:
    """`params` with a flat patch projection (`embedding/patch_kernel`, (ph * pw * C, D): timm's NaFlexVit,
    patches flattened row by row, channels fastest) as the model's (ph, pw, C, D) kernel, which flattens in the
    same order. A projection of another size is refused naming both."""
    if "embedding/patch_kernel" not in params:
        return params
    flat, want = params["embedding/patch_kernel"], tuple(targets["embedding/kernel"].shape)
    if "embedding/kernel" in params or flat.shape != (int(np.prod(want[:3])), want[3]):
        raise ValueError(
            f"embedding/patch_kernel: a flat patch projection {flat.shape} (timm's NaFlexVit), but the "
            f"model's patches of {want[0]}x{want[1]}x{want[2]} hold {int(np.prod(want[:3]))} values "
            f"for width {want[3]}. Nothing was loaded."
        )
    out = {k: v for k, v in params.items() if k != "embedding/patch_kernel"}
    out["embedding/kernel"] = flat.reshape(want)
    return out
