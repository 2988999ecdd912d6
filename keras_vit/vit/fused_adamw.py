"""`FusedAdamW`: Keras' AdamW, whose update is one fused kernel per step on PyTorch and one per variable on TensorFlow.

On the PyTorch backend Keras' AdamW runs its update as nine `torch._foreach_*` passes over the parameters, plus one
for the weight decay; PyTorch's own fused kernel (`torch.optim.AdamW(fused=True)`'s, on CPU and GPU) reads and
writes each parameter, gradient and slot once. For a ViT-S/16's 22 M parameters on 2 Intel cores that is 22 ms
against 232 for Keras' update (docs/benchmarks-history.md, "The PyTorch backend's training step").

On TensorFlow Keras' AdamW writes about 40 graph operations per variable (the bias corrections, the schedule and
the decay each computed again for every variable): for a ViT-S/16 that is 8,000 of its training step's 15,000
nodes, and TensorFlow's graph and XLA compiler hold memory for each node as long as the step lives. Here each
variable's update is one `ResourceApplyAdam` (TensorFlow's fused Adam kernel, which XLA also compiles) after its
decay, and the shared scalars are computed once per step (docs/benchmarks-history.md, "FusedAdamW on TensorFlow").

The update is Keras' AdamW's. Keras adds epsilon to the square root of the uncorrected second moment and folds both
bias corrections into the step size, `v -= lr * sqrt(1 - beta_2^t) / (1 - beta_1^t) * m / (sqrt(v) + epsilon)`,
which is TensorFlow's kernel's formula; PyTorch divides the square root by `sqrt(1 - beta_2^t)` before adding
epsilon, so its kernel is given `epsilon / sqrt(1 - beta_2^t)`, which makes the two the same function. The decay is
decoupled in all three (`v -= v * weight_decay * lr` first), and is left out for the variables Keras' AdamW leaves
out (`exclude_from_weight_decay`). A subclass may scale a variable's rate (its step and its decay) by overriding
`_rate_scale`; the recipes' layer-wise rate decay does.

Everything else is Keras' optimizer: the slots (`momentums`, `velocities`), the step counter, schedules, gradient
clipping, accumulation, EMA, loss scaling and saving. On JAX, with `amsgrad`, with variables of a dtype the kernels
do not take, under a TensorFlow distribution strategy (whose replicas Keras' own update reduces over), or on a
PyTorch without the kernel, it is Keras' AdamW itself.
"""

from __future__ import annotations

import math

import keras


_KERNEL_DTYPES = ("float32", "float16", "bfloat16")


