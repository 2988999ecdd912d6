"""`x @ kernel + bias` as one product on PyTorch, as `torch.nn.Linear` computes it.

PyTorch runs what it is given op by op: a matrix product followed by a bias addition is two kernels, the second one
more pass over the product's output, a (tokens, 4 D) tensor after a ViT's first MLP product, and both outputs exist
at once. `torch.addmm` starts the product's output from the bias and lets the GEMM accumulate onto it: one kernel,
what `torch.nn.Linear` (and so timm) runs (docs/benchmarks-history.md, "the bias in the product").

TensorFlow and JAX keep the two operations (`dense_affine` calls the layer itself there): XLA fuses the addition
into the product, and the graphs, exports and custom gradients built on them stay as they were.

The sum is the same; only its rounding order differs (the bias is added first).
"""

from __future__ import annotations

import keras
from keras import ops


def affine(x, kernel, bias):
    """`x (..., n) @ kernel (n, m) + bias (m,)` in `x`'s dtype (kernel and bias cast to it); `bias` None: the
    product alone. `x` is a backend tensor, as a layer's call receives it."""
    kernel = ops.cast(kernel, x.dtype)
    if bias is None:
        return ops.matmul(x, kernel)
    bias = ops.cast(bias, x.dtype)
    if keras.backend.backend() != "torch":
        return ops.matmul(x, kernel) + bias
    import torch

    rows = torch.reshape(x, (-1, x.shape[-1]))
    return torch.reshape(torch.addmm(bias, rows, kernel), (*x.shape[:-1], kernel.shape[-1]))


def dense_affine(dense: keras.layers.Dense, x):
    """`dense(x)`; on PyTorch, for a float `Dense` with no activation (LoRA included: its `kernel` is the adapted
    one), through `affine`. Elsewhere, and for int8 kernels or an activation, the layer is called as itself."""
    plain = dense.quantization_mode is None and dense.activation in (None, keras.activations.linear)
    if keras.backend.backend() != "torch" or not plain:
        return dense(x)
    return affine(x, dense.kernel, dense.bias)
