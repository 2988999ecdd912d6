"""The Transformer's MLP block (paper eq. 3) and the activations the ViT family uses in it.

Three activations occur in published ViT checkpoints: GELU in its tanh form (the original JAX code, big_vision,
SigLIP), the exact erf form (timm's and `transformers`' default: DeiT, DINOv2, AugReg in timm) and OpenAI CLIP's
"quick GELU", x * sigmoid(1.702 x). They differ by up to ~1e-3 (tanh vs exact) and ~2e-2 (quick) per unit, which
moves logits well past any parity bound, so the model records which one its checkpoint was trained with.
"""

from __future__ import annotations

import keras
from keras import ops

from keras_vit.utils.eager import tensorflow_eager
from keras_vit.nn.initializers import PACKAGE, mlp_bias_init, xavier_uniform
from keras_vit.nn.rms_norm import normalization
from keras_vit.nn.affine import dense_affine
from keras_vit.nn.mlp_core import ACTIVATIONS, activated_dense, exact_gelu, quick_gelu, sigmoid_2u, slope
from keras_vit.nn.norm_core import fuses, normed_matmul
from keras_vit.nn.recompute import applies as recomputes
from keras_vit.nn.specs import ArraySpecs


def gelu(x, approximate: bool = True):
    """GELU: the tanh approximation (flax's default, the official models') or the exact erf form
    (timm's and `transformers`' nn.GELU). The exact form is written with `erf` itself: TensorFlow's own exact
    GELU lowers to `Erfc`, which the ONNX converter cannot express. In TensorFlow's eager mode the tanh form
    is written as x sigmoid(2u) (`_eager_gelu_tanh`)."""
    if approximate:
        return _eager_gelu_tanh(x) if tensorflow_eager() else ops.gelu(x, approximate=True)
    return exact_gelu(x)


def _eager_gelu_tanh(x):
    """The tanh GELU as x sigmoid(2u). TensorFlow's own form raises x to the third power with `Pow` and takes
    eight ops, each dispatched on its own in eager mode; this form takes fewer and is closer to the float64
    values. Graphs
    keep Keras' form, which TensorFlow's graph optimiser and the exporters' converters know (docs/benchmarks-history.md,
    "Cold start")."""
    return x * sigmoid_2u(x)


@ops.custom_gradient
def _gelu_tanh_keeping_input(x):
    """The tanh GELU, whose backward pass needs only `x`.

    Differentiated as written, the tanh GELU's backward uses the tanh's output, so a compiled training step
    keeps that (batch, tokens, mlp_dim) tensor of every block until the backward pass reaches it: 0.47 GB of a
    ViT-B/16 step at batch 16 on TensorFlow + XLA (docs/benchmarks-history.md, "Training memory").
    Here the derivative is recomputed from `x`, with 0.5 (1 + tanh u) = sigmoid(2u):
    d/dx = s + 2 x s (1 - s) u', s = sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3). A sigmoid, not the
    forward's tanh, so that XLA's common-subexpression pass cannot fold it back into the forward pass."""

    def grad(*args, upstream=None):
        upstream = args[0] if upstream is None else upstream
        wide = keras.backend.result_type(x.dtype, "float32")  # bfloat16 / float16 inputs: float32 arithmetic
        return ops.cast(ops.cast(upstream, wide) * slope(ops.cast(x, wide), "gelu_tanh"), upstream.dtype)

    return ops.gelu(x, approximate=True), grad


def activate(x, activation: str, training=None):
    """`x` through one of `ACTIVATIONS` by name. While training on TensorFlow or JAX the tanh GELU keeps only
    its input for the backward pass (`_gelu_tanh_keeping_input`; the same values and gradients); PyTorch's
    own GELU already does."""
    if activation == "gelu_tanh":
        if recomputes(training):
            return _gelu_tanh_keeping_input(x)
        return gelu(x, approximate=True)
    if activation == "gelu":
        return gelu(x, approximate=False)
    if activation == "quick_gelu":
        return quick_gelu(x)
    raise ValueError(f"Unknown activation {activation!r}; expected one of {ACTIVATIONS}.")


def activation_name(activation, gelu_approximate) -> str:
    """The MLP's activation from the constructor's two spellings: `activation` (one of `ACTIVATIONS`) or the
    older `gelu_approximate` (True: "gelu_tanh", False: "gelu"); both given must agree. Default "gelu_tanh"."""
    from_flag = None if gelu_approximate is None else ("gelu_tanh" if gelu_approximate else "gelu")
    if activation is None:
        return from_flag or "gelu_tanh"
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation={activation!r}; expected one of {ACTIVATIONS}.")
    if from_flag is not None and from_flag != activation:
        raise ValueError(f"activation={activation!r} contradicts gelu_approximate={gelu_approximate!r}; give one.")
    return activation


