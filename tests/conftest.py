"""Shared pytest set-up: quiet TF logs, the repository root on sys.path, tiny model builders."""

import os
import sys

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# no persistent XLA cache in the home directory: tests that check it turn it on in a directory of their own
os.environ.setdefault("KERAS_VIT_COMPILATION_CACHE", "0")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

FIXTURES = os.path.join(ROOT, "tests", "fixtures")
FLAX_FIXTURES = os.path.join(FIXTURES, "flax_reference")


# the image tower of the contrastive-training tests (test_lit.py, test_caption_pairs.py)
LIT_TOWER = dict(hidden_size=32, mlp_dim=64, num_layers=2, num_heads=4, patch_size=8)


@pytest.fixture(scope="module")
def lit_init_model(tmp_path_factory):
    """A random image tower of `LIT_TOWER` at 32 px, saved as a .keras file (a contrastive run's init source)."""
    import keras

    import keras_vit

    keras.utils.set_random_seed(1)
    model = keras_vit.VisionTransformer(**LIT_TOWER, input_shape=(32, 32, 3), classes=10, name="tower")
    path = str(tmp_path_factory.mktemp("init") / "tower.keras")
    model.save(path)
    return path


def stop_after(step: int):
    """A Keras callback for the trainer that raises KeyboardInterrupt after training step `step`, as a run killed
    then would stop (its last checkpoint is what a resume starts from)."""
    import keras

    class StopAfter(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            if batch + 1 >= step:
                raise KeyboardInterrupt("stopped as a killed run stops")

    return StopAfter()


def assert_resumes_to_uninterrupted(train_and_evaluate, config, tmp_path, stop: int, resumed_from: int) -> None:
    """Runs `config` whole, then stopped after step `stop` and resumed in another workdir: the resume starts from
    the checkpoint of step `resumed_from` and ends with the uninterrupted run's weights (1e-5)."""
    import keras
    import numpy as np
    import pytest

    full = train_and_evaluate(config, str(tmp_path / "full"))
    with pytest.raises(KeyboardInterrupt):
        train_and_evaluate(config, str(tmp_path / "stopped"), callbacks=[stop_after(stop)])
    resumed = train_and_evaluate(config, str(tmp_path / "stopped"))
    assert resumed["resumed_from"] == resumed_from
    a = keras.models.load_model(full["model"], compile=False)
    b = keras.models.load_model(resumed["model"], compile=False)
    for x, y in zip(a.weights, b.weights):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), atol=1e-5, rtol=0, err_msg=x.path)


def call_main(main, *args: str) -> tuple:
    """(exit status, stderr) of a command's `main(argv)` called in this process: for refusals that happen before
    any work, which need no fresh interpreter (each command keeps one test that runs it as users type it)."""
    import contextlib
    import io

    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            status = main(list(args))
        except SystemExit as e:  # argparse's refusals
            status = e.code
    return status, err.getvalue()


