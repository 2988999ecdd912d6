"""Batch inference over a folder of photos: `python -m keras_vit.inference` on each backend against timm's
`inference.py`, same architecture, same weights, same batch, same folder, fresh process per row.

    .venv/bin/python bench/batch_inference.py --timm_inference /path/to/pytorch-image-models/inference.py \
        --torchvision /path/to/torchvision --model vit_small_patch16_224 --images 512 --batch 32

timm's `inference.py` lives in timm's repository (not in its wheel): pass a checkout's copy. It needs a real
torchvision for its transforms; `--torchvision` names a folder holding one (e.g. the torchvision 0.28.0 wheel
for torch 2.13 installed there with `pip install --no-deps --target`); `bench/torchvision_ops.py` lets it
import on a CPU torch whose build its compiled detection ops do not match (timm uses none of them).

The folder holds `--images` JPEGs cut from scikit-image's photos (quality 90), of 480x640 and 640x480 pixels
(`--sizes=camera`, so decoding and resizing cost what a camera's photos cost), 480x640 only (`one`), or of sides
drawn from 160 to 400 pixels (`mixed`: every photo another size, which a backend that compiles per input shape
would pay for). The weights are timm's random initialisation of
`--model`, saved once as `.pth` (for timm) and `.safetensors` (for keras_vit). A row's time is the whole
command, start-up included, as a user waits for it; images/s is images over that time. The top-1 agreement
compares each row's classes with timm's. The command keeps JAX's compiled program in its compilation cache (a
folder of this run's, empty at the start): the first JAX row compiles, the "warm cache" row after it is a user's
second run.
"""

from __future__ import annotations

import argparse
import csv
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STUB = os.path.join(ROOT, "tools", "torchvision_stub")


SIZES = {
    "camera": "480x640 and 640x480 (a camera's photos)",
    "one": "480x640 only",
    "mixed": "each side 160 to 400 pixels, drawn per photo (a folder of photos from many sources)",
}


def photo_size(kind: str, i: int, rng) -> tuple:
    """(width, height) of photo `i` of a folder of `kind` (`SIZES`)."""
    if kind == "mixed":
        return int(rng.integers(160, 401)), int(rng.integers(160, 401))
    return (640, 480) if i % 2 and kind == "camera" else (480, 640)


def make_photos(folder: str, count: int, kind: str = "camera") -> None:
    import numpy as np
    from PIL import Image
    from skimage import data

    marker = os.path.join(folder, ".complete")
    if os.path.exists(marker):
        return
    os.makedirs(os.path.join(folder, "photos"), exist_ok=True)
    sources = [data.astronaut(), data.chelsea(), data.coffee(), data.rocket(), data.immunohistochemistry()]
    rng = np.random.default_rng(0)
    for i in range(count):
        photo = Image.fromarray(sources[i % len(sources)])
        size = photo_size(kind, i, rng)
        scale = max(size[0] / photo.width, size[1] / photo.height) * rng.uniform(1.0, 1.5)
        photo = photo.resize((int(photo.width * scale) + 1, int(photo.height * scale) + 1), Image.BICUBIC)
        left, top = rng.integers(0, photo.width - size[0] + 1), rng.integers(0, photo.height - size[1] + 1)
        photo.crop((left, top, left + size[0], top + size[1])).save(
            os.path.join(folder, "photos", f"{i:06d}.jpg"), quality=90
        )
    open(marker, "w").close()


def make_weights(folder: str, model: str) -> str:
    """timm's random initialisation of `model` as `<model>.pth` and `<model>.safetensors`; the stem."""
    stem = os.path.join(folder, model)
    if not os.path.exists(stem + ".safetensors"):
        code = (
            "import sys, torch, timm\nfrom safetensors.torch import save_file\ntorch.manual_seed(0)\n"
            f"m = timm.create_model({model!r}, pretrained=False)\n"
            "sd = {k: v.contiguous() for k, v in m.state_dict().items()}\n"
            f"torch.save(sd, {stem + '.pth'!r}); save_file(sd, {stem + '.safetensors'!r})\n"
        )
        subprocess.run([sys.executable, "-c", code], check=True, env=dict(os.environ, PYTHONPATH=STUB))
    return stem


def timed(cmd, env) -> float:
    start = time.perf_counter()
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=ROOT)
    if out.returncode:
        raise RuntimeError(" ".join(cmd) + "\n" + out.stderr[-3000:])
    return time.perf_counter() - start


