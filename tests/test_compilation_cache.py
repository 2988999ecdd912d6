"""`keras_vit.enable_compilation_cache` and the predict CLI on JAX: a second process takes the compiled
prediction from the cache (JAX's own cache-hit event counts it) instead of compiling it again."""

import json
import os
import subprocess
import sys

import keras
import pytest

import keras_vit
from conftest import ROOT

_RUN = """
import json, sys
import jax
hits = []
jax.monitoring.register_event_listener(lambda event, **_: hits.append(event) if event.endswith("/cache_hits") else None)
from keras_vit.analysis.predict import main
code = main(sys.argv[1:])
print(json.dumps({"code": code, "hits": len(hits)}))
"""


def test_a_second_jax_process_reuses_the_compiled_prediction(tmp_path):
    model = keras_vit.VisionTransformer(
        patch_size=8, hidden_size=16, mlp_dim=32, num_heads=2, num_layers=1, input_shape=(32, 32, 3), classes=5
    )
    model.save(tmp_path / "tiny.keras")
    from PIL import Image
    from skimage import data

    Image.fromarray(data.chelsea()).save(tmp_path / "cat.png")
    env = dict(
        os.environ,
        KERAS_BACKEND="jax",
        KERAS_VIT_CACHE_DIR=str(tmp_path / "cache"),
        PYTHONPATH=ROOT,
        TF_CPP_MIN_LOG_LEVEL="2",
        CUDA_VISIBLE_DEVICES="",
    )

    def run(*flags):
        done = subprocess.run(
            [
                sys.executable,
                "-c",
                _RUN,
                str(tmp_path / "cat.png"),
                f"--weights={tmp_path / 'tiny.keras'}",
                "--json",
                *flags,
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout.strip().splitlines()[-1])

    cache = tmp_path / "cache" / "keras_vit" / "xla_cache"
    assert run() == {"code": 0, "hits": 0}
    assert any(name.startswith("jit_vit_forward") for name in os.listdir(cache))  # the CLI's jitted call
    again = run()
    assert again["code"] == 0 and again["hits"] >= 1


@pytest.mark.skipif(keras.backend.backend() == "jax", reason="the other backends' answer")
def test_other_backends_have_nothing_to_cache(tmp_path):
    assert keras_vit.enable_compilation_cache(str(tmp_path / "c")) is None and not (tmp_path / "c").exists()
