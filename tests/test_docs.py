"""The docs hold: every Python block of docs/*.md runs (offline stand-ins in tests/doc_prelude.py; README.md's
run in tests/test_wheel.py with the installed package, through `run_blocks`),
blocks that need a TPU, a bucket or the network carry a visible no-run marker and are listed here, the README
fits in 120 lines, and the mkdocs site builds with --strict."""

import glob
import os
import shutil
import subprocess
import sys
from typing import Optional

import pytest

from conftest import python_run, ROOT

pytestmark = pytest.mark.long  # minutes: started first under `make test`'s two workers

NO_RUN = "<!-- no-run:"
# docs/own-data.md runs in tests/test_docs_own_data.py (it needs image folders and stand-in training lengths);
# README.md's blocks run in tests/test_wheel.py, with the installed wheel (run_blocks below, the same stand-ins)
PAGES = sorted(
    os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "*.md")) if not p.endswith("own-data.md")
)
# (page, first line of the block): the Python blocks that are shown, not run, and why is in the marker
EXPECTED_NO_RUN = set()


def _python_blocks(page: str):
    """[(code, no_run)] of the page's Python blocks; no_run when the line before the fence is a no-run marker."""
    with open(os.path.join(ROOT, page)) as f:
        lines = f.read().split("\n")
    out = []
    for i, line in enumerate(lines):
        if line.strip() == "```python":
            end = lines.index("```", i + 1)
            out.append(("\n".join(lines[i + 1 : end]), i > 0 and lines[i - 1].startswith(NO_RUN)))
    return out


_RUNNER = """
import sys, traceback
sys.path.insert(0, sys.argv[1])
namespace = {"__file__": sys.argv[2], "__name__": "__main__"}
exec(compile(open(sys.argv[2]).read(), sys.argv[2], "exec"), namespace)
for i, code in enumerate(open(sys.argv[3]).read().split("\\n#----block----\\n")):
    try:
        exec(compile(code, f"block {i}", "exec"), namespace)
    except Exception:
        print(f"BLOCK {i} FAILED:\\n{code}", file=sys.stderr)
        traceback.print_exc()
        sys.exit(1)
print("ran", i + 1)
"""


def run_blocks(python: str, code: list, tmp_path, pythonpath: list, env: Optional[dict] = None) -> str:
    """Runs the blocks `code` in order in one namespace with `python`, after tests/doc_prelude.py, in an empty
    directory with a local release mirror; returns stdout (fails the test naming the block that raised). `env` is
    the environment to start from (default: this process's)."""
    (tmp_path / "mirror").mkdir(parents=True)
    (tmp_path / "blocks.py").write_text("\n#----block----\n".join(code))
    env = dict(
        env or os.environ,
        KERAS_VIT_BASE_URL=f"file://{tmp_path / 'mirror'}",
        KERAS_VIT_CACHE_DIR=str(tmp_path / "cache"),
        TF_CPP_MIN_LOG_LEVEL="3",
        CUDA_VISIBLE_DEVICES="",
        PYTHONPATH=os.pathsep.join(pythonpath),
    )
    work = tmp_path / "work"
    work.mkdir()
    args = ["-c", _RUNNER, os.path.join(ROOT, "tests"), os.path.join(ROOT, "tests", "doc_prelude.py")]
    args.append(str(tmp_path / "blocks.py"))
    if python == sys.executable:  # this environment's Python: a child of the suite's TensorFlow interpreter
        done = python_run(args, cwd=work, env=env, timeout=900)
    else:  # another environment's (the wheel's venvs)
        done = subprocess.run([python, *args], cwd=work, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-5000:]
    assert done.stdout.strip().splitlines()[-1] == f"ran {len(code)}"
    return done.stdout


def runnable_blocks(page: str) -> list:
    return [c for c, no_run in _python_blocks(page) if not no_run]


@pytest.mark.parametrize("page", PAGES)
def test_every_python_block_runs(page, tmp_path):
    code = runnable_blocks(page)
    if not code:
        pytest.skip(f"{page} has no Python block to run")
    run_blocks(sys.executable, code, tmp_path, [ROOT, os.path.join(ROOT, "tests")])


def test_no_run_blocks_are_marked_and_listed():
    found = {
        (page, code.split("\n")[0])
        for page in PAGES + ["README.md", "docs/own-data.md"]
        for code, no_run in _python_blocks(page)
        if no_run
    }
    print("blocks shown but not run:", sorted(found))
    assert found == EXPECTED_NO_RUN


def test_readme_fits_on_a_few_screens():
    with open(os.path.join(ROOT, "README.md")) as f:
        assert len(f.read().splitlines()) <= 130  # 120 before the image-text section


def test_mkdocs_builds_strict(tmp_path):
    if shutil.which("mkdocs", path=os.path.dirname(sys.executable)) is None:
        pytest.fail("mkdocs is a test dependency (pip install -e '.[test]')")
    done = subprocess.run(
        [
            os.path.join(os.path.dirname(sys.executable), "mkdocs"),
            "build",
            "--strict",
            "--site-dir",
            str(tmp_path / "site"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
