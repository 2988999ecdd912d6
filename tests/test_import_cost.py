"""`import keras_vit` costs nothing beyond importing Keras: on JAX it loads no TensorFlow, and no package that
Keras itself did not load (export runtimes, hub clients, plotting stay behind the features that need them)."""

import json
import os
import subprocess
import sys

from conftest import ROOT

_PROBE = """
import json, sys
import keras
before = set(sys.modules)
import keras_vit
added = sorted({name.split(".")[0] for name in set(sys.modules) - before})
print(json.dumps({"added": added, "tensorflow": "tensorflow" in sys.modules}))
"""


def test_import_on_jax_adds_only_keras_vit_and_no_tensorflow():
    env = dict(os.environ, KERAS_BACKEND="jax", PYTHONPATH=ROOT, CUDA_VISIBLE_DEVICES="")
    done = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"added": ["keras_vit"], "tensorflow": False}
