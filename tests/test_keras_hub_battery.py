"""keras-hub's generic model battery (`keras_hub/src/tests/test_case.py`: serialization, precision, quantization,
model saving) on `VisionTransformer`, run as keras-hub runs it on its own models. Skipped where keras-hub (and the
`grain` its test module imports) is not installed; the `test` extra installs both."""

import importlib.util

import numpy as np
import pytest

import keras_vit

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("keras_hub") is None or importlib.util.find_spec("grain") is None,
    reason="keras-hub's test battery needs keras-hub and grain (the test extra installs both)",
)

KW = dict(
    patch_size=8,
    hidden_size=32,
    mlp_dim=64,
    num_heads=4,
    num_layers=1,
    input_shape=(32, 32, 3),
    classes=3,
    classifier_activation=None,
)  # the logits: a softmax output stays float32 under mixed precision, on purpose
X = np.random.default_rng(0).uniform(-1, 1, (2, 32, 32, 3)).astype("float32")


def _battery():
    from keras_hub.src.tests.test_case import TestCase

    class Battery(TestCase):
        def runTest(self):  # noqa: N802 (unittest's name)
            pass

    case = Battery()
    case.setUp()
    return case


def test_serialization():
    _battery().run_serialization_test(keras_vit.VisionTransformer(**KW))


def test_precision():
    """Under mixed_float16, mixed_bfloat16 and bfloat16 the model's own policy, every sublayer's and the output
    follow the policy."""
    _battery().run_precision_test(keras_vit.VisionTransformer, dict(KW), X)


def test_quantization_policy_maps_round_trip():
    _battery().run_quantization_test(keras_vit.VisionTransformer(**KW), keras_vit.VisionTransformer, dict(KW), X)


def test_model_saving():
    _battery().run_model_saving_test(keras_vit.VisionTransformer, dict(KW), X)


@pytest.mark.slow  # int8 save and reload: tests/test_quantization.py keeps it in the default suite
def test_keras_vit_load_model_opens_a_quantized_keras_file(tmp_path):
    model = keras_vit.VisionTransformer(**KW)
    model.quantize("int8")
    model.save(str(tmp_path / "int8.keras"))
    again = keras_vit.load_model(str(tmp_path / "int8.keras"))
    assert again.quantized_layers() == model.quantized_layers()
    np.testing.assert_allclose(np.asarray(again(X)), np.asarray(model(X)), atol=1e-6)
    with pytest.raises(ValueError, match="holds a quantized model"):
        keras_vit.load_model(str(tmp_path / "int8.keras"), classes=5)
