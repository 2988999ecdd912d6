"""The encoder's blocks through one compiled block function for inference calls (`model(x)`, and on JAX
inside traces too).

Called outside any trace, TensorFlow dispatches every op of a block from Python, and JAX compiles and
dispatches every primitive on its own: a call costs about twice its arithmetic, and JAX's first call compiles
every primitive. All blocks of an encoder have the same
structure, so one function, traced once on the first block with the block's weights as inputs, serves all of
them: a `tf.function` on TensorFlow (Grappler fuses its ops, C++ runs them), a `jax.jit` on JAX (one XLA
program). Every later model of the same structure in the process reuses it, with no trace or compilation
(the cache holds the traced block weakly); the measurements are in docs/benchmarks-history.md, "Cold start". PyTorch runs
eagerly by design and is left as it is.

On JAX the function also serves inference inside a trace (`jax.jit`, `predict`, `jax.eval_shape`): a nested
`jax.jit` is traced once for every block of the same input type and XLA inlines its calls, so tracing a
ViT-B/16 for inference costs one block's trace (0.07–0.12 s against 0.20–0.30 s for all twelve).

Only inference takes this path (`training` false, no attention maps asked for; on TensorFlow not inside a
trace: `predict`, `fit`, `tf.function` and the exporters trace the whole model as before), and only where
every block has the first block's variables, path for path, shape for shape and dtype for dtype (a model with
LoRA or int8 in some blocks only runs block by block, as before). On TensorFlow gradients flow through it (a
`GradientTape` sees the variables read and the function's gradient); on JAX a nested `jax.jit` is
differentiable like any other function.

On TensorFlow the function keeps exact shapes (no `reduce_retracing`): each input shape gets its own trace
(about 0.05 s for a block), so a call's result never depends on which shapes earlier calls in the process had.
With relaxed shapes, a call after other batch sizes ran a generalised graph that Grappler optimises differently:
the same input then gave outputs one float32 step apart on two models of the same weights.
"""

from __future__ import annotations

import re
import weakref
from typing import Callable, Dict, List, Optional, Tuple

import keras

from keras_vit.utils.eager import tensorflow_eager
from keras_vit.nn.attention import MultiHeadDotProductAttention

# (block structure) -> (compiled block function, [weak reference to the block it traces]). One function per
# structure, shared by every model of that structure, so a second model pays no trace (and on JAX no compile).
# The reference is the calling model's first block, set before every call: the cache keeps no model alive.
_FUNCTIONS: Dict[tuple, Tuple[Callable, list]] = {}


def applies() -> bool:
    """Whether an inference call of the encoder goes through the one block function: on TensorFlow outside any
    trace; on JAX always. Inside a JAX trace (`jax.jit`, `predict`, `jax.eval_shape`) the jitted block is a
    nested call: JAX traces it once for all blocks of the same input type, so tracing a ViT-B/16 for inference
    costs one block's trace instead of twelve, and XLA inlines the calls (the same program)."""
    backend = keras.backend.backend()
    return tensorflow_eager() if backend == "tensorflow" else backend == "jax"


def _signature(block) -> List[Tuple[str, tuple, str]]:
    """(path below the block, shape, dtype) of each of the block's variables, in order. Numeric suffixes are
    dropped from the path: Keras numbers its seed generators across the whole model."""
    prefix = block.name + "/"
    return [(re.sub(r"_\d+(?=/|$)", "", v.path.split(prefix, 1)[-1]), tuple(v.shape), v.dtype) for v in block.variables]


# Layer attributes that do not change what an inference call computes: names and paths (they differ from block
# to block), Keras' build and tracking state, and the training-only rates (the function runs training=False).
_NOT_COMPUTED = {"name", "built", "trainable"}


def _settings(layer) -> tuple:
    """Every plain setting `layer` keeps (numbers, strings, booleans, None and tuples of them), whatever its class
    calls it: epsilon, heads, activation, LoRA's rank and alpha, and any setting a later part adds. Derived from
    the layer itself rather than listed by hand, so a setting outside `computation()` cannot be missed."""
    plain = (bool, int, float, str, type(None))
    return tuple(
        (k, v)
        for k, v in sorted(vars(layer).items())
        if not k.startswith("_")
        and k not in _NOT_COMPUTED
        and not k.endswith("_rate")
        and (isinstance(v, plain) or (isinstance(v, tuple) and all(isinstance(i, plain) for i in v)))
    )


def _structure(block) -> tuple:
    """What the block computes from (weights, x): its class, `computation()` config, every sublayer's class,
    dtype policy and settings (`_settings`), its variables' signature and the attention path. (Not `get_config`:
    Keras' serialisation of the dtype policy imports TensorFlow, seconds on the JAX backend.)"""
    return (
        type(block),
        tuple(sorted(block.computation().items())),
        tuple((type(layer), layer.dtype_policy.name, _settings(layer)) for layer in block._flatten_layers()),
        tuple(_signature(block)),
        bool(MultiHeadDotProductAttention.FUSED),
    )


def _uniform(blocks) -> Optional[tuple]:
    """The structure every block shares, or None where they differ (LoRA or int8 on some blocks only)."""
    structures = {_structure(b) for b in blocks}
    return structures.pop() if len(structures) == 1 else None


def _block_function(template_block, key: tuple) -> Callable:
    """`f(values, x, rotary)`: a block of structure `key` (`template_block`'s) applied to `x` with `values` as
    its weights (and the rotary table, or None)."""
    if key not in _FUNCTIONS:
        reference = [None]

        def block(values, x, rotary):
            template = reference[0]()
            with keras.StatelessScope(state_mapping=list(zip(template.variables, values))):
                return template(x, rotary=rotary, training=False)

        if keras.backend.backend() == "tensorflow":
            import tensorflow as tf

            function = tf.function(block, autograph=False)  # exact shapes: see the module docstring
        else:
            import jax

            function = jax.jit(block)
        _FUNCTIONS[key] = (function, reference)
    function, reference = _FUNCTIONS[key]
    reference[0] = weakref.ref(template_block)  # traced from this block if the call traces
    return function


def run_blocks(encoder: "keras.layers.Layer", x: object, rotary: object = None) -> Optional[object]:
    """`x` through every block of `encoder` by its one compiled block function (with the rotary table, if any);
    None where the blocks differ in structure (the caller then runs them one by one)."""
    blocks = encoder.blocks
    key = _uniform(blocks) if blocks else None
    if key is None:
        return None
    function = _block_function(blocks[0], key)
    for b in blocks:
        x = function([v.value for v in b.variables], x, rotary)
    return x
