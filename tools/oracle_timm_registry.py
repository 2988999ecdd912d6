"""The timm oracle: walks timm's registry for every module keras_vit claims (`vision_transformer`,
`vision_transformer_hybrid`, `deit`, `eva`, `naflexvit`) and checks each architecture against
timm's own logits. Run with torch and timm installed (`make bench-setup`); `make test-slow` runs it through
`tests/test_oracle_registry.py`:

    PYTHONPATH=tools/torchvision_stub python tools/oracle_timm_registry.py [--only NAME ...] [--out report.json]
        [--chunk 25]   # architectures per fresh process (one process's memory grows with each; 0: all in one)

For each architecture up to 400 M parameters timm builds a tiny instance: one block, its real width, two patches
per side at its own stride (and a 2x3 grid for the non-square case), every parameter perturbed. It writes it with
`save_for_hf` (the `model_args` it was built with recorded) and as a bare state dict. keras_vit then loads

- "dir": the repository directory (`keras_vit.load_model`),
- "bare": the bare `model.safetensors` under the timm name (`keras_vit.create_model(name, weights=...)`),
- "dir_2x3": the repository of the non-square instance (timm's `img_size=(h, w)`),
- "written": what `keras_vit.save_pretrained` writes of the model the "dir" case loaded, read back by timm's own
  `local-dir:` loader strictly ("refused": the writer refused by name; "error": timm could not load it),

and each outcome is "match" (logits within max(1e-4, twice timm's own float32-vs-float64 error)), "refused" (a
ValueError naming why, nothing loaded), "wrong" (loaded, other logits: silently wrong) or "error" (any other
exception). The report counts them per case; keras_vit's promise is wrong = error = 0.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import traceback

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "torchvision_stub"))

import numpy as np  # noqa: E402
import timm  # noqa: E402
import torch  # noqa: E402
from safetensors.torch import save_file  # noqa: E402
from timm.models._hub import save_for_hf  # noqa: E402

MODULES = ("vision_transformer", "vision_transformer_hybrid", "deit", "eva", "naflexvit")
MAX_PARAMS = 400_000_000


def architectures(only=None) -> dict:
    """{name: (parameter count, stride in pixels)} of timm's architectures up to 400 M parameters (meta device)."""
    out = {}
    for module in MODULES:
        for name in timm.list_models(module=module):
            if only and name not in only:
                continue
            with torch.device("meta"):
                model = timm.create_model(name, pretrained=False)
            count = sum(p.numel() for p in model.parameters())
            if count > MAX_PARAMS:
                continue
            pe = getattr(model, "patch_embed", None)
            stride = (
                (pe.img_size[0] // pe.grid_size[0], pe.img_size[1] // pe.grid_size[1])
                if pe is not None
                else tuple(model.embeds.patch_size)
            )  # NaFlexVit's embedding
            out[name] = (count, stride)
    return out


def _timm_tiny(name: str, size: tuple, seed: int):
    """timm's `name` with one block (its own depth where timm cannot build one: per-block arguments such as
    Sapiens2's key/value heads), at `size`, every parameter perturbed."""
    torch.manual_seed(seed)
    try:
        model = timm.create_model(name, pretrained=False, depth=1, img_size=size).eval()
    except (AssertionError, ValueError):
        model = timm.create_model(name, pretrained=False, img_size=size).eval()
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=g))
    return model


def _reference(model, x: np.ndarray) -> tuple:
    """(timm's float32 logits, the tolerance: max(1e-4, twice timm's own float32-vs-float64 error))."""
    t = torch.from_numpy(x).permute(0, 3, 1, 2)
    with torch.no_grad():
        y32 = model(t).numpy()
        y64 = model.double()(t.double()).numpy()
    model.float()
    return y32, max(1e-4, 2 * float(np.abs(y32 - y64).max()))


def _outcome(build, x: np.ndarray, ref: np.ndarray, tol: float) -> dict:
    try:
        model = build()
    except ValueError as e:
        return dict(outcome="refused", why=str(e).splitlines()[0][:300])
    except Exception as e:  # noqa: BLE001 (reported as an error, the harness's second failure kind)
        return dict(outcome="error", why=f"{type(e).__name__}: {e}"[:300], trace=traceback.format_exc()[-1500:])
    gap = float(np.abs(np.asarray(model(x)) - ref).max())
    return dict(outcome="match" if gap <= tol else "wrong", gap=gap, tol=tol)


