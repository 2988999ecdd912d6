"""Multi-head dot-product self-attention (paper eq. 2), with the official checkpoints' kernel layout."""

from __future__ import annotations

import math
from typing import Optional

import keras
import numpy as np
from keras import ops

from keras_vit.nn.initializers import PACKAGE, initial, xavier_uniform
from keras_vit.nn.rms_norm import normalization
from keras_vit.nn.rotary import apply_mixed_rotary, apply_rotary, mixed_frequencies, rotation_matrix
from keras_vit.nn.specs import ArraySpecs
from keras_vit.nn.affine import affine
from keras_vit.nn.attention_core import causal_bias, recomputed_attention
from keras_vit.nn.norm_core import fuses, normed_matmul
from keras_vit.nn.projection import Projection
from keras_vit.nn.recompute import applies as recomputes


@keras.saving.register_keras_serializable(package=PACKAGE)
class MultiHeadDotProductAttention(ArraySpecs, keras.layers.Layer):
    """Self-attention with the official kernel layout, its projections in Keras `EinsumDense` layers.

    `query` / `key` / `value`: kernel (D, heads, D/heads), bias (heads, D/heads); `out`: kernel
    (heads, D/heads, D), bias (D) -- the checkpoint's own shapes and names, in `EinsumDense` layers that
    `model.quantize("int8")` knows (`keras_vit.nn.projection.Projection`, whose LoRA is the paper's). In float,
    the three input projections run as one fused matmul over their kernels; once quantized, each projection
    runs as Keras' int8 layer. Softmax is computed in float32 (mixed precision safe). Unless the caller asks
    for the probabilities (or attention dropout is active), the scores go through
    `keras.ops.dot_product_attention` (the backend's fused kernel, flash where the device has it) where that
    was measured faster (`FUSED`; docs/benchmarks-history.md). While training on TensorFlow or JAX (unless `FUSED` is
    True), the core is `recomputed_attention` instead, whose backward pass recomputes the probabilities
    rather than keeping them: smaller, and as fast or faster (docs/benchmarks-history.md, "Training memory").

    Called with a `rotary` table (`keras_vit.nn.rotary`), queries and keys are rotated after qk-norm, channels
    paired per `rotate_half`. `output_norm`: a LayerNorm over the heads' concatenated output before `out`
    (EVA-CLIP's, timm's `scale_attn_inner`). `key_bias=False`: query and value biases only (EVA's; a bias
    shared by every key cancels in the softmax, so none is trained). `causal=True`: token i attends to tokens
    0..i only (CLIP's text tower reads the sentence left to right). Called with a `norm` layer (a pre-norm
    block's LayerNorm), the layer attends over `norm(x)`; training calls then take the norm and the input
    projections as one function whose backward pass keeps `x` only (`keras_vit.nn.norm_core`).
    """

    # Measured (docs/benchmarks-history.md, ViT-S/16 batch 16): the fused path is 1.26x (inference) / 1.05x
    # (training) on JAX, 1.01-1.14x (inference) / 1.02-1.04x (training) on PyTorch, whose CPU kernel is its flash
    # attention, and 0.98x on TensorFlow, so it is the default on JAX and PyTorch (for inference on JAX: training on
    # TF and JAX takes attention_core, smaller and no slower, docs/benchmarks-history.md "Training memory");
    # None = per backend, True/False = forced (with False, training still takes attention_core; True takes
    # dot_product_attention there too).
    FUSED = None
    FUSED_BACKENDS = ("jax", "torch")
    PROJECTIONS = ("query", "key", "value", "out")

    def __init__(
        self,
        num_heads: int,
        dropout_rate: float = 0.0,
        qk_norm: bool = False,
        qkv_bias: bool = True,
        layer_norm_epsilon: float = 1e-6,
        rotate_half: bool = False,
        output_norm: bool = False,
        key_bias: bool = True,
        mixed_rotary_temperature: Optional[float] = None,
        rms_norm: bool = False,
        projection_bias: bool = True,
        num_key_value_heads: Optional[int] = None,
        causal: bool = False,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.num_heads, self.causal = int(num_heads), bool(causal)
        self.rotate_half, self.output_norm = bool(rotate_half), bool(output_norm)
        self.key_bias = bool(key_bias) and bool(qkv_bias)  # EVA: query and value biases only
        self.rms_norm, self.projection_bias = bool(rms_norm), bool(projection_bias)  # AIMv2: RMSNorm, no out bias
        self.num_key_value_heads = self.num_heads if num_key_value_heads is None else int(num_key_value_heads)
        if self.num_heads % self.num_key_value_heads:
            raise ValueError(
                f"num_heads {self.num_heads} is not a multiple of num_key_value_heads "
                f"{self.num_key_value_heads} (grouped-query attention shares each key/value head "
                "among a whole number of query heads)."
            )
        # RoPE-Mixed: this layer learns its own rotary frequencies (initialised at this temperature)
        self.mixed_rotary_temperature = None if mixed_rotary_temperature is None else float(mixed_rotary_temperature)
        self.dropout_rate = float(dropout_rate)
        self.qk_norm, self.qkv_bias, self.layer_norm_epsilon = bool(qk_norm), bool(qkv_bias), float(layer_norm_epsilon)
        self.dropout = keras.layers.Dropout(self.dropout_rate, dtype=self.dtype_policy)
        self.query_norm = self.key_norm = None
        if self.qk_norm:  # a LayerNorm over each head's queries and keys (ViT-22B; timm's q_norm / k_norm)
            self.query_norm, self.key_norm = (
                normalization(self.layer_norm_epsilon, n, self.dtype_policy, self.rms_norm)
                for n in ("query_norm", "key_norm")
            )
        self.attention_norm = (
            normalization(self.layer_norm_epsilon, "norm", self.dtype_policy, self.rms_norm)
            if self.output_norm
            else None
        )

    def build(self, input_shape):
        d = input_shape[-1]
        if d % self.num_heads:
            raise ValueError(f"hidden_size {d} is not divisible by num_heads {self.num_heads}.")
        h, dh = self.num_heads, d // self.num_heads
        self.head_dim = dh
        self.rotation = rotation_matrix(dh, self.rotate_half) if dh % 2 == 0 else None  # used with a rotary table
        init = xavier_uniform(d, d)
        for name in ("query", "key", "value"):  # (batch, tokens, D) -> (batch, tokens, heads, D/heads)
            biased = self.qkv_bias and (name != "key" or self.key_bias)
            n = h if name == "query" else self.num_key_value_heads  # grouped-query attention: fewer key/value heads
            layer = Projection(
                "btd,dhk->bthk",
                output_shape=(None, n, dh),
                bias_axes="hk" if biased else None,
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
        for norm in (self.query_norm, self.key_norm):
            if norm is not None:
                norm.build(tuple(input_shape[:-1]) + (h, dh))
        if self.attention_norm is not None:
            self.attention_norm.build(tuple(input_shape))
        self.rotary_frequencies = None
        if self.mixed_rotary_temperature is not None:
            start = mixed_frequencies(h, dh, self.mixed_rotary_temperature, np.random.default_rng())
            self.rotary_frequencies = self.add_weight(
                name="rotary_frequencies", shape=start.shape, initializer=initial(keras.initializers.Constant(start))
            )

    @property
    def quantized(self) -> bool:
        """True once `model.quantize(...)` has replaced the projections' kernels."""
        return any(getattr(self, n).quantization_mode is not None for n in self.PROJECTIONS)

    def _queries_keys_values(self, x, norm=None, training=None) -> tuple:
        """q (batch, tokens, heads, head_dim), k and v (batch, tokens, key/value heads, head_dim) of `norm(x)` (or of
        `x` without a `norm`): one fused matmul over the three kernels in float, each projection's own layer once
        quantized. A training call takes the norm and the matmul together (`keras_vit.nn.norm_core`)."""
        fused = not self.quantized and fuses(norm, training, x)
        if norm is not None and not fused:
            x = norm(x)
        if self.quantized:
            return self.query(x), self.key(x), self.value(x)
        layers = [self.query, self.key, self.value]
        heads = [tuple(layer.kernel.shape[1:]) for layer in layers]  # (heads, width) of each projection
        widths = [n * k for n, k in heads]
        kernel = ops.concatenate([ops.reshape(layer.kernel, (-1, n)) for layer, n in zip(layers, widths)], axis=-1)
        bias = None
        if self.qkv_bias:
            biases = [
                ops.reshape(layer.bias, (n,)) if layer.bias is not None else ops.zeros((n,), layer.kernel.dtype)
                for layer, n in zip(layers, widths)
            ]  # no key bias: zeros (softmax ignores one shared by all keys)
            bias = ops.concatenate(biases, axis=-1)
        if fused:
            qkv = normed_matmul(x, norm, ops.cast(kernel, x.dtype))
            qkv = qkv + ops.cast(bias, x.dtype) if bias is not None else qkv
        else:
            qkv = affine(x, kernel, bias)  # one product with its bias on PyTorch
        b, t = ops.shape(x)[0], ops.shape(x)[1]
        # one split (not three slices): a runtime's int8 rewrites move a per-channel dequantization through a split
        # (OpenVINO 2026's low-precision pass fails on the three slices of an NNCF-quantized matmul)
        q, k, v = ops.split(qkv, [widths[0], widths[0] + widths[1]], axis=-1)
        return tuple(ops.reshape(y, (b, t, *shape)) for y, shape in zip((q, k, v), heads))

    def call(self, x, rotary=None, training=None, return_attention=False, norm=None):
        h, dh = self.num_heads, self.head_dim
        q, k, v = self._queries_keys_values(x, norm, training)
        if self.qk_norm:
            q, k = ops.cast(self.query_norm(q), v.dtype), ops.cast(self.key_norm(k), v.dtype)
        if rotary is not None and self.rotary_frequencies is not None:  # RoPE-Mixed: `rotary` holds positions
            f = self.rotary_frequencies
            q, k = (apply_mixed_rotary(t, rotary, f, self.rotation) for t in (q, k))
        elif rotary is not None:  # RoPE: the patch tokens' queries and keys rotated (prefix rows are the identity)
            q, k = apply_rotary(q, rotary, self.rotation), apply_rotary(k, rotary, self.rotation)
        if self.num_key_value_heads != h:  # grouped-query attention: head i reads key/value head i // group
            k, v = (ops.repeat(t, h // self.num_key_value_heads, axis=2) for t in (k, v))
        scale = 1.0 / math.sqrt(dh)
        needs_probabilities = return_attention or (training and self.dropout_rate)  # returned, or dropped out
        backend = keras.backend.backend()
        if recomputes(training) and self.FUSED is not True and not needs_probabilities:
            scaled = q * ops.cast(scale, q.dtype)
            return self._project(recomputed_attention(scaled, k, v, causal=self.causal), x)  # recomputed backward
        fused = backend in self.FUSED_BACKENDS if self.FUSED is None else self.FUSED
        # by default only in float32 (where both paths agree to 1e-5); FUSED=True also takes bf16 (flash on GPUs)
        precise = keras.backend.standardize_dtype(x.dtype) == "float32" or self.FUSED is True
        if fused and precise and not needs_probabilities:
            return self._project(ops.dot_product_attention(q, k, v, scale=scale, is_causal=self.causal), x)
        logits = ops.einsum("bqhd,bkhd->bhqk", q * ops.cast(scale, q.dtype), k)
        logits = ops.cast(logits, "float32")
        probs = ops.softmax(logits + causal_bias(ops.shape(x)[1]) if self.causal else logits, axis=-1)
        dropped = self.dropout(probs, training=training)
        y = self._project(ops.einsum("bhqk,bkhd->bqhd", ops.cast(dropped, v.dtype), v), x)
        return (y, probs) if return_attention else y

    def _project(self, y, x):
        """(batch, tokens, heads, head_dim) -> the out projection, (batch, tokens, D)."""
        h, dh = self.num_heads, self.head_dim
        if self.attention_norm is not None:
            y = ops.reshape(
                self.attention_norm(ops.reshape(y, (ops.shape(x)[0], ops.shape(x)[1], h * dh))),
                (ops.shape(x)[0], ops.shape(x)[1], h, dh),
            )
        if self.quantized:
            return self.out(y)
        d = ops.shape(x)[-1]
        y = ops.reshape(y, (ops.shape(x)[0], ops.shape(x)[1], h * dh))
        return affine(y, ops.reshape(self.out.kernel, (h * dh, d)), self.out.bias)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return {
            **super().get_config(),
            "num_heads": self.num_heads,
            "dropout_rate": self.dropout_rate,
            "qk_norm": self.qk_norm,
            "qkv_bias": self.qkv_bias,
            "layer_norm_epsilon": self.layer_norm_epsilon,
            "rotate_half": self.rotate_half,
            "output_norm": self.output_norm,
            "key_bias": self.key_bias,
            "mixed_rotary_temperature": self.mixed_rotary_temperature,
            "rms_norm": self.rms_norm,
            "projection_bias": self.projection_bias,
            "num_key_value_heads": self.num_key_value_heads,
            "causal": self.causal,
        }
