"""A pre-norm block's LayerNorm and the product that reads it, for training: the backward pass keeps the norm's
input, not its output.

Differentiated as written, `LN(x) @ W` keeps LN(x) of every block from the forward pass to the backward pass, for
the kernel's gradient LN(x)^T dz. The norm's own backward needs only `x` (the residual stream, which the block keeps
anyway) and the statistics of each row. Here the backward pass recomputes LN(x) from `x`, one elementwise pass, so
each of a block's two norms keeps nothing of its own: 24 x 4.8 MB less for a ViT-S/16 at batch 16
(docs/benchmarks-history.md, "The LayerNorms keep their input only"). The products that read a norm are the fused
q/k/v matmul, the MLP's `Dense_0`, and SwiGLU's two input kernels side by side.

The forward value is the layer's own (`LayerNorm.normalize`), and so is the norm the backward pass recomputes for
the kernel's gradient. The backward pass takes LayerNorm's derivative in closed form, with x_hat = (x - mean) /
sigma and g = dy * gamma:
d_gamma = sum(dy * x_hat), d_beta = sum(dy), d_x = (g - mean(g) - x_hat mean(g * x_hat)) / sigma, the row
statistics taken in two passes and in float32 at least. As in `keras_vit.nn.mlp_core`, the recomputation waits
for the upstream gradient (`keras_vit.nn.recompute.zero_after`).
"""

from __future__ import annotations

from typing import Optional

import keras
from keras import ops

from keras_vit.nn.layer_norm import LayerNorm
from keras_vit.nn.recompute import applies as recomputes
from keras_vit.nn.recompute import zero_after


def fuses(norm: Optional[keras.layers.Layer], training: Optional[bool], inputs) -> bool:
    """Whether a training call takes `normed_matmul` for `norm` (None: no norm, False) and a float kernel (the
    caller's own check: not quantized; LoRA's kernel is one float matrix): training on TensorFlow or JAX, the plain
    LayerNorm (not RMSNorm, last axis, centred and scaled) and inputs already in the norm's compute dtype."""
    return (
        norm is not None
        and recomputes(training)
        and isinstance(norm, LayerNorm)
        and norm.plain(inputs)
        and keras.backend.standardize_dtype(inputs.dtype) == norm.compute_dtype
    )


def normed_matmul(x, norm: LayerNorm, kernel):
    """`norm(x) @ kernel` over (..., D) `x` and a (D, N) `kernel` in `x`'s dtype, differentiable in `x`, the norm's
    scale and offset, and `kernel`; its backward pass keeps `x`, not `norm(x)`."""
    shape = ops.shape(x)
    gamma, beta = (ops.cast(w, w.dtype) for w in (norm.gamma, norm.beta))  # tensors: read outside the gradient

    @ops.custom_gradient
    def core(x, gamma, beta, kernel):
        z = ops.matmul(norm.normalize(x, gamma, beta), kernel)

        def grad(*args, upstream=None):
            d_z = args[0] if upstream is None else upstream
            wide = keras.backend.result_type(x.dtype, "float32")  # bfloat16 / float16: float32 statistics
            d_z2 = ops.reshape(d_z, (-1, ops.shape(kernel)[1]))
            d_y = ops.einsum("nm,dm->nd", d_z2, kernel)
            x2 = ops.reshape(ops.cast(x, wide), (-1, shape[-1])) + zero_after(d_y, wide)
            # the norm recomputed by the layer's own formula, so that the kernel's gradient is autodiff's exactly
            y = ops.cast(norm.normalize(x2, gamma, beta), x.dtype)
            d_kernel = ops.einsum("nd,nm->dm", y, d_z2)  # dot dimensions, no transposed copies
            mean = ops.mean(x2, axis=-1, keepdims=True)
            centred = x2 - mean
            inverse_sigma = ops.rsqrt(ops.mean(ops.square(centred), axis=-1, keepdims=True) + norm.epsilon)
            x_hat = centred * inverse_sigma
            d_y = ops.cast(d_y, wide)
            g = d_y * ops.cast(gamma, wide)
            d_x = inverse_sigma * (
                g - ops.mean(g, axis=-1, keepdims=True) - x_hat * ops.mean(g * x_hat, axis=-1, keepdims=True)
            )
            d_gamma = ops.sum(d_y * x_hat, axis=0)
            d_beta = ops.sum(d_y, axis=0)
            return (
                ops.cast(ops.reshape(d_x, shape), x.dtype),
                ops.cast(d_gamma, gamma.dtype),
                ops.cast(d_beta, beta.dtype),
                ops.cast(d_kernel, kernel.dtype),
            )

        return z, grad

    return core(x, gamma, beta, kernel)