def timm_row(args, stem, photos, results) -> float:
    code = (
        "import runpy, sys\nimport bench.torchvision_ops\n"
        f"sys.argv = ['inference.py'] + sys.argv[1:]\nrunpy.run_path({args.timm_inference!r}, run_name='__main__')"
    )
    cmd = [
        sys.executable,
        "-c",
        code,
        "--data-dir",
        photos,
        "--model",
        args.model,
        "--checkpoint",
        stem + ".pth",
        "--device",
        "cpu",
        "-b",
        str(args.batch),
        "-j",
        str(args.workers),
        "--topk",
        "5",
        "--include-index",
        "--label-type",
        "none",
        "--results-dir",
        results,
        "--results-file",
        "timm",
        "--no-console-results",
    ]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([args.torchvision, ROOT]), OMP_NUM_THREADS=str(os.cpu_count()))
    return timed(cmd, env)


def keras_row(args, backend, stem, photos, output, cache) -> float:
    """The CLI's whole run; `cache`: its XLA compilation cache folder (JAX keeps compiled programs there)."""
    cmd = [
        sys.executable,
        "-m",
        "keras_vit.inference",
        photos,
        f"--weights={stem}.safetensors",
        f"--model={args.model}",
        f"--output={output}",
        "--top=5",
        "--format=csv",
        f"--batch_size={args.batch}",
        f"--workers={args.workers}",
    ]
    env = dict(os.environ, KERAS_BACKEND=backend, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="2", KERAS_VIT_CACHE_DIR=cache)
    return timed(cmd, env)


def top1(path: str, column: str) -> dict:
    with open(path, newline="") as f:
        return {os.path.basename(r["filename" if "filename" in r else "file"]): r[column] for r in csv.DictReader(f)}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--timm_inference", required=True, help="timm's inference.py (from its repository)")
    p.add_argument("--torchvision", required=True, help="a folder holding a torchvision package")
    p.add_argument("--model", default="vit_small_patch16_224")
    p.add_argument("--images", type=int, default=512)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--workers", type=int, default=2, help="loader workers / threads (timm's default: 2)")
    p.add_argument("--backends", default="tensorflow,jax")
    p.add_argument(
        "--sizes",
        choices=sorted(SIZES),
        default="camera",
        help="the photos' sizes: " + "; ".join(f"{k}: {v}" for k, v in SIZES.items()),
    )
    p.add_argument("--data", default=None, help="where the photos and weights are kept (default: a temporary folder)")
    args = p.parse_args(argv)
    sys.path.insert(0, ROOT)
    from bench.machine import header

    print(header(), flush=True)
    args.data = args.data or os.path.join(tempfile.gettempdir(), f"keras_vit_inference_bench_{args.sizes}")
    make_photos(args.data, args.images, args.sizes)
    stem = make_weights(args.data, args.model)
    photos = os.path.join(args.data, "photos")
    print(
        f"{args.model}, {args.images} photos ({SIZES[args.sizes]}), batch {args.batch}, {args.workers} workers, "
        f"{os.cpu_count()} CPUs"
    )
    print(f"{'row':>16} {'seconds':>8} {'images/s':>9} {'vs timm':>8} {'top-1 = timm':>13}", flush=True)
    with tempfile.TemporaryDirectory() as results:
        base = timm_row(args, stem, photos, results)
        theirs = top1(os.path.join(results, "timm.csv"), "index")
        theirs = {k: v.strip("[]").split(",")[0].split()[0] for k, v in theirs.items()}
        print(f"{'timm':>16} {base:>8.1f} {args.images / base:>9.2f} {1.0:>7.2f}x {'':>13}", flush=True)
        rows = [(b, "") for b in args.backends.split(",")]
        if "jax" in args.backends.split(","):  # the command keeps JAX's compiled program: a second run reuses it
            rows.append(("jax", ", warm cache"))
        for i, (backend, label) in enumerate(rows):
            output = os.path.join(results, f"{i}-{backend}")
            seconds = keras_row(args, backend, stem, photos, output, os.path.join(results, "cache"))
            ours = top1(os.path.join(output, "part-00000.csv"), "class_index_1")
            agree = sum(ours.get(k) == v for k, v in theirs.items()) / len(theirs)
            name = backend + label
            print(
                f"{name:>16} {seconds:>8.1f} {args.images / seconds:>9.2f} {base / seconds:>7.2f}x {agree:>12.1%}",
                flush=True,
            )


if __name__ == "__main__":
    main()
