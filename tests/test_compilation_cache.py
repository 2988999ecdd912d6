"""`keras_vit.enable_compilation_cache` and the predict and batch-inference CLIs on JAX: a second process takes
the compiled prediction from the cache (JAX's own cache-hit event counts it) instead of compiling it again."""

import json
import os
import subprocess
import sys

import keras
import pytest

import keras_vit
from conftest import ROOT

_RUN = """
import importlib, json, sys
import jax
hits = []
jax.monitoring.register_event_listener(lambda event, **_: hits.append(event) if event.endswith("/cache_hits") else None)
main = importlib.import_module(sys.argv[1]).main
code = main(sys.argv[2:])
print(json.dumps({"code": code, "hits": len(hits)}))
"""


@pytest.mark.parametrize("command", ["predict", "inference"])
def test_a_second_jax_process_reuses_the_compiled_prediction(tmp_path, command):
    model = keras_vit.VisionTransformer(
        patch_size=8, hidden_size=16, mlp_dim=32, num_heads=2, num_layers=1, input_shape=(32, 32, 3), classes=5
    )
    model.save(tmp_path / "tiny.keras")
    from PIL import Image
    from skimage import data

    Image.fromarray(data.chelsea()).save(tmp_path / "cat.png")
    (tmp_path / "photos").mkdir()
    Image.fromarray(data.chelsea()).save(tmp_path / "photos" / "cat.png")
    env = dict(
        os.environ,
        KERAS_BACKEND="jax",
        KERAS_VIT_CACHE_DIR=str(tmp_path / "cache"),
        PYTHONPATH=ROOT,
        TF_CPP_MIN_LOG_LEVEL="2",
        CUDA_VISIBLE_DEVICES="",
    )

    # the inference command writes a fresh output folder each run (one it finished would be left as it is)
    runs = iter(range(3))
    where = {"predict": lambda: ["--json"], "inference": lambda: [f"--output={tmp_path / f'out{next(runs)}'}"]}

    def run(*flags):
        source = str(tmp_path / "cat.png") if command == "predict" else str(tmp_path / "photos")
        done = subprocess.run(
            [
                sys.executable,
                "-c",
                _RUN,
                f"keras_vit.analysis.{command}",
                source,
                f"--weights={tmp_path / 'tiny.keras'}",
                *where[command](),
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
    assert run("--no-compilation_cache")["hits"] == 0  # the flag turns it off


@pytest.mark.skipif(keras.backend.backend() == "jax", reason="the other backends' answer")
def test_other_backends_have_nothing_to_cache(tmp_path):
    assert keras_vit.enable_compilation_cache(str(tmp_path / "c")) is None and not (tmp_path / "c").exists()
