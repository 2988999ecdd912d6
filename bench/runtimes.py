"""Batch-1 CPU latency of one ViT in each deployment runtime, back to back in one run.

    .venv/bin/python bench/runtimes.py --model ViT-B/16            # Keras (XLA), LiteRT, onnxruntime, OpenVINO
    .venv/bin/python bench/runtimes.py --model ViT-B/16 --only timm  # timm eager (an interpreter with torch)

Rows: Keras TF predict step compiled with XLA; LiteRT (ai_edge_litert Interpreter, its default XNNPACK
delegate); onnxruntime (CPU provider); OpenVINO (CPU, f32 precision hint); timm eager under
`torch.no_grad` when torch is importable. Exports come from `hub_export.export`, random weights.
Median of `--iters` calls after `--warmup`, milliseconds; `vs Keras` is Keras' latency over the row's.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tools", "torchvision_stub"))
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from bench.throughput import _timm_name, timed  # noqa: E402


def keras_and_exports(name: str, size: int, iters: int, warmup: int) -> dict:
    import numpy as np
    import tensorflow as tf

    import hub_export
    import keras_vit
    from hub_export import formats

    model = keras_vit.create_model(name, input_shape=(size, size, 3), classifier_activation=None)
    x = np.random.default_rng(0).uniform(-1, 1, (1, size, size, 3)).astype("float32")
    step = tf.function(lambda images: model(images, training=False), jit_compile=True)
    rows = {"Keras TF (XLA)": timed(lambda: step(x).numpy(), iters, warmup)}
    with tempfile.TemporaryDirectory() as tmp:
        for label, fmt in (("LiteRT (XNNPACK)", "litert"), ("onnxruntime", "onnx"), ("OpenVINO (f32)", "openvino")):
            run = formats.runtime_model(
                hub_export.exported_file(hub_export.export(model, os.path.join(tmp, fmt), "classification", format=fmt))
            )
            rows[label] = timed(lambda: run(x), iters, warmup)
    return rows


def timm_eager(name: str, size: int, iters: int, warmup: int) -> dict:
    import timm
    import torch

    arch, size = _timm_name(name, size)
    model = timm.create_model(arch, img_size=size, act_layer="gelu_tanh").eval()  # the same network as ours
    x = torch.rand(1, 3, size, size) * 2 - 1

    def run():
        with torch.no_grad():
            model(x)

    return {"timm eager": timed(run, iters, warmup)}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="ViT-B/16")
    p.add_argument("--image_size", type=int, default=224)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--only", choices=["keras", "timm"], default=None, help="one side (e.g. timm from a torch venv)")
    args = p.parse_args(argv)
    from bench.machine import describe, header

    machine = describe()
    print(header(machine), flush=True)
    rows = {}
    if args.only != "timm":
        rows.update(keras_and_exports(args.model, args.image_size, args.iters, args.warmup))
    if args.only != "keras":
        try:
            rows.update(timm_eager(args.model, args.image_size, args.iters, args.warmup))
        except ImportError as e:
            print(f"(timm row skipped: {e})", file=sys.stderr)
    base = rows.get("Keras TF (XLA)")
    print(f"{args.model} @ {args.image_size}, batch 1, {machine['kind']}, {machine['cores']} CPUs")
    for label, seconds in rows.items():
        ratio = f"{base / seconds:5.2f}x" if base else "  -  "
        print(f"  {label:<18} {1000 * seconds:8.1f} ms   vs Keras {ratio}")
    print(json.dumps({"machine": machine, **{k: round(1000 * v, 2) for k, v in rows.items()}}))


if __name__ == "__main__":
    main()
