"""Optimisers and learning-rate schedules from Keras itself (tensorflow-addons is end-of-life)."""

from __future__ import annotations

import math
import re
from typing import Dict, Optional, Sequence

import keras

from keras_vit import FusedAdamW


@keras.saving.register_keras_serializable(package="recipes")
class WarmupDecay(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warmup from 0 to `base` over `warmup_steps`, then linear or cosine decay to `end`."""

    def __init__(self, base: float, total_steps: int, warmup_steps: int = 0, decay: str = "linear", end: float = 0.0):
        if decay not in ("linear", "cosine", "constant"):
            raise ValueError(f"config.optimizer.decay must be 'linear', 'cosine' or 'constant', got {decay!r}.")
        self.base, self.total_steps, self.warmup_steps = float(base), int(total_steps), int(warmup_steps)
        self.decay, self.end = decay, float(end)

    def __call__(self, step):
        step = keras.ops.cast(step, "float32")
        warm = keras.ops.minimum(1.0, step / max(self.warmup_steps, 1)) if self.warmup_steps else 1.0
        span = max(self.total_steps - self.warmup_steps, 1)
        progress = keras.ops.clip((step - self.warmup_steps) / span, 0.0, 1.0)
        if self.decay == "linear":
            frac = 1.0 - progress
        elif self.decay == "cosine":
            frac = 0.5 * (1.0 + keras.ops.cos(math.pi * progress))
        else:
            frac = 1.0
        return warm * (self.end + (self.base - self.end) * frac)

    def get_config(self):
        return dict(
            base=self.base, total_steps=self.total_steps, warmup_steps=self.warmup_steps, decay=self.decay, end=self.end
        )


_BLOCK = re.compile(r"(^|/)encoderblock_(\d+)/")
_EMBEDDING = ("embedding/", "cls", "posembed_input/", "resnet/")


def layer_depth(path: str, num_layers: int) -> int:
    """0 for the embeddings (patches, class token, position embeddings, the hybrids' stem), i + 1 for encoder
    block i, num_layers + 1 for what follows the blocks (final LayerNorm, pre-logits, head)."""
    block = _BLOCK.search(path)
    if block:
        return int(block.group(2)) + 1
    return 0 if path.startswith(_EMBEDDING) else num_layers + 1


def layer_decay_scales(variables: Sequence, num_layers: int, decay: float) -> Dict[str, float]:
    """{variable path: decay ** (num_layers + 1 - depth)}, the layer-wise learning-rate decay of BEiT and MAE
    fine-tuning: the head keeps the full rate, each block below it `decay` times its upper neighbour's. Empty
    for decay 1 (no decay)."""
    if decay == 1:
        return {}
    return {v.path: float(decay) ** (num_layers + 1 - layer_depth(v.path, num_layers)) for v in variables}


class _LayerRates:
    """Scales each variable's learning rate (its update, and its decoupled weight decay) by `lr_scales[path]`.
    The rate is scaled, not the gradient: Adam is invariant to the gradient's scale. `FusedAdamW`'s fused updates
    read the factor from `_rate_scale`; Keras' per-variable update from `update_step`."""

    def __init__(self, *args, lr_scales: Optional[Dict[str, float]] = None, **kwargs):
        super().__init__(*args, **kwargs)
        self._lr_scales = dict(lr_scales or {})

    def build(self, var_list):
        super().build(var_list)
        self._scale_list = [self._lr_scales.get(v.path, 1.0) for v in var_list]

    def _rate_scale(self, variable) -> float:
        return self._scale_list[self._get_variable_index(variable)]

    def _apply_weight_decay(self, variables):
        return  # folded into the update, where the variable's own rate is known

    def update_step(self, gradient, variable, learning_rate):
        rate = learning_rate * self._rate_scale(variable)
        if self.weight_decay is not None and self._use_weight_decay(variable):
            decay = keras.ops.cast(self.weight_decay, variable.dtype) * keras.ops.cast(rate, variable.dtype)
            variable.assign(variable - variable * decay)
        return super().update_step(gradient, variable, rate)


class LayerDecayAdamW(_LayerRates, FusedAdamW):
    """AdamW with per-variable learning rates (`layer_decay_scales`), fused where `FusedAdamW` is."""


class LayerDecaySGD(_LayerRates, keras.optimizers.SGD):
    """SGD with per-variable learning rates (`layer_decay_scales`)."""


def make_optimizer(
    opt,
    total_steps: int,
    ema_decay: float = 0.0,
    grad_accum_steps: int = 1,
    lr_scales: Optional[Dict[str, float]] = None,
) -> keras.optimizers.Optimizer:
    """AdamW (decoupled weight decay; `keras_vit.FusedAdamW`, Keras' AdamW with its update fused on TensorFlow and
    PyTorch) or SGD with momentum, per `config.optimizer`; with `lr_scales`
    ({variable path: factor}, `layer_decay_scales`), each variable's rate scaled by its factor.

    Clipping is not configured here: the train step clips the all-reduced gradient.
    """
    schedule = WarmupDecay(opt.learning_rate, total_steps, opt.warmup_steps, opt.decay, opt.end_learning_rate)
    extra = dict(
        use_ema=bool(ema_decay),
        ema_momentum=ema_decay or 0.99,
        gradient_accumulation_steps=grad_accum_steps if grad_accum_steps > 1 else None,
    )
    if lr_scales:
        extra["lr_scales"] = lr_scales
    if opt.name in ("adam", "adamw"):
        adamw = LayerDecayAdamW if lr_scales else FusedAdamW
        optimizer = adamw(learning_rate=schedule, beta_1=opt.b1, beta_2=opt.b2, weight_decay=opt.weight_decay, **extra)
        names = [n for n in opt.wd_exclude.split(",") if n]
        if names:
            optimizer.exclude_from_weight_decay(var_names=names)
        return optimizer
    if opt.name == "sgd":
        sgd = LayerDecaySGD if lr_scales else keras.optimizers.SGD
        return sgd(
            learning_rate=schedule,
            momentum=opt.momentum,
            nesterov=opt.nesterov,
            weight_decay=opt.weight_decay or None,
            **extra,
        )
    raise ValueError(f"config.optimizer.name must be 'adamw', 'adam' or 'sgd', got {opt.name!r}.")