# An interpreter per pytest worker and backend (TensorFlow, JAX) that imported Keras once and forks a child for each
# `python -m ...` / `python -c ...` a test runs on that backend (`python_run`): each child runs as a fresh `python`
# would (its argv, environment, working directory, sys.path from PYTHONPATH, `__main__`, exit status), without its
# 5-9 s of imports. Forking before the backend runs any op is safe (JAX creates its XLA client on first use, after
# the fork). Keras imports huggingface_hub, which reads its settings from the environment on import, and JAX reads
# its JAX_* flags then: a command whose environment differs from the server's in anything but the variables read
# later (`_READ_LATER`) runs in a fresh interpreter.
_SERVER = """
import json, os, runpy, signal, sys, time, traceback

import keras  # noqa: F401  (Keras and its backend, imported once for every command served)

server_path = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
standard = [p for p in sys.path[1:] if p not in server_path]
for line in sys.stdin:
    request = json.loads(line)
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            os.chdir(request["cwd"])
            os.environ.clear()
            os.environ.update(request["env"])
            given = [p for p in request["env"].get("PYTHONPATH", "").split(os.pathsep) if p]
            for fd, path in ((0, os.devnull), (1, request["stdout"]), (2, request["stderr"])):
                os.dup2(os.open(path, os.O_RDONLY if fd == 0 else os.O_WRONLY | os.O_CREAT | os.O_TRUNC), fd)
            args = request["args"]
            if args[0] == "-m":
                sys.path[:] = [os.getcwd(), *given, *standard]
                sys.argv = ["-m", *args[2:]]  # as python -m sets it while it finds the module
                runpy.run_module(args[1], run_name="__main__", alter_sys=True)
            elif args[0] == "-c":
                sys.path[:] = ["", *given, *standard]
                sys.argv = ["-c", *args[2:]]
                exec(compile(args[1], "<string>", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
            else:
                sys.path[:] = [os.path.dirname(os.path.abspath(args[0])), *given, *standard]
                sys.argv = list(args)
                runpy.run_path(args[0], run_name="__main__")
        except SystemExit as e:
            if isinstance(e.code, str):
                print(e.code, file=sys.stderr)
            code = 1 if isinstance(e.code, str) else (e.code or 0)
        except BaseException:
            traceback.print_exc()
            code = 1
        sys.stdout.flush()
        sys.stderr.flush()
        sys.exit(code)
    deadline = time.monotonic() + request["timeout"]
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            returncode = os.waitstatus_to_exitcode(status)
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            returncode = "timeout"
            break
        time.sleep(0.02)
    print(json.dumps({"returncode": returncode}), flush=True)
"""
_servers = {}
_SERVER_ENV = dict(CUDA_VISIBLE_DEVICES="", TF_CPP_MIN_LOG_LEVEL="3")
_SERVED = ("tensorflow", "jax")
# read when used, not when Keras or its backend are imported (keras_vit is imported by each child itself)
_READ_LATER = {"PYTHONPATH", "CUDA_VISIBLE_DEVICES", "TF_CPP_MIN_LOG_LEVEL", "PYTEST_CURRENT_TEST", "PWD", "OLDPWD"}
_READ_LATER_PREFIXES = ("KERAS_VIT_",)
# XLA parses XLA_FLAGS when JAX creates its CPU client, on the first op: in the child, after the fork
_READ_LATER_ON = {"jax": {"XLA_FLAGS"}}