@keras.saving.register_keras_serializable(package=PACKAGE)
class MlpBlock(ArraySpecs, keras.layers.Layer):
    """Dense(mlp_dim) -> activation -> Dropout -> [norm] -> Dense(D) -> Dropout.

    `activation`: one of `ACTIVATIONS` (default the tanh GELU); `gelu_approximate` is the older spelling of the
    choice between the two GELUs (kept so that models saved before `activation` existed reload).
    `hidden_norm`: a LayerNorm (RMSNorm with `rms_norm`) on the hidden layer (BEiT-3); `use_bias=False`: Dense
    layers without biases (AIMv2). Called with a `norm` layer (a pre-norm block's LayerNorm), the block reads
    `norm(x)`; training calls take the norm and `Dense_0` as one function (`keras_vit.nn.norm_core`).
    """

    def __init__(
        self,
        mlp_dim: int,
        dropout_rate: float = 0.0,
        gelu_approximate=None,
        activation=None,
        hidden_norm: bool = False,
        layer_norm_epsilon: float = 1e-6,
        rms_norm: bool = False,
        use_bias: bool = True,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.hidden_norm, self.layer_norm_epsilon = bool(hidden_norm), float(layer_norm_epsilon)
        self.rms_norm, self.use_bias = bool(rms_norm), bool(use_bias)
        self.norm = (
            normalization(self.layer_norm_epsilon, "norm", self.dtype_policy, self.rms_norm)
            if self.hidden_norm
            else None
        )
        self.mlp_dim = int(mlp_dim)
        self.activation = activation_name(activation, gelu_approximate)
        self.dropout_rate = float(dropout_rate)
        self.dropout = keras.layers.Dropout(self.dropout_rate, dtype=self.dtype_policy)

    @property
    def gelu_approximate(self) -> bool:
        return self.activation == "gelu_tanh"

    def build(self, input_shape):
        d = input_shape[-1]
        self.dense_0 = keras.layers.Dense(
            self.mlp_dim,
            kernel_initializer=xavier_uniform(d, self.mlp_dim),
            use_bias=self.use_bias,
            bias_initializer=mlp_bias_init(),
            dtype=self.dtype_policy,
            name="Dense_0",
        )
        self.dense_1 = keras.layers.Dense(
            d,
            kernel_initializer=xavier_uniform(self.mlp_dim, d),
            use_bias=self.use_bias,
            bias_initializer=mlp_bias_init(),
            dtype=self.dtype_policy,
            name="Dense_1",
        )
        self.dense_0.build(input_shape)
        self.dense_1.build(tuple(input_shape[:-1]) + (self.mlp_dim,))
        if self.norm is not None:
            self.norm.build(tuple(input_shape[:-1]) + (self.mlp_dim,))

    def call(self, x, training=None, norm=None):
        h = self._hidden(x, training, norm)
        if self._keeps_activation_input(training):
            dense = self.dense_1
            return activated_dense(h, ops.cast(dense.kernel, h.dtype), ops.cast(dense.bias, h.dtype), self.activation)
        y = activate(h, self.activation, training)
        y = self.dropout(y, training=training)
        y = self.norm(y) if self.norm is not None else y
        y = dense_affine(self.dense_1, y)
        return self.dropout(y, training=training)

    def _hidden(self, x, training, norm):
        """`Dense_0(norm(x))` (`Dense_0(x)` without a `norm`); a training call takes the norm and the product
        together (`keras_vit.nn.norm_core`) where `Dense_0` is float (LoRA included)."""
        dense = self.dense_0
        if dense.quantization_mode is not None or not fuses(norm, training, x):
            return dense_affine(dense, x if norm is None else norm(x))
        h = normed_matmul(x, norm, ops.cast(dense.kernel, x.dtype))
        return h + ops.cast(dense.bias, h.dtype) if dense.use_bias else h

    def _keeps_activation_input(self, training) -> bool:
        """Whether this call takes `mlp_core.activated_dense`, which keeps one (tokens, mlp_dim) tensor instead
        of two for the backward pass: training on TensorFlow or JAX, no dropout, and a plain float `Dense_1`
        (no LoRA, not quantized, with a bias)."""
        dense = self.dense_1
        return (
            recomputes(training)
            and not self.dropout_rate
            and dense.quantization_mode is None
            and not dense.lora_enabled
            and dense.use_bias
            and self.norm is None
        )

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return {
            **super().get_config(),
            "mlp_dim": self.mlp_dim,
            "dropout_rate": self.dropout_rate,
            "activation": self.activation,
            "hidden_norm": self.hidden_norm,
            "layer_norm_epsilon": self.layer_norm_epsilon,
            "rms_norm": self.rms_norm,
            "use_bias": self.use_bias,
        }
