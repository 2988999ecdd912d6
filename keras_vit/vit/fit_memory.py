"""`fit` (and `train_on_batch`) give back the memory their compilation freed, as the recipes' steps do, and on
PyTorch hold no gradients between steps.

Keras compiles a model's training function on its first call (XLA on JAX, and on TensorFlow with
`jit_compile`). glibc keeps what the compiler frees, and the step's buffers come from fresh pages, so a
ViT-B/16's compilation would stay resident beside every later step. The mixin wraps each training function
Keras makes so that its first call runs inside `keras_vit.utils.heap.returning_freed_memory`; nothing else
about the function changes.

On PyTorch Keras' `train_step` clears the parameters' gradients (`torch.nn.Module.zero_grad`, which sets them to
None) after the next step's forward pass, so the last step's gradients, one float32 copy of every trained
parameter, are held through the forward pass, where the activations are at their peak. timm's loop and
`torch.optim`'s examples clear them before it. Here the step clears them after the update instead, which Keras'
own clearing then finds done; the update, the optimizer's state and the returned metrics are unchanged.
"""

from __future__ import annotations

import keras

from keras_vit.utils import heap


class FitMemory:
    """Mixin for a `keras.Model`: the first call of every training function Keras makes returns freed heap; on
    PyTorch a training step leaves no gradients behind."""

    def train_step(self, *args, **kwargs):  # (data), or on JAX (state, data): Keras' own signatures
        outputs = super().train_step(*args, **kwargs)
        if keras.backend.backend() == "torch":
            self.zero_grad()  # set to None: freed now rather than after the next forward pass (module docstring)
        return outputs

    def make_train_function(self, force: bool = False):
        fresh = force or getattr(self, "train_function", None) is None
        made = super().make_train_function(force)
        if fresh and self.train_function is not None:
            self.train_function = heap.first_call_returning_freed_memory(self.train_function)
            if made is not None:  # TensorFlow and PyTorch return the function; JAX returns None
                made = self.train_function
        return made
