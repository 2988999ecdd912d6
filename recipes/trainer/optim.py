"""Optimisers and learning-rate schedules from Keras itself (tensorflow-addons is end-of-life)."""

from __future__ import annotations

import math

import keras


@keras.saving.register_keras_serializable(package="recipes")
class WarmupDecay(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warmup from 0 to `base` over `warmup_steps`, then linear or cosine decay to `end`."""

    def __init__(self, base: float, total_steps: int, warmup_steps: int = 0, decay: str = "linear",
                 end: float = 0.0):
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
        return dict(base=self.base, total_steps=self.total_steps, warmup_steps=self.warmup_steps,
                    decay=self.decay, end=self.end)


def make_optimizer(opt, total_steps: int, ema_decay: float = 0.0,
                   grad_accum_steps: int = 1) -> keras.optimizers.Optimizer:
    """AdamW (decoupled weight decay) or SGD with momentum, per `config.optimizer`.

    Clipping is not configured here: the train step clips the all-reduced gradient.
    """
    schedule = WarmupDecay(opt.learning_rate, total_steps, opt.warmup_steps, opt.decay, opt.end_learning_rate)
    extra = dict(use_ema=bool(ema_decay), ema_momentum=ema_decay or 0.99,
                 gradient_accumulation_steps=grad_accum_steps if grad_accum_steps > 1 else None)
    if opt.name in ("adam", "adamw"):
        optimizer = keras.optimizers.AdamW(learning_rate=schedule, beta_1=opt.b1, beta_2=opt.b2,
                                           weight_decay=opt.weight_decay, **extra)
        names = [n for n in opt.wd_exclude.split(",") if n]
        if names:
            optimizer.exclude_from_weight_decay(var_names=names)
        return optimizer
    if opt.name == "sgd":
        return keras.optimizers.SGD(learning_rate=schedule, momentum=opt.momentum, nesterov=opt.nesterov,
                                    weight_decay=opt.weight_decay or None, **extra)
    raise ValueError(f"config.optimizer.name must be 'adamw', 'adam' or 'sgd', got {opt.name!r}.")
