"""Differential attention (Ye et al., 2024, "Differential Transformer"; timm's `DiffAttention`, in its `dwee` and
`dlittle` ViTs): each head attends twice, with two halves of its query and key width, and takes the difference
of the two softmax maps, softmax(q1 k1^T / s) - lambda softmax(q2 k2^T / s), which cancels attention that both
maps spread alike (noise) and keeps what only the first one finds.

Per head of width d (D / heads): the queries and keys are 2 x heads heads of width d / 2 (consecutive pairs belong
to one head), the values heads of width d. lambda = exp(lambda_q1 . lambda_k1) - exp(lambda_q2 . lambda_k2) +
lambda_init, with four learned (d / 2,) vectors and lambda_init = 0.8 - 0.6 exp(-0.3 l) for the block at depth
l (from 0): a constant of each block, kept in its config. Each head's output is RMS-normalised (epsilon 1e-5, a
learned scale) and multiplied by (1 - lambda_init) before the output projection.
"""

from __future__ import annotations

import math

import keras
from keras import ops

from keras_vit.nn.initializers import PACKAGE, initial, xavier_uniform
from keras_vit.nn.rms_norm import RMSNorm
from keras_vit.nn.attention import MultiHeadDotProductAttention
from keras_vit.nn.projection import Projection


def lambda_init(depth: int) -> float:
    """The paper's lambda_init for the block at `depth` (counted from 0)."""
    return 0.8 - 0.6 * math.exp(-0.3 * depth)


@keras.saving.register_keras_serializable(package=PACKAGE)
class DifferentialAttention(MultiHeadDotProductAttention):
    """`MultiHeadDotProductAttention` with differential attention (see the module docstring). Weights beyond the
    paper's projections: `lambda_q1`, `lambda_k1`, `lambda_q2`, `lambda_k2` and `sub_norm` (RMSNorm's `scale`).
    The query and key kernels are (D, 2 * heads, D / heads / 2). Rotary embeddings, qk-norm and grouped-query
    attention are not combined with it (no model does). With `return_attention=True` it also returns each head's
    differential map (batch, heads, tokens, tokens), whose entries can be negative."""

    def __init__(self, num_heads: int, dropout_rate: float = 0.0, depth: int = 0, **kwargs):
        super().__init__(num_heads, dropout_rate, **kwargs)
        self.depth = int(depth)
        self.lambda_init = lambda_init(self.depth)
        if self.qk_norm or self.num_key_value_heads != self.num_heads or self.mixed_rotary_temperature is not None:
            raise ValueError(
                "Differential attention with qk_norm, grouped-query attention or RoPE-Mixed: no model "
                "combines them, and keras_vit does not build it."
            )
        self.sub_norm = RMSNorm(epsilon=1e-5, dtype=self.dtype_policy, name="sub_norm")

    def build(self, input_shape):
        d = input_shape[-1]
        h = self.num_heads
        if d % (2 * h):
            raise ValueError(
                f"hidden_size {d} is not divisible by twice num_heads {h} (differential attention "
                "splits each head's queries and keys in two)."
            )
        dh = d // h
        self.head_dim = dh
        init = xavier_uniform(d, d)
        for name, heads, width in (("query", 2 * h, dh // 2), ("key", 2 * h, dh // 2), ("value", h, dh)):
            layer = Projection(
                "btd,dhk->bthk",
                output_shape=(None, heads, width),
                bias_axes="hk" if self.qkv_bias and (name != "key" or self.key_bias) else None,
                input_axes=1,
                kernel_initializer=init,
                dtype=self.dtype_policy,
                name=name,
            )
            layer.build(tuple(input_shape))
            setattr(self, name, layer)
        self.out = Projection(
            "bthk,hkd->btd",
            output_shape=(None, d),
            bias_axes="d" if self.projection_bias else None,
            input_axes=2,
            kernel_initializer=init,
            dtype=self.dtype_policy,
            name="out",
        )
        self.out.build(tuple(input_shape[:-1]) + (h, dh))
        start = initial(keras.initializers.RandomNormal(stddev=0.1))
        for name in ("lambda_q1", "lambda_k1", "lambda_q2", "lambda_k2"):
            setattr(self, name, self.add_weight(name=name, shape=(dh // 2,), initializer=start))
        self.sub_norm.build(tuple(input_shape[:-1]) + (h, dh))
        if self.attention_norm is not None:
            self.attention_norm.build(tuple(input_shape))
        self.rotation, self.rotary_frequencies = None, None

    def _lambda(self):
        """lambda (a float32 scalar) from the four learned vectors."""
        dot = [
            ops.sum(ops.cast(a, "float32") * ops.cast(b, "float32"))
            for a, b in ((self.lambda_q1, self.lambda_k1), (self.lambda_q2, self.lambda_k2))
        ]
        return ops.exp(dot[0]) - ops.exp(dot[1]) + self.lambda_init

    def call(self, x, rotary=None, training=None, return_attention=False, norm=None):
        if rotary is not None:
            raise ValueError("Differential attention takes no rotary embeddings (keras_vit does not build both).")
        q, k, v = self._queries_keys_values(x, norm, training)
        b, t, h = ops.shape(x)[0], ops.shape(x)[1], self.num_heads
        scale = ops.cast(1.0 / math.sqrt(self.head_dim // 2), q.dtype)
        probs = ops.softmax(ops.cast(ops.einsum("bqhd,bkhd->bhqk", q * scale, k), "float32"), axis=-1)
        probs = self.dropout(probs, training=training)
        pairs = ops.reshape(probs, (b, h, 2, t, t))
        attention = pairs[:, :, 0] - self._lambda() * pairs[:, :, 1]
        y = ops.einsum("bhqk,bkhd->bqhd", ops.cast(attention, v.dtype), v)
        y = self.sub_norm(y) * ops.cast(1.0 - self.lambda_init, y.dtype)
        y = self._project(y, x)
        return (y, attention) if return_attention else y

    def get_config(self):
        return {**super().get_config(), "depth": self.depth}
