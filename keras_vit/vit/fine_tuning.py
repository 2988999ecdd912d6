"""The paper's fine-tuning optimizer for `model.fit` (Table 4 and Appendix B.1.1).

SGD with momentum 0.9, no weight decay, gradients clipped at global norm 1, a cosine decay of the learning
rate to zero after a linear warmup. The paper swept the rate over {0.001, 0.003, 0.01, 0.03} at batch 512;
the recipes (`recipes/configs/finetune.py`) run the same optimizer in their own loop.
"""

from __future__ import annotations

from typing import Optional

import keras

from keras_vit.utils import validate


def fine_tuning_optimizer(
    total_steps: int, learning_rate: float = 0.01, warmup_steps: Optional[int] = None
) -> keras.optimizers.Optimizer:
    """A Keras optimizer for fine-tuning a pretrained ViT with `model.fit`, as the paper did.

    Args:
      total_steps: optimizer steps of the whole run (epochs x steps per epoch); the rate reaches 0 there.
      learning_rate: the peak rate, after warmup (the paper's sweep: 0.001, 0.003, 0.01, 0.03).
      warmup_steps: linear warmup from 0; default a tenth of `total_steps`.

    Returns:
      `keras.optimizers.SGD(momentum=0.9, global_clipnorm=1.0)` on a warmup + cosine schedule.
    """
    total_steps = validate.integer("total_steps", total_steps)
    learning_rate = validate.number("learning_rate", learning_rate, positive=True)
    warmup = total_steps // 10 if warmup_steps is None else validate.integer("warmup_steps", warmup_steps, minimum=0)
    if warmup >= total_steps:
        raise ValueError(f"warmup_steps={warmup} must be below total_steps={total_steps}.")
    schedule = keras.optimizers.schedules.CosineDecay(
        initial_learning_rate=0.0 if warmup else learning_rate,
        decay_steps=total_steps - warmup,
        warmup_target=learning_rate if warmup else None,
        warmup_steps=warmup,
    )
    return keras.optimizers.SGD(learning_rate=schedule, momentum=0.9, global_clipnorm=1.0)
