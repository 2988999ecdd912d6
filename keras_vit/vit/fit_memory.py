"""`fit` (and `train_on_batch`) give back the memory their compilation freed, as the recipes' steps do.

Keras compiles a model's training function on its first call (XLA on JAX, and on TensorFlow with
`jit_compile`). glibc keeps what the compiler frees, and the step's buffers come from fresh pages, so a
ViT-B/16's compilation would stay resident beside every later step. The mixin wraps each training function
Keras makes so that its first call runs inside `keras_vit.utils.heap.returning_freed_memory`; nothing else
about the function changes.
"""

from __future__ import annotations

from keras_vit.utils import heap


class FitMemory:
    """Mixin for a `keras.Model`: the first call of every training function Keras makes returns freed heap."""

    def make_train_function(self, force: bool = False):
        fresh = force or getattr(self, "train_function", None) is None
        made = super().make_train_function(force)
        if fresh and self.train_function is not None:
            self.train_function = heap.first_call_returning_freed_memory(self.train_function)
            if made is not None:  # TensorFlow and PyTorch return the function; JAX returns None
                made = self.train_function
        return made
