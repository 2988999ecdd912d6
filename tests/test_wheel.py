"""The distribution as users install it: the wheel built from this tree, installed without dependencies into a
fresh virtual environment that borrows the test environment's packages, holds the label files and runs the
first steps of a new user (decode a prediction, classify a photo from the command line)."""

import os
import subprocess
import sys
import sysconfig
import zipfile

import pytest

import keras_vit
from conftest import ROOT
import test_docs

pytestmark = pytest.mark.long  # minutes: started first under `make test`'s two workers

DIST = "keras-vision-transformer"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("wheel")
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), ROOT],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (path,) = out.glob("*.whl")
    return path


def test_the_wheel_is_named_and_holds_the_package_data(wheel):
    assert wheel.name.startswith(DIST.replace("-", "_") + "-" + keras_vit.__version__)
    names = zipfile.ZipFile(wheel).namelist()
    for required in (
        "keras_vit/data/imagenet1k.tsv",
        "keras_vit/data/imagenet21k.tsv",
        "keras_vit/predict.py",
        "recipes/trainer/common.py",
        "hub_export/export.py",
    ):
        assert required in names, required
    assert not any(n.startswith("tests/") for n in names)
    metadata = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert f"Name: {DIST}" in metadata and "Requires-Dist: keras>=" in metadata
    for extra in ("tensorflow", "jax", "torch", "export", "onnx", "onnx-jax", "litert", "openvino", "train", "hub"):
        assert f"Provides-Extra: {extra}" in metadata, extra
    # the index page's description: the README, with no link an index page could not resolve
    import re

    assert "Content-Type: text/markdown" in metadata and "## Fine-tune on your own images" in metadata
    assert re.findall(r"\]\((?![a-z]+://|#)[^)]+\)", metadata) == []
    assert "docs/install.md" in metadata
    entry_points = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("entry_points.txt"))).decode()
    for command in ("keras-vit-train", "keras-vit-export", "keras-vit-predict", "keras-vit-inference"):
        assert command in entry_points, command


