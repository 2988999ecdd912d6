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


def test_the_clis_start_without_tensorflows_log_and_a_library_import_changes_none(monkeypatch):
    import recipes
    from keras_vit.utils import keras_backend

    for argv, cli in (
        (["python", "-m", "keras_vit.inference", "photos/"], True),
        (["python", "-m", "hub_export", "--help"], True),
        (["/venv/bin/python", "/venv/bin/keras-vit-predict", "x.jpg"], True),
        (["python", "my_script.py", "-m", "keras_vit.predict"], False),  # an argument, not the program
        (["python", "-c", "import keras_vit"], False),
    ):
        monkeypatch.setattr(sys, "orig_argv", argv)
        monkeypatch.setattr(sys, "argv", argv[1:] if argv[1] != "-m" else ["-m", *argv[3:]])
        assert keras_backend.running_a_cli() is cli, argv
    for argv, trainer in ((["python", "-m", "recipes.train"], True), (["python", "-m", "recipes.demo"], False)):
        monkeypatch.setattr(sys, "orig_argv", argv)
        monkeypatch.setattr(sys, "argv", ["-m"])
        assert recipes._is_the_trainer() is trainer, argv
    monkeypatch.delenv("TF_CPP_MIN_LOG_LEVEL", raising=False)
    monkeypatch.setattr(sys, "orig_argv", ["python", "-c", "import keras_vit"])
    keras_backend.quiet_in_a_cli()
    assert "TF_CPP_MIN_LOG_LEVEL" not in os.environ  # a library import changes no logging
    # a real start of a CLI, TensorFlow's C++ log unset
    env = {k: v for k, v in os.environ.items() if k not in ("KERAS_BACKEND", "TF_CPP_MIN_LOG_LEVEL")}
    env.update(PYTHONPATH=ROOT, KERAS_BACKEND="tensorflow")
    done = subprocess.run(
        [sys.executable, "-m", "keras_vit.predict", "--help"], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0 and "usage" in done.stdout, done.stderr[-2000:]
    noise = [line for line in done.stderr.splitlines() if ".cc:" in line or "absl::InitializeLog" in line]
    assert noise == [], noise
