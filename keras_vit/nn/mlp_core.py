"""The MLP's activation and second Dense for training, whose backward pass keeps only the activation's input.

Differentiated as written, `Dense_1(act(h))` keeps two (batch, tokens, mlp_dim) tensors of every block from
the forward pass to the backward pass: `h` (for the activation's derivative) and `act(h)` (for the kernel's
gradient, act(h)^T dy). PyTorch keeps both as well. Here the backward pass recomputes `act(h)` from `h`, one
elementwise pass, so each block keeps one: 12 x 38.7 MB less for a ViT-B/16 at batch 16 (docs/benchmarks-history.md,
"Training memory").

The recomputation waits for the upstream gradient (`keras_vit.nn.recompute.zero_after`): needing only `h`,
XLA would otherwise run it during the forward pass, where it would be live at the peak and save nothing.
"""

from __future__ import annotations

import math

import keras
from keras import ops

from keras_vit.nn.recompute import zero_after

ACTIVATIONS = ("gelu_tanh", "gelu", "quick_gelu")
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_INV_SQRT_2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_QUICK = 1.702


def exact_gelu(x):
    """The exact GELU x Phi(x), written with `erf` itself: TensorFlow's own exact GELU lowers to `Erfc`, which
    the ONNX converter cannot express. On PyTorch, which runs each op as written, it is the backend's own exact
    GELU: one native kernel instead of five passes over a (tokens, mlp_dim) tensor (the same erf formula)."""
    if keras.backend.backend() == "torch":
        return ops.gelu(x, approximate=False)
    return 0.5 * x * (1.0 + ops.erf(x * ops.cast(_INV_SQRT_2, x.dtype)))


def quick_gelu(x):
    """OpenAI CLIP's quick GELU, x sigmoid(1.702 x)."""
    return x * ops.sigmoid(ops.cast(_QUICK, x.dtype) * x)


def _known(activation: str) -> str:
    if activation not in ACTIVATIONS:
        raise ValueError(f"Unknown activation {activation!r}; expected one of {ACTIVATIONS}.")
    return activation


def sigmoid_2u(x):
    """sigmoid(2u) = 0.5 (1 + tanh u), u = sqrt(2/pi) (x + 0.044715 x^3), with x^3 as products: the tanh GELU's
    gate, shared by its eager form and its derivative."""
    two_c = 2.0 * _SQRT_2_OVER_PI
    return ops.sigmoid(x * (two_c + (two_c * 0.044715) * (x * x)))


def value(z, activation: str):
    """act(z) for one of `ACTIVATIONS` by name, in the forms `MlpBlock`'s compiled forward pass uses."""
    if _known(activation) == "gelu_tanh":
        return ops.gelu(z, approximate=True)
    return exact_gelu(z) if activation == "gelu" else quick_gelu(z)


def slope(z, activation: str):
    """d act(z) / dz in closed form: tanh GELU s + 2 c z s (1 - s)(1 + 3a z^2) with s = sigmoid(2u); exact GELU
    Phi(z) + z phi(z); quick GELU s + 1.702 z s (1 - s) with s = sigmoid(1.702 z)."""
    return value_and_slope(z, activation)[1]


def value_and_slope(z, activation: str):
    """(act(z), d act(z) / dz), sharing the one transcendental each needs: for the tanh GELU act = z s with
    s = sigmoid(2u), which equals `value`'s tanh form to float rounding (see `slope` for the derivatives)."""
    if _known(activation) == "gelu_tanh":
        s = sigmoid_2u(z)
        return z * s, s + 2.0 * _SQRT_2_OVER_PI * z * s * (1.0 - s) * (1.0 + 3.0 * 0.044715 * z * z)
    if activation == "gelu":
        phi = 0.5 * (1.0 + ops.erf(z * _INV_SQRT_2))
        return z * phi, phi + z * _INV_SQRT_2PI * ops.exp(-0.5 * z * z)
    s = ops.sigmoid(_QUICK * z)
    return z * s, s + _QUICK * z * s * (1.0 - s)


def activated_dense(h, kernel, bias, activation: str):
    """act(h) @ kernel + bias over (..., mlp_dim) `h`, `kernel` (mlp_dim, D) and `bias` (D,) already in `h`'s
    dtype, differentiable in all three; its backward pass keeps `h` and `kernel`, not act(h)."""

    @ops.custom_gradient
    def core(h, kernel, bias):
        y = ops.matmul(value(h, activation), kernel) + bias

        def grad(*args, upstream=None):
            d_y = args[0] if upstream is None else upstream
            wide = keras.backend.result_type(h.dtype, "float32")  # bfloat16 / float16: float32 arithmetic
            d_y2 = ops.reshape(d_y, (-1, ops.shape(kernel)[1]))
            d_a = ops.einsum("nd,md->nm", d_y2, kernel)
            z = ops.cast(h, wide) + zero_after(d_a, wide)
            a, da_dh = value_and_slope(z, activation)
            a = ops.reshape(ops.cast(a, h.dtype), (-1, ops.shape(kernel)[0]))
            d_kernel = ops.einsum("nm,nd->md", a, d_y2)  # dot dimensions, no transposed copies
            d_bias = ops.sum(d_y2, axis=0)
            d_h = ops.cast(ops.cast(ops.reshape(d_a, ops.shape(h)), wide) * da_dh, h.dtype)
            return d_h, ops.cast(d_kernel, kernel.dtype), ops.cast(d_bias, bias.dtype)

        return y, grad

    return core(h, kernel, bias)