def _server(backend: str):
    import atexit
    import subprocess

    server = _servers.get(backend)
    if server is None or server.poll() is not None:
        env = dict(os.environ, PYTHONPATH=ROOT, KERAS_BACKEND=backend, **_SERVER_ENV)
        server = _servers[backend] = subprocess.Popen(
            [sys.executable, "-c", _SERVER], cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        atexit.register(server.kill)
    return server


def _backend(args, env) -> str:
    """The Keras backend the command will load: the trainer's own `--backend` flag (read by recipes/__init__.py
    before Keras loads), else KERAS_BACKEND, else Keras' default."""
    if list(args[:2]) == ["-m", "recipes.train"]:
        from recipes import _backend_flag

        flag = _backend_flag(["-m", *args[2:]])
        if flag in ("tensorflow", "jax"):
            return flag
    return env.get("KERAS_BACKEND", "tensorflow")


def python_run(args, *, env=None, cwd=None, timeout: int = 600):
    """`subprocess.run([sys.executable, *args], capture_output=True, text=True, ...)` for a command (`-m module ...`,
    `-c code ...` or `script.py ...`) on the TensorFlow or JAX backend, run in a child forked from this worker's
    interpreter for that backend (`_SERVER`); another backend, or an environment that differs from the server's in
    what is read at import, runs in a fresh interpreter as before. A timeout raises `subprocess.TimeoutExpired`, as
    subprocess.run does."""
    import json
    import subprocess
    import tempfile

    env = dict(os.environ if env is None else env)
    cwd = str(cwd or os.getcwd())
    backend = _backend(args, env)
    server_env = dict(os.environ, KERAS_BACKEND=backend, **_SERVER_ENV)
    given = dict(env, KERAS_BACKEND=backend)
    differs = {k for k in set(given) | set(server_env) if given.get(k) != server_env.get(k)}
    later = _READ_LATER | _READ_LATER_ON.get(backend, set())
    if backend not in _SERVED or any(k not in later and not k.startswith(_READ_LATER_PREFIXES) for k in differs):
        return subprocess.run(
            [sys.executable, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout
        )
    server = _server(backend)
    with tempfile.TemporaryDirectory() as folder:
        out, err = os.path.join(folder, "stdout"), os.path.join(folder, "stderr")
        request = dict(args=[str(a) for a in args], env=env, cwd=cwd, stdout=out, stderr=err, timeout=timeout)
        server.stdin.write(json.dumps(request) + "\n")
        server.stdin.flush()
        answer = json.loads(server.stdout.readline())
        with open(out) as o, open(err) as e:
            stdout, stderr = o.read(), e.read()
    if answer["returncode"] == "timeout":
        raise subprocess.TimeoutExpired([sys.executable, *args], timeout, stdout, stderr)
    return subprocess.CompletedProcess([sys.executable, *args], answer["returncode"], stdout, stderr)


def tiny_recipe_config(**run):
    """The demo's pre-training config with a one-block, 32-wide ViT of 8-pixel patches, trained without XLA (the
    suite's recipe tests are about files, data and schedules; compiling each run's step was half their time; the
    demo and the first hour's commands train with XLA). `run`: top-level settings over these defaults."""
    from recipes.configs import demo

    c = demo.get_config("pretrain")
    c.model.update(hidden_size=32, mlp_dim=64, num_layers=1, num_heads=2, patch_size=8)
    c.update(**{**dict(batch_size=8, total_steps=2, log_every=1, checkpoint_every=2, jit_compile=False), **run})
    return c


def run_with_torch(arguments, timeout: int = 900):
    """Runs `python <arguments>` in a Python with torch and timm (`KERAS_VIT_TORCH_PYTHON`, else this one) with
    the torchvision stand-in on the path; skips the calling test where torch or timm is missing."""
    import subprocess

    import pytest

    python = os.environ.get("KERAS_VIT_TORCH_PYTHON", sys.executable)
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "tools", "torchvision_stub"))
    done = subprocess.run([python, *arguments], capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT)
    missing = [m for m in ("torch", "timm", "open_clip") if f"No module named '{m}'" in done.stderr]
    if missing:
        pytest.skip(f"needs {missing[0]} (make test-slow, or KERAS_VIT_TORCH_PYTHON)")
    assert done.returncode == 0, done.stderr[-3000:] + done.stdout[-1000:]
    return done


def run_on_backend(script: str, backend: str, *arguments, timeout: int = 300) -> dict:
    """Runs `python -c script arguments...` on Keras backend `backend` (CPU only) and returns the JSON dict the
    script prints last; skips the calling test where the backend's package is missing."""
    import json

    import pytest

    pytest.importorskip(backend)
    env = dict(os.environ, KERAS_BACKEND=backend, PYTHONPATH=ROOT, CUDA_VISIBLE_DEVICES="", TF_CPP_MIN_LOG_LEVEL="3")
    done = python_run(["-c", script, *arguments], env=env, timeout=timeout)  # forked on TensorFlow and JAX
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def timm_reads_save_pretrained(model, x, directory) -> float:
    """Max |logit difference| of timm's own `local-dir:` loader reading `save_pretrained(model)` strictly
    (tools/check_torch_roundtrip.py) against the model's own logits on `x`."""
    import numpy as np

    import keras_vit

    np.save(os.path.join(directory, "input.npy"), x)
    np.save(os.path.join(directory, "keras_logits.npy"), model.predict(x, verbose=0))
    keras_vit.save_pretrained(model, os.path.join(directory, "repo"))
    done = run_with_torch(
        [os.path.join(ROOT, "tools", "check_torch_roundtrip.py"), "timm_dir", str(directory)], timeout=600
    )
    return float(done.stdout.strip().split()[-1])


def pytest_collection_modifyitems(config, items):
    """Files marked `long` (`pytestmark = pytest.mark.long`) run first: under `make test`'s two workers a long
    file started last would keep one worker busy after the other has finished."""
    items.sort(key=lambda item: item.get_closest_marker("long") is None)  # a stable sort: the order otherwise kept