@keras.saving.register_keras_serializable(package="keras_vit")
class FusedAdamW(keras.optimizers.AdamW):
    """Keras' AdamW (same arguments, same update, same saved state), run by PyTorch's fused kernel on the PyTorch
    backend and by TensorFlow's on TensorFlow.

    Use it where you would use `keras.optimizers.AdamW`, e.g.
    `model.compile(optimizer=keras_vit.FusedAdamW(1e-4, weight_decay=0.05), loss=...)`.
    """

    _fused = None  # the backend whose kernel runs the update, once `build` has seen the variables; None: Keras'

    def build(self, var_list):
        super().build(var_list)
        # decided once for the optimizer's variables (their dtypes do not change), not on every step
        self._fused = None
        backend = keras.backend.backend()
        if self.amsgrad or backend not in ("torch", "tensorflow"):
            return
        if not all(keras.backend.standardize_dtype(v.dtype) in _KERNEL_DTYPES for v in var_list):
            return
        if backend == "torch":
            import torch

            if not hasattr(torch, "_fused_adamw_"):
                return
        self._fused = backend

    def _rate_scale(self, variable) -> float:
        """The factor on `variable`'s learning rate (its step and its decay): 1 here, a subclass's own elsewhere."""
        return 1.0

    def _decay(self, variable) -> float:
        return float(self.weight_decay) if self.weight_decay and self._use_weight_decay(variable) else 0.0

    def _fused_here(self):
        """The backend whose kernel runs this update, or None for Keras' own: under a TensorFlow distribution
        strategy Keras' update, which reduces over the replicas. Asked by `apply`'s decay and update alike, which
        run in the same context."""
        if self._fused == "tensorflow":
            import tensorflow as tf

            return None if tf.distribute.has_strategy() else "tensorflow"
        return self._fused

    def _apply_weight_decay(self, variables):
        if not self._fused_here():  # the fused update decays each variable itself
            super()._apply_weight_decay(variables)

    def _backend_update_step(self, grads, trainable_variables, learning_rate):
        fused = self._fused_here()
        if fused == "torch":
            return self._torch_update(grads, trainable_variables, learning_rate)
        if fused == "tensorflow":
            return self._tensorflow_update(grads, trainable_variables, learning_rate)
        return super()._backend_update_step(grads, trainable_variables, learning_rate)

    def _tensorflow_update(self, grads, trainable_variables, learning_rate):
        import tensorflow as tf

        scalars = {}  # per dtype, built once in this graph (or eagerly) for every variable of that dtype
        for variable, grad in zip(trainable_variables, grads):  # Keras' `apply` has left out missing gradients
            index = self._get_variable_index(variable)
            value = variable.value if isinstance(variable, keras.Variable) else variable
            dtype = value.dtype
            if dtype not in scalars:
                step = tf.cast(self.iterations + 1, dtype)
                scalars[dtype] = dict(
                    lr=tf.cast(learning_rate, dtype),
                    beta1_power=tf.pow(tf.cast(self.beta_1, dtype), step),
                    beta2_power=tf.pow(tf.cast(self.beta_2, dtype), step),
                    beta1=tf.cast(self.beta_1, dtype),
                    beta2=tf.cast(self.beta_2, dtype),
                    epsilon=tf.cast(self.epsilon, dtype),
                    weight_decay=tf.cast(self.weight_decay or 0.0, dtype),
                )
            shared = scalars[dtype]
            scale = self._rate_scale(variable)
            lr = shared["lr"] if scale == 1.0 else shared["lr"] * tf.cast(scale, dtype)
            if self._decay(variable):  # Keras' order of products: variable * weight_decay * lr
                value.assign_sub(value * shared["weight_decay"] * lr)
            if isinstance(grad, tf.IndexedSlices):  # the kernel takes a dense gradient, as Keras' update makes one
                grad = tf.convert_to_tensor(grad)
            tf.raw_ops.ResourceApplyAdam(
                var=value.handle,
                m=self._momentums[index].value.handle,
                v=self._velocities[index].value.handle,
                beta1_power=shared["beta1_power"],
                beta2_power=shared["beta2_power"],
                lr=lr,
                beta1=shared["beta1"],
                beta2=shared["beta2"],
                epsilon=shared["epsilon"],
                grad=tf.cast(grad, dtype),
                use_locking=False,
                use_nesterov=False,
            )

    def _torch_update(self, grads, trainable_variables, learning_rate):
        import torch

        with torch.no_grad():
            step = float(keras.ops.convert_to_numpy(self.iterations)) + 1.0  # updates made (accumulation counted)
            lr = float(learning_rate)
            epsilon = self.epsilon / math.sqrt(1.0 - self.beta_2**step)  # Keras' epsilon, in PyTorch's formula
            groups = {}
            for variable, grad in zip(trainable_variables, grads):
                param = variable.value
                index = self._get_variable_index(variable)
                key = (param.device, param.dtype, self._decay(variable), self._rate_scale(variable))
                group = groups.setdefault(key, ([], [], [], []))
                for member, tensor in zip(
                    group, (param, grad.to(param.dtype), self._momentums[index].value, self._velocities[index].value)
                ):
                    member.append(tensor)
            for (device, _, decay, scale), (params, grads_, momentums, velocities) in groups.items():
                steps = [torch.tensor(step, dtype=torch.float32, device=device)] * len(params)
                torch._fused_adamw_(
                    params,
                    grads_,
                    momentums,
                    velocities,
                    [],
                    steps,
                    lr=lr * scale,
                    beta1=float(self.beta_1),
                    beta2=float(self.beta_2),
                    weight_decay=float(decay),
                    eps=epsilon,
                    amsgrad=False,
                    maximize=False,
                )
