"""A backend Keras cannot load is named in one line by `import keras_vit`: which backend was tried, from which
setting, why it failed and what fixes it (Keras does not fall back to another backend)."""

import json
import os
import subprocess
import sys

from conftest import ROOT
from keras_vit.utils.keras_backend import chosen_backend


def test_the_backend_is_read_as_keras_reads_it(tmp_path, monkeypatch):
    monkeypatch.delenv("KERAS_BACKEND", raising=False)
    monkeypatch.setenv("KERAS_HOME", str(tmp_path))
    assert chosen_backend() == ("tensorflow", "Keras' default, with KERAS_BACKEND unset")
    (tmp_path / "keras.json").write_text(json.dumps({"backend": "jax"}))
    assert chosen_backend() == ("jax", str(tmp_path / "keras.json"))
    monkeypatch.setenv("KERAS_BACKEND", "torch")
    assert chosen_backend() == ("torch", "KERAS_BACKEND")


def test_a_missing_backend_is_one_line_naming_it_and_the_fix(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"}
    env.update(KERAS_HOME=str(tmp_path), PYTHONPATH=ROOT)
    code = "import sys\nsys.modules['tensorflow'] = None  # as where TensorFlow is not installed\nimport keras_vit\n"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 1 and len(lines) <= 15, done.stderr
    last = lines[-1]
    # Keras writes its keras.json (backend "tensorflow") into KERAS_HOME on its first import, before the backend
    assert last.startswith("ImportError: keras_vit needs Keras, whose backend 'tensorflow' (from ")
    assert "does not fall back" in last and "pip install 'keras-vision-transformer[tensorflow]'" in last
    assert "KERAS_BACKEND=jax" in last  # installed in the test environment