def _install(wheel, venv, *, blocked: str = "") -> tuple:
    """A fresh venv at `venv` with the wheel installed and the test environment's packages borrowed; `blocked`
    names a module every Python of that venv finds missing (as on an install without it). Returns (python, site,
    env)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    # the test environment's packages, appended after the venv's own (a plain path line: its .pth files, the
    # editable install of this tree among them, are not run)
    with open(os.path.join(site, "borrowed.pth"), "w") as f:
        f.write(sysconfig.get_paths()["purelib"] + "\n")
    if blocked:  # an `import` line in a .pth file runs at every start-up, before any user code
        with open(os.path.join(site, "blocked.pth"), "w") as f:
            f.write(f"import sys; sys.modules[{blocked!r}] = None\n")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
    env.pop("PYTHONPATH", None)  # a source tree on the path would make pip see the distribution as installed
    done = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "-q", str(wheel)],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return python, site, env


def test_installed_wheel_classifies_a_photo(wheel, tmp_path):
    """The README's blocks (classify, zero-shot, fine-tune, export) with the installed package on TensorFlow, the
    label files read from the wheel, the export served by onnxruntime, and the fine-tuned model through the predict
    and batch-inference commands; test_docs' offline stand-ins (tests/doc_prelude.py) replace the downloads."""
    python, site, env = _install(wheel, tmp_path / "venv")
    code = test_docs.runnable_blocks("README.md") + [
        "import keras_vit, numpy as np; print('from', keras_vit.__file__)\n"
        "p = np.zeros((1, 1000)); p[0, 207] = 1\n"
        "print('decoded:', keras_vit.decode_predictions(p, top=1)[0][0][1])",
        _SERVE_THE_EXPORT,
    ]
    out = test_docs.run_blocks(str(python), code, tmp_path / "readme", [])
    assert f"from {site}" in out and "decoded: golden retriever" in out
    assert "served: labels ['cat', 'coffee'] logits as Keras' within" in out, out[-2000:]
    _the_tuned_model_names_the_folders_classes(
        lambda *args: subprocess.run(
            [str(python), *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
        ),
        tmp_path / "readme" / "work",
        tmp_path,
    )


# appended to the README's blocks: the fine-tuned model saved, its ONNX export served by onnxruntime on a photo
# resized as the model takes it, named from the export's own metadata.json
_SERVE_THE_EXPORT = """
import json, numpy as np, onnxruntime
from PIL import Image
model.save("tuned.keras")
meta = json.load(open("exported/onnx/metadata.json"))
labels = meta["data_config"]["labels"]
pixels = np.asarray(Image.open("photos/cat/0.jpg").convert("RGB").resize((224, 224)), "float32")[None]
session = onnxruntime.InferenceSession("exported/onnx/model.onnx", providers=["CPUExecutionProvider"])
served = session.run(None, {session.get_inputs()[0].name: pixels})[0]
want = keras.ops.convert_to_numpy(model.logits_model()(pixels, training=False))  # the export: logits
assert served.shape == want.shape == (1, len(labels)), (served.shape, want.shape)
diff = float(np.abs(served - want).max())
assert diff <= 1e-4 * max(1.0, float(np.abs(want).max())), diff
print("served: labels", labels, "logits as Keras' within", diff, "->", labels[int(served.argmax())])
"""


def _the_tuned_model_names_the_folders_classes(run, work, cwd) -> None:
    """The README's fine-tuned model (saved by `_SERVE_THE_EXPORT` in `work`) through the predict CLI and batch
    inference over its training folder (run in `cwd`): both name the folder's two classes (the shards read here)."""
    tuned = run(
        "-m",
        "keras_vit.predict",
        str(work / "photos" / "cat" / "0.jpg"),
        f"--weights={work / 'tuned.keras'}",
        "--top=2",
    )
    assert tuned.returncode == 0, tuned.stderr[-3000:]
    assert {line.split(". ", 1)[1].split(" ")[0] for line in tuned.stdout.splitlines()[1:3]} == {"cat", "coffee"}
    batch = run(
        "-m", "keras_vit.inference", str(work / "photos"), f"--weights={work / 'tuned.keras'}", "--output=out",
        "--format=csv", "--top=1",
    )  # fmt: skip
    assert batch.returncode == 0, batch.stderr[-3000:]
    from keras_vit.analysis import shards

    rows = shards.read_output(str(cwd / "out"))
    assert len(rows["file"]) == 6 and set(rows["class_name"].ravel()) <= {"cat", "coffee"}, rows


@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_the_first_hour_on_jax_and_torch_without_tensorflow(wheel, tmp_path, backend):
    """The journey from the installed wheel on `backend` with `import tensorflow` failing: the README's Python
    blocks as written (classify, fine-tune on a folder of two classes, ONNX export), then the fine-tuned model's
    predictions, batch inference over the folder and the ONNX file served by onnxruntime, each naming the folder's
    classes; the export CLI's refusals and the recipes command's."""
    pytest.importorskip(backend)
    python, site, env = _install(wheel, tmp_path / "venv", blocked="tensorflow")
    env["KERAS_BACKEND"] = backend
    code = test_docs.runnable_blocks("README.md") + [
        "import keras, keras_vit, sys; print('from', keras_vit.__file__, keras.backend.backend(), "
        "sys.modules['tensorflow'])",
        _SERVE_THE_EXPORT,
    ]
    out = test_docs.run_blocks(str(python), code, tmp_path / "readme", [], env=env)
    assert f"from {site}" in out and f"{backend} None" in out
    assert os.path.exists(tmp_path / "readme" / "work" / "exported" / "onnx" / "model.onnx")
    # the export served in its runtime names the folder's classes and gives the model's logits
    assert "served: labels ['cat', 'coffee'] logits as Keras' within" in out, out[-2000:]
    work = tmp_path / "readme" / "work"

    def run(*args):
        return subprocess.run([str(python), *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)

    _the_tuned_model_names_the_folders_classes(run, work, tmp_path)

    # ONNX on this backend: the README's block above (its values: tests/test_export_backends.py)
    litert = run("-m", "hub_export", f"--weights={work / 'tuned.keras'}", "--format=litert", "--out=y")
    assert litert.returncode == 2 and not os.path.exists(tmp_path / "y")
    assert "KERAS_BACKEND=tensorflow keras-vit-export --weights=model.keras" in litert.stderr
    recipe = run("-m", "recipes.train", "--config=finetune:folder", "--workdir=runs")
    last = recipe.stderr.strip().splitlines()[-1]
    assert recipe.returncode == 1 and last.startswith("ImportError: the recipes (recipes.train) needs tensorflow")
    assert "pip install 'keras-vision-transformer[" in last and not os.path.exists(tmp_path / "runs")


def test_the_installed_commands_run_outside_a_checkout_beside_a_users_recipes_folder(wheel, tmp_path):
    """`keras-vit-train` with a config by name, from a directory holding a user's own `recipes` package (which
    `python -m recipes.train` would import instead of ours), and `keras-vit-export` on what it trained."""
    python, site, env = _install(wheel, tmp_path / "venv")
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "__init__.py").write_text("raise SystemExit('the user recipes package was imported')\n")
    tiny = [
        "--config.model.hidden_size=32",
        "--config.model.mlp_dim=64",
        "--config.model.num_layers=1",
        "--config.model.num_heads=2",
        "--config.model.patch_size=8",
        "--config.batch_size=16",
        "--config.dataset.eval_split=",
        "--config.total_steps=2",
        "--config.log_every=1",
    ]
    bin_dir = python.parent

    def run(*args):
        return subprocess.run(
            [str(a) for a in args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
        )

    shadowed = run(python, "-m", "recipes.train", "--config=demo:pretrain")
    assert "the user recipes package was imported" in shadowed.stderr  # why the console scripts exist
    trained = run(bin_dir / "keras-vit-train", "--config=demo:pretrain", "--workdir=run", *tiny)
    assert trained.returncode == 0, trained.stderr[-3000:]
    summary = (tmp_path / "run" / "summary.json").read_text()
    assert '"steps": 2' in summary
    model = next(p for p in (tmp_path / "run").rglob("*.keras"))
    exported = run(bin_dir / "keras-vit-export", f"--weights={model}", "--format=onnx", "--out=exported")
    assert exported.returncode == 0 and (tmp_path / "exported" / "model.onnx").exists(), exported.stderr[-3000:]
    predicted = run(bin_dir / "keras-vit-predict", "--help")
    assert predicted.returncode == 0 and "usage: keras-vit-predict" in predicted.stdout


@pytest.mark.slow
@pytest.mark.parametrize(
    "backend, extras, first, last",
    [
        ("jax", "jax,onnx-jax,text,hub", [], ["--no-deps", "jax2onnx==0.17.1"]),  # docs/install.md's [onnx-jax] step
        ("torch", "torch,onnx,text,hub", ["torch==2.13.0"], []),
    ],
)
def test_a_fresh_backend_install_runs_the_readme(wheel, tmp_path, backend, extras, first, last):
    """`pip install "<wheel>[jax]"` (or `[torch]`) into a new venv with pip's own resolver and nothing borrowed: no
    TensorFlow arrives, and the README's Python blocks, the predict CLI and an ONNX export run as written."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="", KERAS_BACKEND=backend)
    env.pop("PYTHONPATH", None)
    for packages in (first, [f"{wheel}[{extras}]", "scikit-image"], last):  # scikit-image: the prelude's photos
        if packages:
            done = subprocess.run(
                [str(python), "-m", "pip", "install", "-q", *packages],
                capture_output=True,
                text=True,
                timeout=1800,
                env=env,
            )
            assert done.returncode == 0, done.stderr[-3000:]
    code = test_docs.runnable_blocks("README.md") + [
        "import importlib.util; print('tensorflow installed:', importlib.util.find_spec('tensorflow') is not None)\n"
        "from importlib.metadata import version; print('orbax', version('orbax-checkpoint') if "
        "importlib.util.find_spec('orbax') else None)\n"
        "model.save('fine_tuned.keras')"
    ]
    out = test_docs.run_blocks(str(python), code, tmp_path / "readme", [], env=env)
    assert "tensorflow installed: False" in out
    if backend == "jax":  # [jax]'s own Orbax, not the one jax2onnx's pin would have put in its place
        found = out.split("orbax ")[1].split()[0]
        assert tuple(int(n) for n in found.split(".")[:2]) >= (0, 12), out
    work = tmp_path / "readme" / "work"
    assert (work / "exported" / "onnx" / "model.onnx").exists()
    exported = subprocess.run(
        [
            str(venv / "bin" / "keras-vit-export"),
            f"--weights={work / 'fine_tuned.keras'}",
            "--format=onnx",
            "--out=cli",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert exported.returncode == 0 and (tmp_path / "cli" / "model.onnx").exists(), exported.stderr[-3000:]
