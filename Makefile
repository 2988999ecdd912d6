# keras-vit: `make demo` and `make test` work on a fresh machine with only Python 3.10+ and make.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-test

BENCH_STAMP := $(VENV)/.installed-bench

.PHONY: setup bench-setup demo lint test test-slow bench clean

$(STAMP): setup.cfg pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "torch==2.13.0" -e ".[test,onnx-jax]"
	$(PY) -m pip install -q --no-deps "jax2onnx==0.17.1"  # without its Orbax pin (docs/install.md, [onnx-jax])
	touch $(STAMP)

setup: $(STAMP)

# torch 2.13.0 is the CPU wheel on our machines; timm goes in without its torchvision dependency: the only
# torchvision that installs here (0.29.1) needs torch 2.14.1's CUDA build (5.5 GB), which runs timm at the same
# speed but adds ~0.4 GB of resident CUDA libraries to every timm row (docs/benchmarks-history.md, "torchvision"), so
# tools/torchvision_stub stands in for the two names timm imports.
$(BENCH_STAMP): $(STAMP)
	$(PY) -m pip install -q "torch==2.13.0" -e ".[test,bench]"
	$(PY) -m pip install -q --no-deps timm
	$(PY) -m pip install -q --no-deps "open-clip-torch==3.3.0"  # the image-text oracle (its torchvision: the stub)
	$(PY) -m pip install -q transformers
	touch $(BENCH_STAMP)

bench-setup: $(BENCH_STAMP)

demo: setup
	$(PY) -m recipes.demo

# ruff's formatter and its lint rules (pyproject.toml); `$(VENV)/bin/ruff format .` applies the format
lint: setup
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

# two workers (pytest-xdist), a file each at a time: the suite is half fresh processes and single-threaded
# tracing, which leaves the second core idle when run serially; files marked `long` start first (xdist would
# otherwise start the files with the most tests first)
test: setup lint
	$(PY) -m pytest -q -n 2 --dist loadfile --no-loadscope-reorder --durations=20

# everything: the default suite with the torch-backend legs, plus the slow tests (full ViT-B/16 vs timm)
test-slow: bench-setup
	$(PY) -m pytest -q -m ""

# the headline rows of BENCHMARKS.md (bench/throughput.py --help for the full grid)
bench: bench-setup
	$(PY) bench/throughput.py --models ViT-S/16 --modes train --batch_sizes 16 \
	    --frameworks timm,keras_tf,keras_tf_remat,keras_jax_fused,keras_jax_step_fused
	$(PY) bench/throughput.py --models ViT-B/16 --modes infer --batch_sizes 1,16 \
	    --frameworks timm,keras_tf,keras_jax_fused,keras_tf_int8,timm_int8
	$(PY) bench/memory.py --model ViT-S/16 --batch 16
	$(PY) bench/gemm.py --model ViT-S/16 --batch 16
	$(PY) bench/pipeline.py
	$(PY) bench/fewshot.py

clean:
	rm -rf $(VENV) build dist *.egg-info
