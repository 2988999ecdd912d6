"""The encoder's blocks through one traced graph when TensorFlow runs a model eagerly (`model(x)`).

In TensorFlow's eager mode every op of a block is dispatched from Python: a ViT-B/16 image costs ~800 ops and
0.41–0.43 s on 2 cores, of which the arithmetic is about half. Inside a `tf.function` the same ops run from
C++ after Grappler has fused them. All blocks of an encoder have the same structure, so one function, traced
once on the first block with the block's weights as inputs, serves all of them: the first call pays one
block's trace (~0.2 s) instead of twelve, and the calls after it take 0.19–0.23 s instead of 0.41–0.43 s
(BENCHMARKS.md, "Cold start").

Only inference takes this path (`training` false, no attention maps asked for), and only where every block has
the first block's variables, path for path, shape for shape and dtype for dtype (a model with LoRA or int8
in some blocks only runs block by block, eagerly, as before). Gradients flow through it: the
function is differentiable in its inputs and in the weights, which are read from the variables.
"""

from __future__ import annotations

import re
import weakref
from typing import Callable, List, Optional, Tuple

import keras

_FUNCTIONS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # Encoder -> its traced block function


def _signature(block) -> List[Tuple[str, tuple, str]]:
    """(path below the block, shape, dtype) of each of the block's variables, in order. Numeric suffixes are
    dropped from the path: Keras numbers its seed generators across the whole model."""
    prefix = block.name + "/"
    return [(re.sub(r"_\d+(?=/|$)", "", v.path.split(prefix, 1)[-1]), tuple(v.shape), v.dtype)
            for v in block.variables]


def _uniform(blocks) -> bool:
    first = _signature(blocks[0])
    return all(type(b) is type(blocks[0]) and _signature(b) == first for b in blocks[1:])


def _block_function(encoder) -> Callable:
    """`f(values, x)`: the first block's inference on `x` with its variables holding `values` (any block's)."""
    function = _FUNCTIONS.get(encoder)
    if function is None:
        import tensorflow as tf  # the backend here

        template = encoder.blocks[0]

        def block(values, x):
            with keras.StatelessScope(state_mapping=list(zip(template.variables, values))):
                return template(x, training=False)

        function = tf.function(block, autograph=False, reduce_retracing=True)
        _FUNCTIONS[encoder] = function
    return function


def run_blocks(encoder, x) -> Optional[object]:
    """`x` through every block of `encoder` by its one traced block function; None where the blocks differ
    in structure (the caller then runs them one by one)."""
    blocks = encoder.blocks
    if not blocks or not _uniform(blocks):
        return None
    function = _block_function(encoder)
    for b in blocks:
        x = function([v.value for v in b.variables], x)
    return x
