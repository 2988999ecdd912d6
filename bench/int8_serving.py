"""CPU serving latency of a ViT in int8, each runtime by its own quantizer, against timm fp32 and timm int8.

    .venv/bin/python bench/int8_serving.py --model ViT-B/16 --rounds 3 --torch_python /path/to/venv/bin/python

The exports are written once by `hub_export.export` (random weights; "int8" calibrated on 64 crops of
scikit-image's photos through the model's own preprocessing), then every row runs in a fresh process, rounds
interleaved: onnxruntime (CPU provider) and OpenVINO (CPU, f32 precision hint) in float32, int8 (static:
weights and activations) and dynamic range (int8 weights), LiteRT int8, and timm eager in float32 and with
`torch.ao.quantization.quantize_dynamic` (int8 Linear layers: PyTorch's own CPU int8 path). timm rows need torch
and timm: `--torch_python` names an interpreter that has them (default: this one). Median milliseconds per call
after warm-up; `vs timm` is timm fp32's time over the row's, per batch size, from the same round.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXPORTS = {
    "onnxruntime fp32": ("onnx", None),
    "onnxruntime int8": ("onnx", "int8"),
    "onnxruntime dynamic": ("onnx", "dynamic_range"),
    "OpenVINO fp32": ("openvino", None),
    "OpenVINO int8 (NNCF)": ("openvino", "int8"),
    "OpenVINO dynamic (NNCF)": ("openvino", "dynamic_range"),
    "LiteRT int8": ("litert", "int8"),
}
TIMM = ("timm fp32", "timm dynamic int8")


def calibration_images(model, count: int = 64):
    """`count` crops of scikit-image's photos, prepared by the model's own preprocessing (its input range)."""
    import numpy as np
    from skimage import data

    photos = [getattr(data, n)() for n in ("astronaut", "coffee", "chelsea", "rocket", "hubble_deep_field")]
    rng, prepare, crops = np.random.default_rng(0), model.preprocessor(), []
    for i in range(count):
        photo = photos[i % len(photos)]
        h, w = photo.shape[:2]
        s = int(min(h, w) * rng.uniform(0.5, 1.0))
        top, left = rng.integers(0, h - s + 1), rng.integers(0, w - s + 1)
        crops.append(np.asarray(prepare(photo[None, top : top + s, left : left + s].astype("float32")))[0])
    return [np.stack(crops[i : i + 16]) for i in range(0, count, 16)]


def write_exports(name: str, size: int, out: str) -> dict:
    """{row: exported model file} for every export row, written under `out`."""
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    import hub_export
    import keras_vit

    model = keras_vit.create_model(name, input_shape=(size, size, 3), classifier_activation=None)
    calibration = calibration_images(model)
    files = {}
    for row, (fmt, quantize) in EXPORTS.items():
        directory = os.path.join(out, row.replace(" ", "_").replace("(", "").replace(")", ""))
        hub_export.export(
            model,
            directory,
            "classification",
            format=fmt,
            quantize=quantize,
            representative_images=calibration if quantize == "int8" else None,
        )
        files[row] = hub_export.exported_file(directory)
    return files


def time_export(path: str, size: int, batch: int, iters: int, warmup: int) -> float:
    """Median seconds per call of the exported file in its own runtime."""
    import numpy as np

    from bench.throughput import timed
    from hub_export import formats

    run = formats.runtime_model(path)
    x = np.random.default_rng(0).uniform(-1, 1, (batch, size, size, 3)).astype("float32")
    return timed(lambda: run(x), iters, warmup)


def time_timm(name: str, size: int, batch: int, iters: int, warmup: int, int8: bool) -> float:
    """Median seconds per call of timm eager (the same network: tanh GELU), optionally dynamic int8."""
    import torch

    from bench.throughput import _timm_name, timed
    import timm

    arch, size = _timm_name(name, size)
    model = timm.create_model(arch, img_size=size, act_layer="gelu_tanh").eval()
    if int8:
        model = torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)
    x = torch.rand(batch, 3, size, size) * 2 - 1

    def run():
        with torch.no_grad():
            model(x)

    return timed(run, iters, warmup)


def _row(args, row: str, files: dict, batch: int) -> float:
    """One row in a fresh process; seconds per call."""
    python = args.torch_python if row in TIMM else sys.executable
    inner = [
        python,
        os.path.abspath(__file__),
        "--_row",
        row,
        "--_file",
        files.get(row, ""),
        "--model",
        args.model,
        "--image_size",
        str(args.image_size),
        "--_batch",
        str(batch),
        "--iters",
        str(args.iters if batch == 1 else max(3, args.iters // 4)),
        "--warmup",
        str(args.warmup),
    ]
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([ROOT, os.path.join(ROOT, "tools", "torchvision_stub")]),
        TF_CPP_MIN_LOG_LEVEL="3",
    )
    done = subprocess.run(inner, env=env, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"{row}, batch {batch}: {done.stderr[-2000:]}")
    return float(done.stdout.strip().splitlines()[-1])


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="ViT-B/16")
    p.add_argument("--image_size", type=int, default=224)
    p.add_argument("--batch_sizes", default="1,16")
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--iters", type=int, default=20, help="calls timed at batch 1 (a quarter of it, >= 3, above)")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--torch_python", default=sys.executable, help="an interpreter with torch and timm")
    p.add_argument("--no_timm", action="store_true", help="the export rows only (ratios then against the first)")
    p.add_argument("--_row"), p.add_argument("--_file"), p.add_argument("--_batch", type=int)
    args = p.parse_args(argv)
    if args._row:
        if args._row in TIMM:
            sec = time_timm(args.model, args.image_size, args._batch, args.iters, args.warmup, "int8" in args._row)
        else:
            sec = time_export(args._file, args.image_size, args._batch, args.iters, args.warmup)
        print(sec)
        return
    sys.path.insert(0, ROOT)
    from bench.machine import describe, header

    machine = describe()
    print(header(machine), flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        files = write_exports(args.model, args.image_size, tmp)
        sizes = {
            row: sum(
                os.path.getsize(os.path.join(os.path.dirname(f), n))
                for n in os.listdir(os.path.dirname(f))
                if n.startswith("model.")
            )
            for row, f in files.items()
        }
        results, rows = {}, (() if args.no_timm else TIMM) + tuple(EXPORTS)
        for r in range(args.rounds):
            for batch in map(int, args.batch_sizes.split(",")):
                for row in rows:
                    results.setdefault((row, batch), []).append(_row(args, row, files, batch))
                    print(
                        f"round {r + 1}: {row}, batch {batch}: {1000 * results[row, batch][-1]:.1f} ms",
                        file=sys.stderr,
                        flush=True,
                    )
    print(
        f"{args.model} @ {args.image_size}, {machine['kind']}, {machine['cores']} CPUs, "
        f"{args.rounds} round(s); ms per call (median over rounds), vs {rows[0]} at the same batch"
    )
    for batch in map(int, args.batch_sizes.split(",")):
        base = statistics.median(results[rows[0], batch])
        for row in rows:
            times = results[row, batch]
            size = f"{sizes[row] / 2**20:7.1f} MiB" if row in sizes else " " * 11
            print(
                f"  b{batch:<3} {row:<26} {1000 * statistics.median(times):8.1f} ms  vs first "
                f"{base / statistics.median(times):5.2f}x  {size}  rounds: "
                + ", ".join(f"{1000 * t:.1f}" for t in times)
            )
    print(
        json.dumps(
            {
                "machine": machine,
                **{f"{row} b{batch}": [round(1000 * t, 1) for t in times] for (row, batch), times in results.items()},
            }
        )
    )


if __name__ == "__main__":
    main()
