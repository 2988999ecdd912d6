"""Training calls on TensorFlow and JAX take custom backward passes that keep less memory
(`keras_vit.nn.mlp_core.activated_dense`, `keras_vit.nn.attention_core.attention_core`); a whole model's
training gradients must still be those of its inference call, which both frameworks differentiate themselves."""

import numpy as np
import pytest


@pytest.mark.parametrize("activation", ["gelu_tanh", "gelu", "quick_gelu"])
def test_a_model_trains_with_the_same_gradients_through_its_variables(activation):
    """A whole (tiny) model on this process's backend, differentiated through its real variables in a compiled
    step: the training call (which takes both cores on TF and JAX) gives every variable the gradient of the
    inference call (Keras' own Dense, activation and attention formula), and the same loss."""
    import keras

    import keras_vit

    model = keras_vit.VisionTransformer(
        patch_size=4,
        hidden_size=16,
        mlp_dim=32,
        num_heads=2,
        num_layers=2,
        input_shape=(16, 16, 3),
        classes=5,
        classifier_activation=None,
        activation=activation,
    )
    rng = np.random.default_rng(3)
    model.set_weights([rng.normal(0, 0.3, w.shape).astype(w.dtype) for w in model.get_weights()])
    x = rng.uniform(-1, 1, (2, 16, 16, 3)).astype("float32")
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        @tf.function(jit_compile=True)
        def step(training):
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(tf.sin(model(x, training=training)))
            return loss, tape.gradient(loss, model.trainable_variables)

        (loss_t, grads_t), (loss_i, grads_i) = step(True), step(False)
    elif backend == "jax":
        import jax

        def loss(values, training):
            y, _ = model.stateless_call(values, [v.value for v in model.non_trainable_variables], x, training=training)
            return jax.numpy.sum(jax.numpy.sin(y))

        values = [v.value for v in model.trainable_variables]
        (loss_t, grads_t), (loss_i, grads_i) = (
            jax.jit(jax.value_and_grad(loss), static_argnums=1)(values, t) for t in (True, False)
        )
    else:
        pytest.skip("PyTorch keeps Keras' own path")
    assert model.encoder.blocks[0].mlp._keeps_activation_input(True)
    assert abs(float(loss_t) - float(loss_i)) <= 1e-5
    for variable, g_t, g_i in zip(model.trainable_variables, grads_t, grads_i):
        g_t, g_i = np.asarray(g_t), np.asarray(g_i)
        assert np.abs(g_i).max() > 0, variable.path
        assert np.abs(g_t - g_i).max() <= 1e-5 * max(1.0, np.abs(g_i).max()), variable.path