def _written(folder: str, out: str, x: np.ndarray, ref: np.ndarray, tol: float) -> dict:
    """keras_vit writes the repository it read; timm reads ours strictly and must give its own logits."""
    import keras_vit

    try:
        keras_vit.save_pretrained(keras_vit.load_model(folder, classifier_activation=None), out)
    except ValueError as e:
        return dict(outcome="refused", why=str(e).splitlines()[0][:300])
    try:
        model = timm.create_model("local-dir:" + out, pretrained=True).eval()
        with torch.no_grad():
            y = model(torch.from_numpy(x).permute(0, 3, 1, 2)).numpy()
    except Exception as e:  # noqa: BLE001 (timm refusing our file: missing or unexpected keys, shapes)
        return dict(outcome="error", why=f"{type(e).__name__}: {e}"[:300])
    gap = float(np.abs(y - ref).max())
    return dict(outcome="match" if gap <= tol else "wrong", gap=gap, tol=tol)


def check(name: str, stride: tuple, seed: int, work: str) -> dict:
    import keras
    import keras_vit

    result = {}
    for case, grid in (("dir", (2, 2)), ("dir_2x3", (2, 3))):
        size = (grid[0] * stride[0], grid[1] * stride[1])
        try:
            model = _timm_tiny(name, size, seed)
        except Exception as e:  # noqa: BLE001 (timm itself cannot build it at this size)
            result[case] = dict(outcome="timm_cannot", why=f"{type(e).__name__}: {e}"[:200])
            continue
        x = np.random.default_rng(seed).uniform(-1, 1, (2, *size, model.pretrained_cfg.get("input_size", (3,))[0]))
        x = x.astype("float32")
        ref, tol = _reference(model, x)
        folder = os.path.join(work, f"{name}_{case}")
        depth = len(model.blocks)
        save_for_hf(model, folder, model_args=dict(depth=depth, img_size=list(size)), safe_serialization=True)
        result[case] = _outcome(lambda: keras_vit.load_model(folder, classifier_activation=None), x, ref, tol)
        if case == "dir":
            result["written"] = _written(folder, os.path.join(work, f"{name}_written"), x, ref, tol)
            bare = os.path.join(work, f"{name}.safetensors")
            save_file({k: v.contiguous() for k, v in model.state_dict().items()}, bare)
            result["bare"] = _outcome(
                lambda: keras_vit.create_model(
                    name, weights=bare, num_layers=depth, input_shape=(*size, x.shape[-1]), classifier_activation=None
                ),
                x,
                ref,
                tol,
            )
        keras.backend.clear_session()
    return result


def summary(report: dict) -> dict:
    counts = {}
    for result in report.values():
        for case, r in result.items():
            counts.setdefault(case, {}).setdefault(r["outcome"], 0)
            counts[case][r["outcome"]] += 1
    return counts


def _walk(found: dict, first_seed: int) -> dict:
    """{name: check(...)} for the architectures `found` (`architectures(...)`), in this process, in sorted order,
    each seeded by its place in the whole walk."""
    report = {}
    for seed, name in enumerate(sorted(found), start=first_seed):
        (_, stride) = found[name]
        # one folder per architecture, removed after it: the large ones' files take GBs each (26 GB for all)
        with tempfile.TemporaryDirectory() as work:
            report[name] = check(name, stride, seed, work)
        print(name, {c: r["outcome"] for c, r in report[name].items()}, flush=True)
    return report


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="*")
    parser.add_argument("--out", default="")
    parser.add_argument(
        "--chunk",
        type=int,
        default=25,
        help="architectures per fresh process: one process's resident memory grows with every architecture "
        "(14 GB over the whole walk), a chunk's stays near 3 GB; 0 walks all in this process",
    )
    parser.add_argument("--first-seed", type=int, default=0, help=argparse.SUPPRESS)  # a chunk's place in the walk
    parser.add_argument("--part", default="", help=argparse.SUPPRESS)  # a chunk's process writes its report here
    args = parser.parse_args(argv)
    if args.chunk < 0:
        parser.error(f"--chunk must be 0 (every architecture in this process) or more, not {args.chunk}")
    found = architectures(args.only)
    if args.part or not args.chunk:
        report = _walk(found, args.first_seed)
        if args.part:
            with open(args.part, "w") as f:
                json.dump(report, f)
            return report
    else:
        report, names = {}, sorted(found)
        for start in range(0, len(names), args.chunk):
            part = names[start : start + args.chunk]
            with tempfile.TemporaryDirectory() as folder:
                path = os.path.join(folder, "part.json")
                command = [sys.executable, os.path.abspath(__file__), "--chunk", "0", "--part", path]
                done = subprocess.run(command + ["--first-seed", str(start), "--only", *part])
                if done.returncode:
                    raise RuntimeError(f"the oracle's process for {part[0]} .. {part[-1]} exited {done.returncode}")
                with open(path) as f:
                    report.update(json.load(f))
    out = dict(timm=timm.__version__, torch=torch.__version__, summary=summary(report), report=report)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(out, f, indent=1)
    print(json.dumps(out["summary"]))
    return out


if __name__ == "__main__":
    main()
