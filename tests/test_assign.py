"""`keras_vit.utils.assign.assign_array`: the array's values; without `adopt` no memory shared with the array
(aligned or not); a shape misfit refused with nothing changed; Keras' own `assign` where the adopting path does
not apply (a strategy's variables, a trace, another dtype)."""

import numpy as np
import pytest

import keras

from keras_vit.utils.assign import assign_array


def _array(shape, seed=0, offset=0):
    """A random float32 array whose data starts `offset` bytes past a 64-byte boundary."""
    n = int(np.prod(shape)) * 4
    raw = np.empty(n + 128, np.uint8)
    start = (-raw.ctypes.data) % 64 + offset
    array = raw[start : start + n].view(np.float32).reshape(shape)
    array[...] = np.random.default_rng(seed).normal(size=shape)
    return array


@pytest.mark.parametrize("offset", [0, 16])  # TensorFlow shares the memory of 64-byte-aligned arrays
@pytest.mark.parametrize("adopt", [False, True])
def test_values_arrive_and_only_an_adopted_array_may_share_memory(adopt, offset):
    variable = keras.Variable(np.zeros((4, 6), "float32"))
    other = keras.Variable(np.zeros((4, 6), "float32"))  # same shape: untouched
    array = _array((4, 6), offset=offset)
    want = array.copy()
    assign_array(variable, array, adopt=adopt)
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(variable), want)
    array[0, 0] = 99.0
    if not adopt:
        assert float(keras.ops.convert_to_numpy(variable)[0, 0]) == want[0, 0]
    assert not np.any(keras.ops.convert_to_numpy(other))
    variable.assign_add(np.ones((4, 6), "float32"))  # still an ordinary variable afterwards
    np.testing.assert_allclose(keras.ops.convert_to_numpy(variable)[1], want[1] + 1, rtol=1e-6)


def test_a_shape_misfit_is_refused_and_changes_nothing():
    variable = keras.Variable(np.ones((4, 6), "float32"))
    with pytest.raises(ValueError, match=r"shape \(6, 4\)"):
        assign_array(variable, _array((6, 4)), adopt=True)
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(variable), np.ones((4, 6), "float32"))


def test_another_dtype_goes_through_keras_assign():
    variable = keras.Variable(np.zeros((3,), "float32"))
    assign_array(variable, np.array([1.0, 2.0, 3.0], "float64"), adopt=True)
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(variable), [1.0, 2.0, 3.0])


@pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="tf.distribute and tf.function are TensorFlow's")
def test_strategy_variables_and_traced_calls_take_keras_assign():
    import tensorflow as tf

    with tf.distribute.MirroredStrategy(["/cpu:0"]).scope():
        mirrored = keras.Variable(np.zeros((2, 3), "float32"))
    array = _array((2, 3))
    assign_array(mirrored, array, adopt=True)
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(mirrored), array)

    plain = keras.Variable(np.zeros((2, 3), "float32"))

    @tf.function
    def traced():
        assign_array(plain, array * 2, adopt=True)
        return plain.value.read_value()

    np.testing.assert_array_equal(traced().numpy(), array * 2)


@pytest.mark.parametrize("shape", [(3, 5), (768, 300), (2, 3, 4)])
def test_aligned_empty_starts_on_64_bytes_and_transposed_equals_numpys_transpose(shape):
    from keras_vit.utils.assign import aligned_empty
    from keras_vit.weights.keys import transposed

    empty = aligned_empty(shape, "float32")
    assert empty.shape == shape and empty.dtype == np.float32 and empty.ctypes.data % 64 == 0
    assert empty.flags.c_contiguous and empty.flags.writeable
    matrix = np.random.default_rng(3).normal(size=(shape[0], int(np.prod(shape[1:])))).astype("float32")
    out = transposed(matrix, rows=7)
    np.testing.assert_array_equal(out, matrix.T)
    assert out.ctypes.data % 64 == 0 and out.flags.c_contiguous


def test_load_params_refuses_a_non_bool_adopt_and_changes_nothing():
    import keras_vit
    from keras_vit.weights import official

    model = keras_vit.VisionTransformer(
        patch_size=8, hidden_size=16, mlp_dim=32, num_heads=2, num_layers=1, input_shape=(16, 16, 3), classes=3
    )
    before = [np.array(w) for w in model.get_weights()]
    params = {k: v + 1.0 for k, v in official.model_params(model).items()}
    with pytest.raises(ValueError, match="adopt must be True or False"):
        official.load_params(model, params, adopt="yes")
    for a, b in zip(before, model.get_weights()):
        np.testing.assert_array_equal(a, b)
    official.load_params(model, params, adopt=True)
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(model.head.kernel), params["head/kernel"])
