"""TensorFlow's own checkpoint API on a `VisionTransformer`: every weight saved and restored, a checkpoint of
another depth refused by `assert_consumed` (users' own TF loops with `CheckpointManager`)."""

import numpy as np
import pytest

import keras

pytestmark = pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="tf.train.Checkpoint is TensorFlow's")


def _model(layers=2, seed=0):
    import keras_vit

    model = keras_vit.VisionTransformer(
        8, 32, 64, 4, layers, input_shape=(32, 32, 3), classes=3, classifier_activation=None
    )
    rng = np.random.default_rng(seed)
    model.set_weights([rng.normal(0, 0.2, w.shape).astype(w.dtype) for w in model.get_weights()])
    return model


def test_checkpoint_manager_saves_and_restores_every_weight(tmp_path):
    import tensorflow as tf

    model = _model()
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(model=model), str(tmp_path), max_to_keep=1)
    path = manager.save()
    saved = [n for n, _ in tf.train.list_variables(path) if n.startswith("model/")]
    assert len(saved) == len(model.trainable_weights)  # every parameter, each block's included
    other = _model(seed=1)
    tf.train.Checkpoint(model=other).restore(manager.latest_checkpoint).assert_consumed()
    for a, b in zip(model.weights, other.weights):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    x = np.random.default_rng(2).uniform(-1, 1, (2, 32, 32, 3)).astype("float32")
    np.testing.assert_array_equal(np.asarray(model(x)), np.asarray(other(x)))


def test_checkpoint_of_another_depth_is_refused(tmp_path):
    import tensorflow as tf

    path = tf.train.Checkpoint(model=_model(layers=2)).write(str(tmp_path / "two"))
    with pytest.raises(AssertionError, match="encoderblock_1"):
        tf.train.Checkpoint(model=_model(layers=1)).read(path).assert_consumed()
