"""The timm oracle (`tools/oracle_timm_registry.py`) as a slow test: every architecture of timm's
`vision_transformer`, `vision_transformer_hybrid`, `deit`, `eva` and `naflexvit` modules up to 400 M parameters, built
tiny by timm and written by timm, loads with timm's logits or is refused naming why, as a repository directory, as a
bare state dict under its timm name and at a non-square size, and what `save_pretrained` writes of it timm reads
back strictly with its own logits; at least 95 % match. Needs torch and timm (`make test-slow`)."""

import importlib.util
import os
import subprocess
import sys
import json

import pytest

from conftest import ROOT

pytestmark = pytest.mark.slow


@pytest.mark.skipif(
    importlib.util.find_spec("timm") is None or importlib.util.find_spec("torch") is None,
    reason="the oracle needs timm and torch (make bench-setup)",
)
def test_every_timm_vit_architecture_matches_timm_or_is_refused_by_name(tmp_path):
    out = tmp_path / "report.json"
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([ROOT, os.path.join(ROOT, "tools", "torchvision_stub")]),
        CUDA_VISIBLE_DEVICES="",
        TF_CPP_MIN_LOG_LEVEL="3",
    )
    done = subprocess.run(
        [sys.executable, os.path.join(ROOT, "tools", "oracle_timm_registry.py"), "--out", str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=5400,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.load(open(out))
    bad = {
        name: {case: r for case, r in result.items() if r["outcome"] in ("wrong", "error")}
        for name, result in report["report"].items()
    }
    bad = {name: cases for name, cases in bad.items() if cases}
    print(json.dumps(report["summary"]))
    assert not bad, json.dumps(bad, indent=1)[:6000]
    matched = sum(r.get("match", 0) for r in report["summary"].values())
    assert matched >= 0.95 * sum(sum(r.values()) for r in report["summary"].values())  # issue 45's bar
