"""The official code's initializers (keras_vit.nn.initializers) against Keras' own Glorot and numpy."""

import keras
import numpy as np

from keras_vit.nn.initializers import mlp_bias_init, xavier_uniform


def test_xavier_uniform_matches_keras_glorot_for_a_2d_kernel():
    # flax's xavier_uniform on a (D, heads, D/heads) kernel uses fan_in D and fan_out heads * D/heads,
    # which is Keras' GlorotUniform of the flattened (D, D) kernel: compare the two distributions' bounds
    ours = keras.ops.convert_to_numpy(xavier_uniform(384, 384)((384, 6, 64), dtype="float32"))
    glorot = keras.ops.convert_to_numpy(keras.initializers.GlorotUniform(seed=0)((384, 384), dtype="float32"))
    limit = np.sqrt(6.0 / (384 + 384))
    assert np.abs(ours).max() <= limit and np.abs(glorot).max() <= limit
    assert np.abs(ours).max() > 0.99 * limit and np.abs(glorot).max() > 0.99 * limit
    np.testing.assert_allclose(ours.std(), limit / np.sqrt(3.0), rtol=0.02)  # uniform(-a, a) has std a / sqrt(3)


def test_mlp_bias_init_is_near_zero_normal():
    b = keras.ops.convert_to_numpy(mlp_bias_init()((100_000,), dtype="float32"))
    np.testing.assert_allclose(b.std(), 1e-6, rtol=0.02)
    assert abs(b.mean()) < 1e-8
