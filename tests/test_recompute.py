"""`keras_vit.nn.recompute.zero_after`: an exact zero whatever the upstream gradient holds, so that adding it to
a recomputation's operand changes no value (the memory it saves is checked in test_mlp_core and
test_attention_core_tf, from XLA's own buffer reports)."""

import numpy as np
import pytest
import keras
from keras import ops

from keras_vit.nn.recompute import zero_after


@pytest.mark.parametrize("first", [0.0, -3.5, 1e30, np.inf, -np.inf, np.nan])
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_zero_after_is_an_exact_zero(first, dtype):
    upstream = np.full((2, 3, 4), 7.0, "float32")
    upstream[0, 0, 0] = first
    zero = zero_after(ops.convert_to_tensor(upstream), dtype)
    assert tuple(ops.shape(zero)) == (1,) and ops.convert_to_numpy(ops.cast(zero, "float32")).tolist() == [0.0]
    assert keras.backend.standardize_dtype(zero.dtype) == dtype
    operand = np.array([[-2.0, 0.5], [np.inf, 3.0]], "float32")
    same = ops.convert_to_numpy(ops.convert_to_tensor(operand) + ops.cast(zero, "float32"))
    assert np.array_equal(same, operand)
