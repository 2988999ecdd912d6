"""The attention core for training: softmax(q k^T) v, whose backward pass recomputes the probabilities.

Differentiated as written, softmax attention keeps each block's (batch, heads, tokens, tokens) probabilities
from the forward pass to the backward pass: 12 x 29.8 MB for a ViT-B/16 at batch 16, and XLA's CPU code for
`keras.ops.dot_product_attention` keeps them too. Here the backward pass recomputes them from q and k, which
the projections' gradients keep anyway (the flash-attention paper's backward, without its tiling): the
compiled JAX step of a ViT-B/16 at batch 16 needs 2.84 instead of 3.58 GB of temporaries, at the same speed
(BENCHMARKS.md, "Training memory"). The extra work is one (tokens x tokens) product per head.

On TensorFlow the same custom gradient does not help: XLA's scheduler runs every block's recomputation as
soon as q and k exist, so all twelve recomputed probability tensors are live at the peak. There
`recomputed_attention` takes `keras.remat` (TensorFlow's `recompute_grad`), whose recomputation waits for
the upstream gradient: ViT-B/16 at batch 16 peaks 0.35 GB lower, but at 0.96x the speed, so TensorFlow
takes it only in blocks built with `remat="attention"` (BENCHMARKS.md, "Training memory"). PyTorch's
backend keeps Keras' own differentiation. Softmax is taken in float32 as in `MultiHeadDotProductAttention`.
"""

from __future__ import annotations

import keras
from keras import ops


def attention(q, k, v):
    """softmax(q k^T) v over (batch, tokens, heads, head_dim) inputs, `q` already scaled, differentiated as
    written (it keeps the probabilities for the backward pass)."""
    probs = ops.softmax(ops.cast(ops.einsum("bqhd,bkhd->bhqk", q, k), "float32"), axis=-1)
    return ops.einsum("bhqk,bkhd->bqhd", ops.cast(probs, v.dtype), v)


def recomputed_attention(q, k, v):
    """`attention` whose backward pass recomputes the probabilities instead of keeping them: the custom
    gradient below on JAX, `keras.remat` on TensorFlow (see the module docstring); the plain formula elsewhere."""
    backend = keras.backend.backend()
    if backend == "jax":
        return attention_core(q, k, v)
    if backend == "tensorflow":
        return keras.remat(attention)(q, k, v)
    return attention(q, k, v)


@ops.custom_gradient
def attention_core(q, k, v):
    """softmax(q k^T) v over (batch, tokens, heads, head_dim) inputs, `q` already scaled; returns
    (batch, tokens, heads, head_dim). Its gradient keeps q, k and v only (see the module docstring)."""
    out = attention(q, k, v)

    def grad(*args, upstream=None):
        d_out = ops.cast(args[0] if upstream is None else upstream, v.dtype)
        # the probabilities by another route than the forward's (k q^T, exp(s - max) / sum): the same
        # instructions would let XLA's common-subexpression pass keep the forward's copy alive instead
        logits = ops.cast(ops.einsum("bkhd,bqhd->bhqk", k, q), "float32")
        e = ops.exp(logits - ops.max(logits, axis=-1, keepdims=True))
        p = e / ops.sum(e, axis=-1, keepdims=True)
        d_v = ops.einsum("bhqk,bqhd->bkhd", ops.cast(p, v.dtype), d_out)
        d_p = ops.cast(ops.einsum("bqhd,bkhd->bhqk", d_out, v), "float32")
        d_logits = p * (d_p - ops.sum(d_p * p, axis=-1, keepdims=True))  # softmax's Jacobian, row by row
        d_q = ops.einsum("bhqk,bkhd->bqhd", ops.cast(d_logits, k.dtype), k)
        d_k = ops.einsum("bhqk,bqhd->bkhd", ops.cast(d_logits, q.dtype), q)
        return ops.cast(d_q, q.dtype), ops.cast(d_k, k.dtype), ops.cast(d_v, v.dtype)

    return out, grad
