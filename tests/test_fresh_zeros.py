"""`keras_vit.utils.assign.fresh_zeros` / `variables_adopt_fresh_zeros`: on TensorFlow a variable made from fresh
zeros keeps that block (no fill, no copy, pages untouched until written) and is an ordinary variable
afterwards; other initial values, strategies and backends take their own path; a model built while weights
follow reads zeros, takes a loader's arrays and keeps Keras' own methods (fit, weights files)."""

import re
import sys

import numpy as np
import pytest

import keras

from keras_vit.utils.assign import FreshZeros, assign_array, fresh_zeros, variables_adopt_fresh_zeros

tensorflow_only = pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="TensorFlow's variables")


def _variable_from(block):
    return keras.Variable(initializer=lambda shape, dtype=None: block, shape=block.shape, dtype=str(block.dtype))


def test_fresh_zeros_are_aligned_zeros_and_refuse_dtypes_numpy_lacks():
    for dtype in ("float32", "float16", "int32"):
        block = fresh_zeros((5, 7), dtype)
        assert isinstance(block, FreshZeros) and block.shape == (5, 7) and block.dtype == np.dtype(dtype)
        assert block.ctypes.data % 64 == 0 and block.flags.c_contiguous and not np.any(block)
    assert fresh_zeros((3,), "no_such_dtype") is None  # the caller makes its zeros as before


@tensorflow_only
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_a_variable_made_from_fresh_zeros_keeps_the_block_and_stays_an_ordinary_variable(dtype):
    import tensorflow as tf

    block = fresh_zeros((4, 6), dtype)
    with variables_adopt_fresh_zeros():
        variable = _variable_from(block)
    assert keras.backend.standardize_dtype(variable.dtype) == dtype
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(variable), np.zeros((4, 6)))
    block[1, 2] = 7.0  # the variable holds the block itself: no copy was made
    assert float(keras.ops.convert_to_numpy(variable)[1, 2]) == 7.0
    variable.assign_add(np.ones((4, 6), block.dtype))
    assert float(keras.ops.convert_to_numpy(variable)[1, 2]) == 8.0
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(tf.cast(variable.value, "float32") * 3.0)
    np.testing.assert_array_equal(tape.gradient(loss, variable.value).numpy().astype("float32"), np.full((4, 6), 3.0))
    new = np.arange(24).reshape(4, 6).astype(block.dtype)
    assign_array(variable, new.copy(), adopt=True)
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(variable), new)


def _resident_mb_of_mapping_holding(address: int) -> float:
    """Resident MB of the one mapping of this process that holds `address` (/proc/self/smaps): the block's own
    pages only, whatever other threads of the process allocate meanwhile."""
    with open("/proc/self/smaps") as smaps:
        inside = False
        for line in smaps:
            head = line.split()[0]
            if re.fullmatch(r"[0-9a-f]+-[0-9a-f]+", head):
                start, end = (int(x, 16) for x in head.split("-"))
                inside = start <= address < end
            elif inside and head == "Rss:":
                return int(line.split()[1]) / 1024
    raise AssertionError(f"no mapping holds {address:#x}")


@tensorflow_only
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/smaps")
def test_the_block_is_not_written_when_the_variable_is_made():
    block = fresh_zeros((64, 1024, 1024), "float32")  # 256 MB
    address = block.ctypes.data + block.nbytes // 2
    before = _resident_mb_of_mapping_holding(address)
    with variables_adopt_fresh_zeros():
        variable = _variable_from(block)
    written = _resident_mb_of_mapping_holding(address) - before
    assert written < 64, f"{written:.0f} MB of the 256 MB block of zeros written when the variable was made"
    block[63, 1023, 1023] = 5.0  # the variable holds the block itself: no copy was made either
    assert float(keras.ops.convert_to_numpy(variable[63, 1023, 1023])) == 5.0


@tensorflow_only
def test_other_initial_values_and_strategy_variables_are_made_as_usual():
    import tensorflow as tf

    outside = keras.Variable(initializer=keras.initializers.RandomNormal(seed=3), shape=(3, 5))
    with variables_adopt_fresh_zeros():
        inside = keras.Variable(initializer=keras.initializers.RandomNormal(seed=3), shape=(3, 5))
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(inside), keras.ops.convert_to_numpy(outside))
    with tf.distribute.MirroredStrategy(["/cpu:0"]).scope(), variables_adopt_fresh_zeros():
        block = fresh_zeros((2, 3), "float32")
        mirrored = _variable_from(block)
    block[0, 0] = 5.0  # a strategy's variable copied its initial value
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(mirrored), np.zeros((2, 3)))
    assert type(mirrored.value).__name__ != "UninitializedVariable"


def test_a_model_built_while_weights_follow_reads_zeros_loads_trains_and_saves(tmp_path):
    import keras_vit
    from keras_vit.nn.initializers import weights_follow
    from keras_vit.weights import official

    sizes = dict(
        patch_size=8,
        hidden_size=16,
        mlp_dim=32,
        num_heads=2,
        num_layers=2,
        input_shape=(16, 16, 3),
        classes=3,
        classifier_activation=None,
    )
    with weights_follow():
        model = keras_vit.VisionTransformer(**sizes)
    assert all(not np.any(keras.ops.convert_to_numpy(w)) for w in model.trainable_weights)
    rng = np.random.default_rng(0)
    params = {k: rng.normal(0, 0.1, v.shape).astype(v.dtype) for k, v in official.model_params(model).items()}
    official.load_params(model, {k: v.copy() for k, v in params.items()}, adopt=True)
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(model.head.kernel), params["head/kernel"])

    x = rng.uniform(-1, 1, (4, 16, 16, 3)).astype("float32")
    path = str(tmp_path / "zeros_then_loaded.weights.h5")
    model.save_weights(path)
    again = keras_vit.VisionTransformer(**sizes)
    again.load_weights(path)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(again(x)), keras.ops.convert_to_numpy(model(x)), atol=1e-6)

    model.compile(
        optimizer=keras.optimizers.SGD(0.1), loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    )
    before = keras.ops.convert_to_numpy(model.head.kernel).copy()
    history = model.fit(x, np.array([0, 1, 2, 0]), epochs=1, batch_size=4, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    assert np.any(keras.ops.convert_to_numpy(model.head.kernel) != before)
