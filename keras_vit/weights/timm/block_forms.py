"""The block classes of timm's ViTs, one module each, and the one table the reader and the writer ask.

timm builds a ViT's blocks from one of several classes; each lays its tensors out its own way. A module per
class says how its tensors are recognised (in a timm state dict under `blocks.<i>.`, and in the official keys under
`Transformer/encoderblock_<i>/`) and how they are read and written; `Block` (and Eva's block) is the one asked last
(`keras_vit.weights.timm.block`). Adding a block class is a module with `in_timm`, `in_official`, `read` and
`write`, and its line in `BLOCK_FORMS`.
"""

from __future__ import annotations

from types import ModuleType
from typing import Tuple

from keras_vit.weights.keys import Params, _Reader
from keras_vit.weights.timm import block, parallel_scaling_block, parallel_things_block
from keras_vit.weights.timm.block import TimmLayout

# asked in this order; a branch of a ParallelThingsBlock is itself laid out as a Block
BLOCK_FORMS: Tuple[ModuleType, ...] = (parallel_things_block, parallel_scaling_block)


def read_block(g: _Reader, i: int, num_heads: int) -> Params:
    """Block `i` of the state dict `g` reads, in official keys, by the class that laid it out."""
    form = next((f for f in BLOCK_FORMS if f.in_timm(g.sd, f"blocks.{i}.")), None)
    return (form.read if form is not None else block.read_block)(g, i, num_heads)


def write_block(params: Params, sd: Params, i: int, layout: TimmLayout) -> None:
    """Block `i` of the official-key `params` into the state dict `sd`, in the class its parts call for."""
    form = next((f for f in BLOCK_FORMS if f.in_official(params, f"Transformer/encoderblock_{i}/")), None)
    (form.write if form is not None else block.write_block)(params, sd, i, layout)
