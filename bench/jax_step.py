"""The bare JAX training step the bench rows share: one `jax.jit` of forward, backward and AdamW, state donated.

This is what `recipes.trainer.jax_step` runs per step, without its input pipeline or distribution: the floor for
any Keras-on-JAX trainer, to set against `model.train_on_batch` (Keras' own JAX trainer).
"""

from __future__ import annotations


def adamw_step(model, x, y):
    """(compiled step, initial state): `step(*state)` returns (loss, *new_state) for the fixed batch (x, y)."""
    import jax
    import keras

    from keras_vit.utils import heap

    opt = keras.optimizers.AdamW(1e-4, weight_decay=0.05)
    opt.build(model.trainable_variables)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def step(trainable, non_trainable, slots):
        def loss(trainable):
            logits, new_non_trainable = model.stateless_call(trainable, non_trainable, x, training=True)
            return loss_fn(y, logits), new_non_trainable

        (value, non_trainable), grads = jax.value_and_grad(loss, has_aux=True)(trainable)
        trainable, slots = opt.stateless_apply(slots, grads, trainable)
        return value, trainable, non_trainable, slots

    state = (
        [v.value for v in model.trainable_variables],
        [v.value for v in model.non_trainable_variables],
        [v.value for v in opt.variables],
    )
    with heap.returning_freed_memory():  # as the recipes' first step: what XLA frees goes back to the OS
        compiled = jax.jit(step, donate_argnums=(0, 1, 2)).lower(*state).compile()
    return compiled, state
