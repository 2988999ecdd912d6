"""The encoder's blocks through one compiled block function when a model is called eagerly (`model(x)`).

Called outside any trace, TensorFlow dispatches every op of a block from Python, and JAX compiles and
dispatches every primitive on its own: a ViT-B/16 image costs 0.40 s (TensorFlow) or 0.37 s (JAX) per call on
2 cores, about twice its arithmetic, and JAX's first call 2.4 s. All blocks of an encoder have the same
structure, so one function, traced once on the first block with the block's weights as inputs, serves all of
them: a `tf.function` on TensorFlow (Grappler fuses its ops, C++ runs them), a `jax.jit` on JAX (one XLA
program). A ViT-B/16 call then takes 0.20 s on either; the first call 0.38 s on TensorFlow and 1.05 s on
JAX (BENCHMARKS.md, "Cold start"). PyTorch runs eagerly by design and is left as it is.

Only inference takes this path (`training` false, no attention maps asked for, not already inside a trace:
`predict`, `fit`, `jax.jit`, `tf.function` and exports trace the whole model as before), and only where every
block has the first block's variables, path for path, shape for shape and dtype for dtype (a model with LoRA
or int8 in some blocks only runs block by block, as before). On TensorFlow gradients flow through it (a
`GradientTape` sees the variables read and the function's gradient).
"""

from __future__ import annotations

import re
import weakref
from typing import Callable, List, Optional, Tuple

import keras

from keras_vit.utils.eager import tensorflow_eager

_FUNCTIONS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # Encoder -> its compiled block function


def eager(x) -> bool:
    """Whether `x` reaches the encoder outside any trace, on a backend this module compiles for."""
    backend = keras.backend.backend()
    if backend == "tensorflow":
        return tensorflow_eager()
    if backend == "jax":
        import jax

        return not isinstance(x, jax.core.Tracer)
    return False


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
        template = encoder.blocks[0]

        def block(values, x):
            with keras.StatelessScope(state_mapping=list(zip(template.variables, values))):
                return template(x, training=False)

        if keras.backend.backend() == "tensorflow":
            import tensorflow as tf

            function = tf.function(block, autograph=False, reduce_retracing=True)
        else:
            import jax

            function = jax.jit(block)
        _FUNCTIONS[encoder] = function
    return function


def run_blocks(encoder, x) -> Optional[object]:
    """`x` through every block of `encoder` by its one compiled block function; None where the blocks differ
    in structure (the caller then runs them one by one)."""
    blocks = encoder.blocks
    if not blocks or not _uniform(blocks):
        return None
    function = _block_function(encoder)
    for b in blocks:
        x = function([v.value for v in b.variables], x)
    return x
