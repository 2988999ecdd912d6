"""`keras_vit.nn.affine`: `x @ kernel + bias` as one `torch.addmm` on PyTorch, the two operations elsewhere.

Against float64 numpy on both backends; on PyTorch the blocks' dense products are counted as `addmm` calls (four per
block, five with SwiGLU), a plain `Dense` gives its own call's output, and int8 or activated `Dense` layers are
called as themselves.
"""

from conftest import run_on_backend

_CHECK = r"""
import json
import numpy as np, keras
from keras import ops
import keras_vit
from keras_vit.nn.affine import affine, dense_affine

rng = np.random.default_rng(0)
x = rng.normal(size=(2, 5, 7)).astype("float32")
kernel = rng.normal(size=(7, 3)).astype("float32")
bias = rng.normal(size=(3,)).astype("float32")
exact = x.astype("float64") @ kernel.astype("float64") + bias
x = ops.convert_to_tensor(x)  # what a layer hands `affine`: a backend tensor
out = {
    "error": float(np.max(np.abs(ops.convert_to_numpy(affine(x, kernel, bias)) - exact))),
    "no_bias": float(np.max(np.abs(ops.convert_to_numpy(affine(x, kernel, None)) - (exact - bias)))),
    "bf16": keras.backend.standardize_dtype(affine(ops.cast(x, "bfloat16"), kernel, bias).dtype),
}
out["bf16_error"] = float(np.max(np.abs(
    ops.convert_to_numpy(ops.cast(affine(ops.cast(x, "bfloat16"), kernel, bias), "float32")) - exact)))

plain = keras.layers.Dense(3, bias_initializer="ones")
plain.build((None, 7))
out["plain"] = float(np.max(np.abs(ops.convert_to_numpy(dense_affine(plain, x)) - ops.convert_to_numpy(plain(x)))))
relu = keras.layers.Dense(3, activation="relu")
relu.build((None, 7))
out["activated"] = float(np.max(np.abs(ops.convert_to_numpy(dense_affine(relu, x)) - ops.convert_to_numpy(relu(x)))))
int8 = keras.layers.Dense(3)
int8.build((None, 7))
int8.quantize("int8")
out["int8"] = float(np.max(np.abs(ops.convert_to_numpy(dense_affine(int8, x)) - ops.convert_to_numpy(int8(x)))))

calls = [0]
if keras.backend.backend() == "torch":
    import torch
    real = torch.addmm
    def counting(*args, **kwargs):
        calls[0] += 1
        return real(*args, **kwargs)
    torch.addmm = counting
out["addmm_calls"] = []
for mlp in ({}, {"swiglu": True}):
    model = keras_vit.VisionTransformer(patch_size=4, hidden_size=8, mlp_dim=16, num_heads=2, num_layers=3,
                                        input_shape=(8, 8, 3), classes=3, **mlp)
    calls[0] = 0
    model(rng.uniform(-1, 1, (2, 8, 8, 3)).astype("float32"), training=False)
    out["addmm_calls"].append(calls[0])
print(json.dumps(out))
"""


def _check(backend):
    out = run_on_backend(_CHECK, backend)
    assert out["error"] < 1e-5 and out["no_bias"] < 1e-5, out
    assert out["bf16"] == "bfloat16" and out["bf16_error"] < 0.1, out
    assert out["plain"] < 1e-6, out  # Keras' own Dense: the same sum, rounded in another order on PyTorch
    assert out["activated"] == 0.0 and out["int8"] == 0.0, out
    return out


def test_affine_on_pytorch_is_one_addmm_per_dense_product():
    out = _check("torch")
    # per block: q/k/v, the out projection, and the MLP's two products (SwiGLU's three)
    assert out["addmm_calls"] == [3 * 4, 3 * 5], out


def test_affine_on_tensorflow_keeps_the_two_operations():
    out = _check("tensorflow")
    assert out["addmm_calls"] == [0, 0], out
