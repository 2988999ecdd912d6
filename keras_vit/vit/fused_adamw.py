"""`FusedAdamW`: Keras' AdamW, whose update on the PyTorch backend is one call of PyTorch's fused AdamW kernel.

On the PyTorch backend Keras' AdamW runs its update as nine `torch._foreach_*` passes over the parameters, plus one
for the weight decay; PyTorch's own fused kernel (`torch.optim.AdamW(fused=True)`'s, on CPU and GPU) reads and
writes each parameter, gradient and slot once. For a ViT-S/16's 22 M parameters on 2 Intel cores that is 22 ms
against 232 for Keras' update (docs/benchmarks-history.md, "The PyTorch backend's training step").

The update is Keras' AdamW's, not PyTorch's: Keras adds epsilon to the square root of the uncorrected second
moment and folds both bias corrections into the step size,
`v -= lr * sqrt(1 - beta_2^t) / (1 - beta_1^t) * m / (sqrt(v) + epsilon)`; PyTorch divides the square root by
`sqrt(1 - beta_2^t)` before adding epsilon. The kernel is therefore given `epsilon / sqrt(1 - beta_2^t)`, which
makes the two the same function. The decay is decoupled in both (`v *= 1 - lr * weight_decay` first), and is
left out for the variables Keras' AdamW leaves out (`exclude_from_weight_decay`).

Everything else is Keras' optimizer: the slots (`momentums`, `velocities`), the step counter, schedules, gradient
clipping, accumulation, EMA, loss scaling and saving. On TensorFlow and JAX, with `amsgrad`, with variables of
mixed devices or dtypes the kernel does not take, or on a PyTorch without the kernel, it is Keras' AdamW itself.
"""

from __future__ import annotations

import math

import keras


@keras.saving.register_keras_serializable(package="keras_vit")
class FusedAdamW(keras.optimizers.AdamW):
    """Keras' AdamW (same arguments, same update, same saved state), run by PyTorch's fused kernel on the PyTorch
    backend.

    Use it where you would use `keras.optimizers.AdamW`, e.g.
    `model.compile(optimizer=keras_vit.FusedAdamW(1e-4, weight_decay=0.05), loss=...)`.
    """

    _fused = False  # until `build` has seen the variables: Keras' update

    def build(self, var_list):
        super().build(var_list)
        # decided once for the optimizer's variables (their dtypes do not change), not on every step
        self._fused = False
        if keras.backend.backend() == "torch" and not self.amsgrad:
            import torch

            self._fused = hasattr(torch, "_fused_adamw_") and all(
                keras.backend.standardize_dtype(v.dtype) in ("float32", "float16", "bfloat16") for v in var_list
            )

    def _apply_weight_decay(self, variables):
        if not self._fused:  # the kernel decays the parameters itself
            super()._apply_weight_decay(variables)

    def _backend_update_step(self, grads, trainable_variables, learning_rate):
        if not self._fused:
            return super()._backend_update_step(grads, trainable_variables, learning_rate)
        import torch

        with torch.no_grad():
            step = float(keras.ops.convert_to_numpy(self.iterations)) + 1.0  # updates made (accumulation counted)
            lr = float(learning_rate)
            epsilon = self.epsilon / math.sqrt(1.0 - self.beta_2**step)  # Keras' epsilon, in PyTorch's formula
            groups = {}
            for variable, grad in zip(trainable_variables, grads):
                param = variable.value
                index = self._get_variable_index(variable)
                decay = self.weight_decay if self.weight_decay and self._use_weight_decay(variable) else 0.0
                key = (param.device, param.dtype, decay)
                group = groups.setdefault(key, ([], [], [], []))
                for member, tensor in zip(
                    group, (param, grad.to(param.dtype), self._momentums[index].value, self._velocities[index].value)
                ):
                    member.append(tensor)
            for (device, _, decay), (params, grads_, momentums, velocities) in groups.items():
                steps = [torch.tensor(step, dtype=torch.float32, device=device)] * len(params)
                torch._fused_adamw_(
                    params,
                    grads_,
                    momentums,
                    velocities,
                    [],
                    steps,
                    lr=lr,
                    beta1=float(self.beta_1),
                    beta2=float(self.beta_2),
                    weight_decay=float(decay),
                    eps=epsilon,
                    amsgrad=False,
                    maximize=False,
                )
