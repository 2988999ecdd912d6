"""The same weights give the same outputs on the TF, JAX and PyTorch backends."""

import importlib.util
import os

import keras
import numpy as np
import pytest

import keras_vit
from conftest import python_run

SPECS = {
    "vit": dict(
        patch_size=8,
        hidden_size=32,
        mlp_dim=64,
        num_heads=4,
        num_layers=2,
        input_shape=(32, 32, 3),
        classes=5,
        representation_size=16,
    ),
    "hybrid": dict(
        patch_size=1,
        hidden_size=32,
        mlp_dim=64,
        num_heads=2,
        num_layers=1,
        resnet_layers=(1, 1),
        resnet_width=0.5,
        input_shape=(64, 64, 3),
        classes=5,
    ),
}
# the exact (erf) GELU, which PyTorch runs as its own native kernel and the others as the erf formula
SPECS["vit_exact_gelu"] = dict(SPECS["vit"], activation="gelu")

_RUN = """
import json, sys, numpy as np, keras, keras_vit
spec = json.loads(sys.argv[1])
model = keras_vit.VisionTransformer(classifier_activation=None, **spec)
model.load_weights(sys.argv[2])
np.save(sys.argv[4], keras.ops.convert_to_numpy(model(np.load(sys.argv[3]), training=False)))
print(keras.backend.backend())
"""


# PyTorch's hybrid row is in make test-slow (its ViT row and JAX's rows stay in the default suite)
@pytest.mark.parametrize(
    "backend, kind",
    [
        (backend, kind)
        if (backend, kind) != ("torch", "hybrid")
        else pytest.param(backend, kind, marks=pytest.mark.slow)
        for backend in ("jax", "torch")
        for kind in sorted(SPECS)
    ],
)
def test_backends_agree_with_tensorflow(tmp_path, backend, kind):
    if importlib.util.find_spec(backend) is None:
        pytest.skip(f"{backend} is not installed")
    import json

    spec = SPECS[kind]
    model = keras_vit.VisionTransformer(classifier_activation=None, **spec)
    rng = np.random.default_rng(0)
    for v in model.weights:
        v.assign((0.05 * rng.standard_normal(v.shape) + (1.0 if "gamma" in v.path else 0.0)).astype("float32"))
    x = rng.uniform(-1, 1, (2,) + spec["input_shape"]).astype("float32")
    expected = keras.ops.convert_to_numpy(model(x, training=False))
    weights, inputs, out = tmp_path / "w.weights.h5", tmp_path / "x.npy", tmp_path / "y.npy"
    model.save_weights(str(weights))
    np.save(inputs, x)
    env = dict(os.environ, KERAS_BACKEND=backend, CUDA_VISIBLE_DEVICES="")
    done = python_run(["-c", _RUN, json.dumps(spec), str(weights), str(inputs), str(out)], env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == backend
    np.testing.assert_allclose(np.load(out), expected, atol=1e-5)
