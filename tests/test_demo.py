"""`make demo` end to end: accuracy on the held-out digits, few-shot, fine-tune, hub export."""

import json
import os
import subprocess
import sys

from conftest import ROOT


def test_demo_end_to_end(tmp_path):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=ROOT, CUDA_VISIBLE_DEVICES="")
    done = subprocess.run(["timeout", "-k", "5", "900", sys.executable, "-m", "recipes.demo",
                           f"--workdir={tmp_path}"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "outputs in" in done.stdout and "fine-tune test accuracy (48 px)" in done.stdout
    s = json.loads((tmp_path / "demo_summary.json").read_text())
    # measured 2026-11-22 on 2 cores: pre-train 95.6 %, 10-shot 95.1 %, fine-tune (48 px) 95.2 %, 213 s
    assert s["pretrain_test_accuracy"] >= 0.93
    assert s["fewshot"]["mnist5k_10shot"]["mean"] >= 0.90
    assert s["finetune_test_accuracy"] >= 0.92
    assert s["hub_max_abs_diff"] <= 1e-5
    assert (tmp_path / "hub_feature_vector" / "saved_model.pb").exists()
