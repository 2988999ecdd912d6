"""examples/quickstart.ipynb runs end to end (nbclient), so it never rots."""

import os
import sys

import nbformat

from conftest import ROOT

import nbclient  # noqa: E402  a test dependency: a broken install must fail, not skip


def test_quickstart_notebook_executes(monkeypatch):
    # the kernel is started as `python -m ipykernel_launcher`: put this interpreter's directory first
    monkeypatch.setenv("PATH", os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "2")
    nb = nbformat.read(os.path.join(ROOT, "examples", "quickstart.ipynb"), as_version=4)
    nbclient.NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": ROOT}}).execute()
    outputs = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    assert "max |keras_vit - original Flax|" in outputs and "attention_rollout" in outputs
    assert outputs.count("toy class") >= 3  # the classify cell named a class for each of the three photos
    assert any("image/png" in o.get("data", {}) for c in nb.cells for o in c.get("outputs", []))
