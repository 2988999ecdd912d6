"""keras_vit.save_safetensors read back by timm and by transformers themselves (slow: needs torch, timm,
transformers; `make test-slow` installs them, or point $KERAS_VIT_TORCH_PYTHON at a venv that has them)."""

import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import keras_vit
from conftest import FIXTURES, ROOT

REF = os.path.join(FIXTURES, "torch_reference")


# the interpreter that has torch: this one (make test-slow), or another venv's given in $KERAS_VIT_TORCH_PYTHON
TORCH_PYTHON = os.environ.get("KERAS_VIT_TORCH_PYTHON", sys.executable)


@pytest.mark.slow
@pytest.mark.parametrize("kind,approximate", [("timm", False), ("transformers", False), ("transformers", True)])
def test_our_safetensors_load_in_pytorch_libraries(tmp_path, kind, approximate):
    if TORCH_PYTHON == sys.executable:
        for package in ("torch", kind):
            if importlib.util.find_spec(package) is None:
                pytest.skip(f"{package} is not installed (make test-slow installs it)")
    x = np.random.default_rng(7).uniform(-1, 1, (2, 32, 32, 3)).astype("float32")
    # a model of ours with all-random weights (not a fixture's); transformers computes either GELU form
    model = keras_vit.VisionTransformer(
        8, 32, 64, 2, 2, input_shape=(32, 32, 3), classes=5, classifier_activation=None, gelu_approximate=approximate
    )
    rng = np.random.default_rng(8)
    model.set_weights([(rng.normal(size=w.shape) * 0.2).astype("float32") for w in model.get_weights()])
    np.save(tmp_path / "input.npy", x)
    np.save(tmp_path / "keras_logits.npy", model.predict(x, verbose=0))
    json.dump(json.load(open(os.path.join(REF, "versions.json")))["sizes"], open(tmp_path / "sizes.json", "w"))
    if kind == "timm":
        keras_vit.save_safetensors(model, tmp_path / "timm.safetensors", layout="timm")
    else:
        keras_vit.save_safetensors(model, tmp_path / "hf", layout="transformers")
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "tools", "torchvision_stub") if kind == "timm" else "")
    done = subprocess.run(
        [TORCH_PYTHON, os.path.join(ROOT, "tools", "check_torch_roundtrip.py"), kind, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-3000:] + done.stdout[-1000:]
    print(done.stdout.strip())
    assert float(done.stdout.strip().split()[-1]) <= 1e-5


def test_tanh_gelu_model_exports_to_transformers_with_its_tanh_activation(tmp_path):
    model = keras_vit.VisionTransformer(8, 32, 64, 2, 2, input_shape=(32, 32, 3), classes=5)
    keras_vit.save_safetensors(model, tmp_path / "hf", layout="transformers")
    assert json.load(open(tmp_path / "hf" / "config.json"))["hidden_act"] == "gelu_pytorch_tanh"
    assert keras_vit.load_model(tmp_path / "hf").gelu_approximate
