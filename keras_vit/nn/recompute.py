"""A zero that exists only once the backward pass has begun: what keeps a recomputation out of the forward pass.

A custom gradient that recomputes an activation (the attention probabilities, the MLP's activation) saves
memory only if the recomputation runs during the backward pass. XLA's scheduler is free to run any
instruction as soon as its operands exist; a recomputation whose operands are all forward-pass tensors
(q and k, the MLP's hidden input) may run during the forward pass, and then every block's recomputed tensor
is live at the peak, as the kept one was. TensorFlow's XLA scheduler does exactly that (docs/benchmarks-history.md,
"Training memory"). Adding `zero_after(upstream)` to one operand makes the recomputation depend on the
upstream gradient, which exists only when the backward pass reaches the block, as TensorFlow's own
`recompute_grad` orders its recomputation. The zero is computed from one element, so it costs nothing, and
it is an exact zero for every finite or infinite operand it is added to (NaN stays NaN).
"""

from __future__ import annotations

import keras
from keras import ops

# The backends whose training calls take the recomputing backward passes (`keras_vit.nn.attention_core`,
# `keras_vit.nn.mlp_core`); PyTorch keeps Keras' own differentiation.
BACKENDS = ("tensorflow", "jax")


def applies(training) -> bool:
    """Whether a call with this `training` flag takes the recomputing backward passes on this backend."""
    return bool(training) and keras.backend.backend() in BACKENDS


def zero_after(upstream, dtype: str):
    """A (1,)-shaped exact zero of `dtype` computed from `upstream`'s first element. `isnan` gives 0 or 1 and
    either times zero is zero, so no value of `upstream` leaks in; XLA does not fold x * 0 for floats, so
    the dependence survives its simplifier."""
    first = ops.reshape(upstream, (-1,))[:1]
    return ops.cast(ops.isnan(first), dtype) * ops.cast(0.0, dtype)
