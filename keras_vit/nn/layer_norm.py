"""LayerNorm over the last axis whose statistics are computed as the original Flax code computes them on JAX.

Keras' `LayerNormalization` takes the variance in two passes (the mean, then the mean of squared deviations).
Under `jax.grad` that form leads XLA's CPU compiler to keep the residual stream's gradient unmaterialised: every
consumer of it re-adds all later blocks' terms, so the gradient of a ViT-S/16 moves 1.7x the bytes of the same
network in `flax.linen` (27.4 vs 15.8 GB at batch 16) and the training step runs at 0.6x Flax's. `flax.linen`'s
LayerNorm squares the input first and takes both moments from it (Var = E[x^2] - E[x]^2, clipped at 0), and
XLA then fuses each block's backward into one running sum. This class computes that form on JAX, so our
gradient moves the bytes Flax's does (docs/benchmarks-history.md, "Each backend at its own limit").

On TensorFlow and PyTorch it computes what Keras' own layer computes, `keras.ops.layer_normalization` (PyTorch's is
a native fused kernel). `normalize` is that computation with the scale and offset as arguments, which
`keras_vit.nn.norm_core` calls inside its custom gradient. Weights, configuration and checkpoints are
`LayerNormalization`'s: `gamma` (scale) and `beta` (bias).
"""

from __future__ import annotations

import keras
from keras import ops

from keras_vit.nn.initializers import PACKAGE, initial

# the original code's and timm's epsilon (CLIP's checkpoints use 1e-5)
LAYER_NORM_EPSILON = 1e-6


@keras.saving.register_keras_serializable(package=PACKAGE)
class LayerNorm(keras.layers.LayerNormalization):
    """`keras.layers.LayerNormalization` whose JAX path takes the mean and variance from one pass over x and x^2.

    The one-pass variance is the original ViT code's (flax's default `use_fast_variance`); statistics are taken
    in float32 for 16-bit inputs, as Keras does. Other axes, RMS scaling or a missing scale/centre fall back to
    Keras' computation.
    """

    def __init__(self, **kwargs):
        kwargs.setdefault("gamma_initializer", initial("ones"))  # Keras' defaults; host-made while weights follow
        kwargs.setdefault("beta_initializer", initial("zeros"))
        super().__init__(**kwargs)

    def call(self, inputs):
        if not self.plain(inputs):
            return super().call(inputs)
        return self.normalize(inputs, self.gamma, self.beta)

    def normalize(self, inputs, gamma, beta):
        """The layer's output for `inputs` with the given scale and offset (its own weights, or the same values
        passed through a custom gradient), where `plain(inputs)`: on JAX the one-pass statistics, elsewhere
        Keras' own function."""
        if keras.backend.backend() != "jax":
            out = ops.layer_normalization(inputs, gamma, beta, self.axis, self.epsilon)
            return ops.cast(out, self.compute_dtype)
        x = ops.cast(inputs, keras.backend.result_type(inputs.dtype, "float32"))  # Keras' own rule
        squares = ops.square(x)  # first: the order in which XLA then fuses the backward pass (module docstring)
        mean, mean_of_squares = ops.mean(x, axis=-1), ops.mean(squares, axis=-1)
        variance = ops.maximum(mean_of_squares - ops.square(mean), 0.0)
        scale = ops.expand_dims(ops.rsqrt(variance + self.epsilon), -1) * ops.cast(gamma, x.dtype)
        outputs = (x - ops.expand_dims(mean, -1)) * scale + ops.cast(beta, x.dtype)
        return ops.cast(outputs, self.compute_dtype)

    def plain(self, inputs) -> bool:
        """Whether this is the plain LayerNorm for `inputs`, centred and scaled over the last axis only: what
        `normalize` and `keras_vit.nn.norm_core` compute (other settings take Keras' own computation)."""
        axes = [self.axis] if isinstance(self.axis, int) else list(self.axis)
        last = len(inputs.shape) - 1
        return self.center and self.scale and not self.rms_scaling and [a % len(inputs.shape) for a in axes] == [last]
