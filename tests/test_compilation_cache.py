"""JAX's persistent compilation cache: on by default at `import keras_vit`, turned on by
`keras_vit.enable_compilation_cache` and by the predict and batch-inference CLIs. A second process takes the
compiled prediction from the cache (JAX's own cache-hit event counts it) instead of compiling it again; the switch
(`KERAS_VIT_COMPILATION_CACHE=0`), a cache of the user's own and `--no-compilation_cache` are kept to."""

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
    env = _jax_env(tmp_path / "cache")

    # the inference command writes a fresh output folder each run (one it finished would be left as it is)
    runs = iter(range(3))
    where = {"predict": lambda: ["--json"], "inference": lambda: [f"--output={tmp_path / f'out{next(runs)}'}"]}

    def run(*flags):
        source = str(tmp_path / "cat.png") if command == "predict" else str(tmp_path / "photos")
        weights = f"--weights={tmp_path / 'tiny.keras'}"
        return _last_json(_RUN, f"keras_vit.analysis.{command}", source, weights, *where[command](), *flags, env=env)

    cache = tmp_path / "cache" / "keras_vit" / "xla_cache"
    assert run() == {"code": 0, "hits": 0}
    assert any(name.startswith("jit_vit_forward") for name in os.listdir(cache))  # the CLI's jitted call
    again = run()
    assert again["code"] == 0 and again["hits"] >= 1
    assert run("--no-compilation_cache")["hits"] == 0  # the flag turns it off


def _last_json(code: str, *args: str, env: dict) -> dict:
    """The JSON line `python -c code args...` prints last, in a fresh process (its JAX starts without a cache)."""
    done = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _jax_env(cache_home) -> dict:
    """A JAX process's environment with keras_vit's cache directory under `cache_home` and its own cache left at
    its default (the test session turns it off)."""
    env = {k: v for k, v in os.environ.items() if k != "KERAS_VIT_COMPILATION_CACHE"}
    env.update(KERAS_BACKEND="jax", KERAS_VIT_CACHE_DIR=str(cache_home), PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="2")
    return dict(env, CUDA_VISIBLE_DEVICES="")


_LIBRARY = """
import json, os, sys
import jax
hits = []
jax.monitoring.register_event_listener(lambda event, **_: hits.append(event) if event.endswith("/cache_hits") else None)
import numpy as np
import keras_vit
model = keras_vit.load_model(sys.argv[1])
model.predict(np.zeros((2, 32, 48, 3), "float32"), verbose=0)
print(json.dumps({"hits": len(hits), "dir": jax.config.jax_compilation_cache_dir}))
"""


def test_the_library_keeps_compiled_programs_by_default(tmp_path):
    """`import keras_vit` turns JAX's cache on in the keras_vit cache directory: a second process's first
    `predict` after `load_model` is served from it. `KERAS_VIT_COMPILATION_CACHE=0` leaves it off, and a
    directory the user gave JAX is kept (ours is not even created)."""
    keras_vit.VisionTransformer(
        patch_size=8, hidden_size=16, mlp_dim=32, num_heads=2, num_layers=1, input_shape=(32, 48, 3), classes=5
    ).save(tmp_path / "tiny.keras")
    base = _jax_env(tmp_path / "home")
    # every program counts: a tiny model compiles faster than keras_vit's 0.2 s floor
    base["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"

    def run(**env):
        return _last_json(_LIBRARY, str(tmp_path / "tiny.keras"), env=dict(base, **env))

    ours = tmp_path / "home" / "keras_vit" / "xla_cache"
    first = run()
    assert first == {"hits": 0, "dir": str(ours)} and os.listdir(ours)
    assert run()["hits"] >= 1  # the second process's predict, from the cache

    # an entry a process without a size limit wrote carries no last-use time ("-atime"); a process with one reads
    # every entry's before it stores a program: it dates the entry, rather than failing every write ("Error
    # writing persistent compilation cache entry")
    entries = sorted(name for name in os.listdir(ours) if name.endswith("-cache"))
    (ours / "jit_elsewhere-0-cache").write_bytes((ours / entries[0]).read_bytes())  # a program this one never runs
    os.remove(ours / entries[-1])  # this process must compile and store one program again
    run()
    names = set(os.listdir(ours))
    assert entries[-1] in names and "jit_elsewhere-0-atime" in names

    off = run(KERAS_VIT_CACHE_DIR=str(tmp_path / "off"), KERAS_VIT_COMPILATION_CACHE="0")
    assert off == {"hits": 0, "dir": None} and not (tmp_path / "off").exists()

    own = run(KERAS_VIT_CACHE_DIR=str(tmp_path / "kept"), JAX_COMPILATION_CACHE_DIR=str(tmp_path / "mine"))
    assert own == {"hits": 0, "dir": str(tmp_path / "mine")} and os.listdir(tmp_path / "mine")
    assert not (tmp_path / "kept").exists()

    # a cache directory that cannot be made: the process runs without one
    (tmp_path / "file").write_text("not a directory")
    assert run(KERAS_VIT_CACHE_DIR=str(tmp_path / "file")) == {"hits": 0, "dir": None}


@pytest.mark.skipif(keras.backend.backend() == "jax", reason="the other backends' answer")
def test_other_backends_have_nothing_to_cache(tmp_path):
    assert keras_vit.enable_compilation_cache(str(tmp_path / "c")) is None and not (tmp_path / "c").exists()
