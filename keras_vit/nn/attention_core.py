"""The attention core for training: softmax(q k^T) v, whose backward pass recomputes the probabilities.

Differentiated as written, softmax attention keeps each block's (batch, heads, tokens, tokens) probabilities
from the forward pass to the backward pass: 12 x 29.8 MB for a ViT-B/16 at batch 16, and XLA's CPU code for
`keras.ops.dot_product_attention` keeps them too. Here the backward pass recomputes them from q and k, as
the flash-attention paper's backward does (without its tiling): the forward keeps each row's log-sum-exp, so
the recomputation is one product and one exponential. The softmax's Jacobian takes the row sums of d_p * p
from the recomputed probabilities, not flash attention's sum of d_out * out, so the output is not kept either
(one (batch, heads, tokens, head_dim) tensor per block: the projection keeps its own transposed copy). The extra
work is one (tokens x tokens) product per head.

The backward pass reads q, k and v again only once the upstream gradient exists
(`keras_vit.nn.recompute.zero_after`). Without that, TensorFlow's XLA ran every block's recomputation as soon
as q and k existed, so all twelve recomputed probability tensors were live at the peak; and reading q, k and v
through their forward-pass transposed copies kept those copies alive beside the fused q/k/v output. With it,
TensorFlow and JAX take this core in every training call, smaller and no slower than the plain formula
(docs/benchmarks-history.md, "Training memory"). PyTorch's backend keeps Keras' own differentiation. Softmax is taken in
float32 as in `MultiHeadDotProductAttention`.
"""

from __future__ import annotations

import keras
from keras import ops

from keras_vit.nn.recompute import BACKENDS, zero_after


def causal_bias(tokens):
    """(tokens, tokens) float32: 0 where key j <= query i, -inf above the diagonal (a causal mask, added to the
    logits; every row keeps its diagonal, so no row is all -inf)."""
    i = ops.arange(tokens)
    return ops.where(i[None, :] > i[:, None], float("-inf"), 0.0)


def attention(q, k, v, causal: bool = False):
    """softmax(q k^T) v over (batch, tokens, heads, head_dim) inputs, `q` already scaled, differentiated as
    written (it keeps the probabilities for the backward pass); `causal`: query i sees keys 0..i."""
    logits = ops.cast(ops.einsum("bqhd,bkhd->bhqk", q, k), "float32")
    probs = ops.softmax(logits + causal_bias(ops.shape(q)[1]) if causal else logits, axis=-1)
    return ops.einsum("bhqk,bkhd->bqhd", ops.cast(probs, v.dtype), v)


def recomputed_attention(q, k, v, causal: bool = False):
    """`attention` whose backward pass recomputes the probabilities instead of keeping them: the custom
    gradient below on TensorFlow and JAX (see the module docstring); the plain formula elsewhere."""
    if keras.backend.backend() in BACKENDS:
        return (causal_attention_core if causal else attention_core)(q, k, v)
    return attention(q, k, v, causal)


@ops.custom_gradient
def attention_core(q, k, v):
    """softmax(q k^T) v over (batch, tokens, heads, head_dim) inputs, `q` already scaled; returns
    (batch, tokens, heads, head_dim). Its gradient keeps q, k, v and each row's log-sum-exp (batch x heads x
    tokens numbers) only (see the module docstring)."""
    return _core(q, k, v, False)


@ops.custom_gradient
def causal_attention_core(q, k, v):
    """`attention_core` with a causal mask: query i sees keys 0..i (its probabilities above the diagonal are 0
    in the forward pass and in the recomputation)."""
    return _core(q, k, v, True)


def _core(q, k, v, causal: bool):
    """The forward pass and gradient function of `attention_core` / `causal_attention_core`."""
    bias = causal_bias(ops.shape(q)[1]) if causal else 0.0
    logits = ops.cast(ops.einsum("bqhd,bkhd->bhqk", q, k), "float32") + bias
    row_max = ops.max(logits, axis=-1, keepdims=True)
    e = ops.exp(logits - row_max)
    row_sum = ops.sum(e, axis=-1, keepdims=True)
    out = ops.einsum("bhqk,bkhd->bqhd", ops.cast(e / row_sum, v.dtype), v)
    log_sum_exp = row_max + ops.log(row_sum)

    def grad(*args, upstream=None):
        d_out = ops.cast(args[0] if upstream is None else upstream, v.dtype)
        # q, k and v read again once the upstream gradient exists (`zero_after`): XLA then neither runs the
        # recomputation in the forward pass nor keeps the forward's transposed copies of q, k and v for it
        zero = zero_after(d_out, q.dtype)
        q2, k2, v2 = q + zero, k + zero, v + zero
        # the probabilities as exp(s - log-sum-exp): one exponential, no row reductions again
        p = ops.exp(ops.cast(ops.einsum("bqhd,bkhd->bhqk", q2, k2), "float32") + bias - log_sum_exp)
        d_v = ops.einsum("bhqk,bqhd->bkhd", ops.cast(p, v.dtype), d_out)
        d_p = ops.cast(ops.einsum("bqhd,bkhd->bhqk", d_out, v2), "float32")
        # softmax's Jacobian row by row, with the row sums of d_p p (the flash-attention backward's D, which it
        # takes as sum_d d_out out to avoid the probabilities; here they exist, and the output is not kept)
        d_logits = p * (d_p - ops.sum(p * d_p, axis=-1, keepdims=True))
        d_q = ops.einsum("bhqk,bkhd->bqhd", ops.cast(d_logits, k.dtype), k2)
        d_k = ops.einsum("bhqk,bqhd->bkhd", ops.cast(d_logits, q.dtype), q2)
        return ops.cast(d_q, q.dtype), ops.cast(d_k, k.dtype), ops.cast(d_v, v.dtype)

    return out, grad
