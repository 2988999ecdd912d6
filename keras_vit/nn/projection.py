"""`Projection`: the attention's dense projections, an `EinsumDense` whose LoRA adapts the kernel as one matrix.

The attention projections hold their kernels in the official layout (D, heads, D/heads) and (heads, D/heads, D).
Keras' own `EinsumDense.enable_lora` would factor that per head, A (D, heads, r) and B (r, D/heads): 6.0x the
LoRA paper's 2*D*r values for ViT-B/16 at one rank. `Projection` adapts the flattened (D, heads*D/heads) matrix
instead, the paper's parametrisation and the one `peft` uses on `transformers`' ViT, so a rank means what it means
in the literature. Adapting a whole model (targets, freezing, merging) is `keras_vit.vit.lora`.
"""

from __future__ import annotations

import math
from typing import Optional

import keras
import numpy as np
from keras import ops

from keras_vit.nn.initializers import PACKAGE, initial
from keras_vit.nn.specs import ArraySpecs
from keras_vit.utils import validate


@keras.saving.register_keras_serializable(package=PACKAGE)
class Projection(ArraySpecs, keras.layers.EinsumDense):
    """`EinsumDense` whose LoRA adapts the kernel as one (d_in, d_out) matrix (the paper's, and `peft`'s).

    `input_axes`: how many leading kernel axes are the input side (1 for query/key/value's (D, heads,
    D/heads), 2 for out's (heads, D/heads, D)). Without LoRA it is exactly `EinsumDense`.
    """

    def __init__(self, *args, input_axes: int = 1, **kwargs):
        kwargs.setdefault("bias_initializer", initial("zeros"))  # zeros; host-made while weights follow
        super().__init__(*args, **kwargs)
        self.input_axes = int(input_axes)

    def enable_lora(
        self, rank: int, lora_alpha: Optional[float] = None, a_initializer="he_uniform", b_initializer="zeros"
    ) -> None:
        """Adds A (d_in, rank) and B (rank, d_out) in float32 and freezes the kernel."""
        rank = validate.integer("rank", rank)
        if not self.built:
            raise ValueError(f"Layer {self.name!r} must be built before LoRA is enabled.")
        if self.lora_enabled:
            raise ValueError(f"LoRA is already enabled on layer {self.path!r}.")
        if self.quantization_mode is not None:
            raise ValueError(
                f"Layer {self.path!r} is quantized ({self.quantization_mode}): enable LoRA on the "
                "float model, then merge (model.merge_lora()) and quantize."
            )
        shape = tuple(self._kernel.shape)
        d_in, d_out = math.prod(shape[: self.input_axes]), math.prod(shape[self.input_axes :])
        self._tracker.unlock()
        self.lora_kernel_a = self.add_weight(
            name="lora_kernel_a", shape=(d_in, rank), dtype="float32", initializer=keras.initializers.get(a_initializer)
        )
        self.lora_kernel_b = self.add_weight(
            name="lora_kernel_b",
            shape=(rank, d_out),
            dtype="float32",
            initializer=keras.initializers.get(b_initializer),
        )
        self._kernel.trainable = False
        self._tracker.lock()
        self.lora_enabled, self.lora_rank = True, rank
        self.lora_alpha = float(lora_alpha) if lora_alpha is not None else float(rank)

    @property
    def kernel(self):
        """The kernel the layer computes with: W, or W + (alpha / r) A B reshaped to W's layout."""
        if not self.lora_enabled:
            return super().kernel
        delta = ops.reshape(ops.matmul(self.lora_kernel_a, self.lora_kernel_b), tuple(self._kernel.shape))
        scale = self.lora_alpha / self.lora_rank
        return ops.cast(ops.add(ops.cast(self._kernel, "float32"), scale * delta), self.compute_dtype)

    def quantize(self, mode=None, type_check=True, config=None):
        """`EinsumDense.quantize` (int8 etc.): Keras checks the exact class unless told; the kernel is the same."""
        if self.lora_enabled:
            raise ValueError(f"Layer {self.path!r} has LoRA adapters: merge them first (model.merge_lora()).")
        return super().quantize(mode, type_check=False, config=config)

    def get_config(self) -> dict:
        return {**super().get_config(), "input_axes": self.input_axes}


def merged_kernel(layer) -> np.ndarray:
    """W + (alpha / r) A B of an adapted layer in float32 (whatever the compute dtype), in W's layout."""
    delta = ops.convert_to_numpy(ops.matmul(layer.lora_kernel_a, layer.lora_kernel_b)).astype("float64")
    base = ops.convert_to_numpy(layer._kernel).astype("float64")
    return (base + (layer.lora_alpha / layer.lora_rank) * delta.reshape(base.shape)).astype("float32")


def base_variable(layer) -> keras.Variable:
    """The stored (frozen, un-adapted) kernel variable of `layer`: what checkpoints load into."""
    return layer._kernel if getattr(layer, "lora_enabled", False) else layer.kernel
