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

DIST = "keras-vision-transformer"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("wheel")
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                           "-w", str(out), ROOT], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    (path,) = out.glob("*.whl")
    return path


def test_the_wheel_is_named_and_holds_the_package_data(wheel):
    assert wheel.name.startswith(DIST.replace("-", "_") + "-" + keras_vit.__version__)
    names = zipfile.ZipFile(wheel).namelist()
    for required in ("keras_vit/data/imagenet1k.tsv", "keras_vit/data/imagenet21k.tsv", "keras_vit/predict.py",
                     "recipes/trainer/common.py", "hub_export/export.py"):
        assert required in names, required
    assert not any(n.startswith("tests/") for n in names)
    metadata = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert f"Name: {DIST}" in metadata and "Requires-Dist: keras>=" in metadata
    for extra in ("tensorflow", "jax", "torch", "export", "train", "hub"):
        assert f"Provides-Extra: {extra}" in metadata, extra


def test_installed_wheel_classifies_a_photo(wheel, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    # the test environment's packages, appended after the venv's own (a plain path line: its .pth files, the
    # editable install of this tree among them, are not run)
    with open(os.path.join(site, "borrowed.pth"), "w") as f:
        f.write(sysconfig.get_paths()["purelib"] + "\n")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
    env.pop("PYTHONPATH", None)  # a source tree on the path would make pip see the distribution as installed
    done = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "-q",
                           str(wheel)], capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    script = (
        "import keras_vit, numpy as np\n"
        "print(keras_vit.__file__)\n"
        "p = np.zeros((1, 1000)); p[0, 207] = 1\n"
        "print(keras_vit.decode_predictions(p, top=1)[0][0][1])\n"
        "m = keras_vit.VisionTransformer(patch_size=8, hidden_size=16, mlp_dim=32, num_heads=2, num_layers=1,"
        " input_shape=(32, 32, 3), classes=1000)\n"
        "m.save('tiny.keras')\n"
        "from PIL import Image; from skimage import data; Image.fromarray(data.astronaut()).save('photo.png')\n")
    first = subprocess.run([str(python), "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                           timeout=300)
    assert first.returncode == 0, first.stderr[-3000:]
    location, name = first.stdout.split("\n")[:2]
    assert location.startswith(site) and name == "golden retriever"
    cli = subprocess.run([str(python), "-m", "keras_vit.predict", "photo.png", "--weights=tiny.keras", "--top=3"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert cli.returncode == 0, cli.stderr[-3000:]
    assert cli.stdout.startswith("photo.png\n  1. ") and len(cli.stdout.strip().splitlines()) == 4
    # the README's first screen (classify, fine-tune, export) with the installed package; test_docs' offline
    # stand-ins (tests/doc_prelude.py) replace the downloads
    code = test_docs.runnable_blocks("README.md") + ["import keras_vit; print('from', keras_vit.__file__)"]
    out = test_docs.run_blocks(str(python), code, tmp_path / "readme", [])
    assert f"from {site}" in out
