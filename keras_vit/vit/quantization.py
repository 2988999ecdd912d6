"""Post-training quantization of a `VisionTransformer` through Keras' own `Model.quantize`, and the record of
what it changed (`quantized_layers`, kept in `get_config` so a saved int8 model reloads as one)."""

from __future__ import annotations

import contextlib
import gc
import warnings
from typing import Dict, Iterator, Optional


@contextlib.contextmanager
def _one_collection() -> Iterator[None]:
    """Runs the block with `gc.collect` deferred to one call at its end. Keras' `Layer.__delattr__` collects
    garbage each time a layer drops a float kernel for its quantized one (to free the device buffer), once per
    layer: in a process holding many objects (a notebook, a test session) each pass walks the whole heap, and a
    ViT quantizes six layers per block. One collection after the last layer frees the same buffers."""
    collect, calls = gc.collect, []
    gc.collect = lambda *args, **kwargs: calls.append(args) or 0
    try:
        yield
    finally:
        gc.collect = collect
        if calls:
            collect()


class Quantization:
    """Mixed into `VisionTransformer` (before `keras.Model`): `quantize` and `quantized_layers`."""

    def quantize(self, mode: Optional[str] = None, config=None, filters=None, **kwargs) -> None:
        """`keras.Model.quantize` (e.g. `model.quantize("int8")`): the attention projections, the MLP's Dense
        layers, pre-logits and head get Keras' quantized kernels. Layers that hold no matmul weights
        (patch embedding, norms, tokens) stay float, silently rather than with one warning each."""
        if self.lora_layers():
            raise ValueError(
                f"Model {self.name!r} has LoRA adapters: quantize the merged model (model.merge_lora().quantize(...))."
            )
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=r".*does not have a `quantize` method implemented")
            with _one_collection():
                super().quantize(mode, config=config, filters=filters, **kwargs)

    def quantized_layers(self) -> Dict[str, str]:
        """{layer path: quantization mode} of the layers `quantize` has changed; empty for a float model."""
        return {
            layer.path: layer.quantization_mode
            for layer in self._flatten_layers()
            if getattr(layer, "quantization_mode", None) is not None
        }
