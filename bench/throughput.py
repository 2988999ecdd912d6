"""Images/s of keras_vit vs timm (and keras-hub if installed), measured back to back, a fresh process per row.

    .venv/bin/python bench/throughput.py --models ViT-S/16 --modes train --batch_sizes 16
    .venv/bin/python bench/throughput.py --models ViT-B/16 --modes infer --batch_sizes 1,16

Rows: framework variants on the same model/batch/dtype; `vs timm` is the ratio to timm eager
in the same run; GFLOP/s uses keras_vit.analysis.summary.forward_flops (training counted as 3x forward)
and `%GEMM` compares it with a 2048^3 fp32 matmul measured in the same run by the same
framework. Rows run back to back, each in a fresh process (`--no-isolate`: all in this one), so `peak GB`
is that row's peak resident memory (model, optimizer state, activations, framework runtime). torch/timm come from the
`bench` extra; timm imports through tools/torchvision_stub (no CPU torchvision exists here).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
if importlib.util.find_spec("torchvision") is None:  # the stand-in only where no real torchvision is installed
    sys.path.insert(0, os.path.join(ROOT, "tools", "torchvision_stub"))
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def timed(fn, iters: int, warmup: int, best: bool = False) -> float:
    """Median (or fastest, for ceilings) seconds per call after `warmup` calls; `fn` must block."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(iters):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times) if best else statistics.median(times)


def rss_gb(field: str = "VmHWM") -> float:
    """Resident memory (GB) of this process image: by default the peak, VmHWM, which (unlike ru_maxrss) does not
    carry the parent's peak over fork + exec; "VmRSS" for the current size."""
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith(field + ":")) / 1e6
    except (OSError, StopIteration):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6


# ----------------------------------------------------------------------------- GEMM ceilings


def gemm_tf(n: int = 2048) -> float:
    import tensorflow as tf

    a = tf.random.normal((n, n))
    f = tf.function(lambda: tf.matmul(a, a))
    return 2 * n**3 / timed(lambda: f().numpy(), 10, 3, best=True) / 1e9


def gemm_torch(n: int = 2048) -> float:
    import torch

    a = torch.randn(n, n)
    return 2 * n**3 / timed(lambda: a @ a, 10, 3, best=True) / 1e9


# ----------------------------------------------------------------------------- keras_vit (TF)


def keras_tf(
    name, size, batch, mode, dtype, xla, iters, warmup, variant="recipes", build=None, remat=False, quantize=None
):
    """keras_vit (or the model `build(name, size)` returns) under the recipes' train step or inference;
    `remat`: the constructor's per-block rematerialization; `quantize`: `model.quantize(mode)` first."""
    import keras
    import tensorflow as tf

    import keras_vit

    keras.mixed_precision.set_global_policy("mixed_bfloat16" if dtype == "bf16" else "float32")
    try:
        if build is None:
            model = keras_vit.create_model(name, input_shape=(size, size, 3), classifier_activation=None, remat=remat)
        else:
            model = build(name, size)
        if quantize:
            model.quantize(quantize)
        x = tf.random.uniform((batch, size, size, 3), -1, 1)
        y = tf.random.uniform((batch,), 0, 1000, dtype=tf.int32)
        if mode == "infer":
            f = tf.function(lambda: model(x, training=False), jit_compile=xla)
            sec = timed(lambda: f().numpy(), iters, warmup)
        elif variant == "recipes":
            from recipes.trainer import tf_step as steps

            opt = keras_vit.FusedAdamW(1e-4, weight_decay=0.05)  # the recipes' AdamW
            opt.build(model.trainable_variables)
            step = steps.build_train_step(model, opt, num_classes=1000, global_batch_size=batch, jit_compile=xla)
            sec = timed(lambda: step((x, y))["loss"].numpy(), iters, warmup)
        else:  # the naive Keras path: compile + train_on_batch
            model.compile(
                keras.optimizers.AdamW(1e-4, weight_decay=0.05),
                keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                jit_compile=xla,
            )
            sec = timed(lambda: model.train_on_batch(x, y), iters, warmup)
    finally:
        keras.mixed_precision.set_global_policy("float32")
    from keras_vit.analysis.summary import forward_flops

    return batch / sec, forward_flops(model) if build is None else None


# ----------------------------------------------------------------------------- keras-hub


def keras_hub_vit(name: str, size: int):
    """keras_hub.models.ViTBackbone of the same size with a linear head on the class token."""
    import keras
    import keras_hub

    import keras_vit

    c = keras_vit.vit_config(name)
    backbone = keras_hub.models.ViTBackbone(
        image_shape=(size, size, 3),
        patch_size=c.patch_size,
        num_layers=c.num_layers,
        num_heads=c.num_heads,
        hidden_dim=c.hidden_size,
        mlp_dim=c.mlp_dim,
    )
    inputs = keras.Input((size, size, 3))
    logits = keras.layers.Dense(1000)(backbone(inputs)[:, 0])
    return keras.Model(inputs, logits)


# ----------------------------------------------------------------------------- timm


def _timm_name(name, size):
    return {
        "ViT-S/16": "vit_small_patch16_224",
        "ViT-B/16": "vit_base_patch16_224",
        "ViT-Ti/16": "vit_tiny_patch16_224",
        "ViT-L/16": "vit_large_patch16_224",
    }[name], size


def timm_torch(name, size, batch, mode, dtype, compiled, iters, warmup, device: str = "cpu", int8: bool = False):
    """timm's img/s on `device` ("cpu" or "cuda"): eager or `torch.compile`, bf16 by autocast; `int8`: PyTorch's
    dynamic int8 quantization of every nn.Linear (its standard CPU int8 path), inference only."""
    import timm
    import torch

    arch, size = _timm_name(name, size)
    model = timm.create_model(arch, img_size=size, act_layer="gelu_tanh").to(device)
    if int8:
        model = torch.ao.quantization.quantize_dynamic(model.eval(), {torch.nn.Linear}, dtype=torch.qint8)
    x = torch.rand(batch, 3, size, size, device=device) * 2 - 1
    y = torch.randint(0, 1000, (batch,), device=device)
    fwd = torch.compile(model) if compiled else model
    auto = torch.autocast(device, dtype=torch.bfloat16, enabled=dtype == "bf16")
    done = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    if mode == "infer":
        model.eval()

        def run():
            with torch.no_grad(), auto:
                fwd(x)
            done()
    else:
        model.train()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.05)

        def run():
            opt.zero_grad(set_to_none=True)
            with auto:
                loss = torch.nn.functional.cross_entropy(fwd(x), y)
            loss.backward()
            opt.step()
            done()

    return batch / timed(run, iters, warmup)


# ----------------------------------------------------------------------------- keras_vit (JAX)

_JAX = r"""
import os, sys, time, statistics, numpy as np, keras, keras_vit
name, size, batch, mode, iters, warmup = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5]), int(sys.argv[6])
keras_vit.MultiHeadDotProductAttention.FUSED = sys.argv[7] == "fused"
remat = {"remat": True, "attention": "attention"}.get(sys.argv[8], False)
keras.mixed_precision.set_global_policy("mixed_bfloat16" if sys.argv[9] == "bf16" else "float32")
model = keras_vit.create_model(name, input_shape=(size, size, 3), classifier_activation=None, remat=remat)
x = np.random.uniform(-1, 1, (batch, size, size, 3)).astype("float32")
y = np.random.randint(0, 1000, (batch,))
if mode == "infer":
    import jax
    tv, ntv = model.trainable_variables, model.non_trainable_variables
    f = jax.jit(lambda t, n, x: model.stateless_call(t, n, x, training=False)[0])
    tvv, nvv = [v.value for v in tv], [v.value for v in ntv]
    run = lambda: f(tvv, nvv, x).block_until_ready()
elif mode == "step":  # the bare jitted AdamW step (bench/jax_step.py), no Keras trainer around it
    from bench.jax_step import adamw_step
    compiled, state = adamw_step(model, x, y)
    def run():
        global state
        loss, *state = compiled(*state)
        loss.block_until_ready()
else:
    model.compile(keras.optimizers.AdamW(1e-4, weight_decay=0.05),
                  keras.losses.SparseCategoricalCrossentropy(from_logits=True), jit_compile=True)
    run = lambda: model.train_on_batch(x, y)
for _ in range(warmup): run()
ts = []
for _ in range(iters):
    t = time.perf_counter(); run(); ts.append(time.perf_counter() - t)
hwm = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:")) / 1e6
print(batch / statistics.median(ts), hwm)
"""


def keras_jax(name, size, batch, mode, iters, warmup, remat=False, dtype="fp32"):
    from keras_vit.nn.attention import MultiHeadDotProductAttention

    fused = "fused" if MultiHeadDotProductAttention.FUSED else "einsum"
    remat_arg = {True: "remat", "attention": "attention"}.get(remat, "keep")
    ips, peak = _backend_row(_JAX, "jax", name, size, batch, mode, iters, warmup, fused, remat_arg, dtype)
    return ips, peak


_TORCH = r"""
import sys, time, statistics, numpy as np, torch, keras, keras_vit
name, size, batch, mode, iters, warmup = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5]), int(sys.argv[6])
keras_vit.MultiHeadDotProductAttention.FUSED = sys.argv[7] == "fused"
adamw = keras_vit.FusedAdamW if sys.argv[8] == "FusedAdamW" else keras.optimizers.AdamW
keras.mixed_precision.set_global_policy("mixed_bfloat16" if sys.argv[9] == "bf16" else "float32")
model = keras_vit.create_model(name, input_shape=(size, size, 3), classifier_activation=None)
computes = model.compute_dtype  # its layers' (the model keeps their policy): the row's figure is for this dtype
assert computes == {"bf16": "bfloat16"}.get(sys.argv[9], "float32"), (sys.argv[9], computes)
x = torch.tensor(np.random.uniform(-1, 1, (batch, size, size, 3)).astype("float32"))
if mode == "infer":  # the eager call a PyTorch user makes, timm's row's conditions
    def run():
        with torch.no_grad():
            model(x, training=False)
else:  # Keras' own training step on this backend: compile + train_on_batch, AdamW as timm's row
    y = torch.tensor(np.random.randint(0, 1000, (batch,)))
    model.compile(adamw(1e-4, weight_decay=0.05), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    run = lambda: model.train_on_batch(x, y)
t = time.perf_counter(); run(); first = time.perf_counter() - t
for _ in range(warmup): run()
ts = []
for _ in range(iters):
    t = time.perf_counter(); run(); ts.append(time.perf_counter() - t)
hwm = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:")) / 1e6
print(batch / statistics.median(ts), hwm, first)
"""


def keras_torch(name, size, batch, mode, iters, warmup, optimizer: str = "AdamW", dtype: str = "fp32"):
    """keras_vit on the PyTorch backend, in its own process (the backend is fixed per process): the eager call
    (inference) or `train_on_batch` (training, with `keras.optimizers.AdamW` or `keras_vit.FusedAdamW`), in float32
    or, for `dtype="bf16"`, under Keras' "mixed_bfloat16" policy (bf16 compute, float32 variables); returns
    (img/s, peak GB)."""
    from keras_vit.nn.attention import MultiHeadDotProductAttention

    fused = "fused" if MultiHeadDotProductAttention.FUSED else "einsum"
    ips, peak, _ = _backend_row(_TORCH, "torch", name, size, batch, mode, iters, warmup, fused, optimizer, dtype)
    return ips, peak


def _backend_row(script: str, backend: str, *arguments) -> list:
    """Runs a row's `script` with its `arguments` in a fresh process on Keras backend `backend`; returns the
    numbers of the last line it prints."""
    env = dict(os.environ, KERAS_BACKEND=backend, PYTHONPATH=ROOT)
    out = subprocess.run([sys.executable, "-c", script, *map(str, arguments)], env=env, capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError(out.stderr[-500:])
    return [float(value) for value in out.stdout.strip().splitlines()[-1].split()]


# ----------------------------------------------------------------------------- driver


def remat_suffix(row: str) -> tuple:
    """(the `remat` a row name asks for, the name without that suffix): `_remat_attention` -> "attention",
    `_remat` -> True, else False."""
    if row.endswith("_remat_attention"):
        return "attention", row.removesuffix("_remat_attention")
    return row.endswith("_remat"), row.removesuffix("_remat")


def measure(f, name, size, mode, batch, dtype, iters, warmup):
    """(img/s or None, forward FLOPs or None, peak RSS GB, error or None) of one row, in this process."""
    ips = flops = error = None
    remat, f = remat_suffix(f)  # keras_tf_remat, keras_jax_remat, keras_tf_remat_attention, ...
    int8, f = f.endswith("_int8"), f.removesuffix("_int8")  # keras_tf_int8 (model.quantize), timm_int8
    try:
        if int8 and mode != "infer":
            raise ValueError("int8 rows are inference only")
        optimizer = "FusedAdamW" if f.endswith("_fadamw") else "AdamW"  # keras_torch_..._fadamw: keras_vit.FusedAdamW
        f = f.removesuffix("_fadamw")
        if f.startswith(("keras_tf", "keras_jax", "keras_torch")):  # "_fused": keras.ops.dot_product_attention
            from keras_vit.nn.attention import MultiHeadDotProductAttention

            MultiHeadDotProductAttention.FUSED = "_fused" in f
            f = f.replace("_fused", "")
        if f == "keras_tf_fusible":  # TF auto-clustering: XLA fuses the element-wise ops, matmuls stay on oneDNN
            os.environ["TF_XLA_FLAGS"] = "--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit --tf_xla_ops_to_cluster=FUSIBLE"
            f = "keras_tf_noxla"
        if f in ("keras_tf", "keras_tf_noxla"):
            ips, flops = keras_tf(
                name,
                size,
                batch,
                mode,
                dtype,
                f == "keras_tf",
                iters,
                warmup,
                remat=remat,
                quantize="int8" if int8 else None,
            )
        elif f == "keras_tf_naive":
            if mode == "train":  # inference has no naive variant
                ips, flops = keras_tf(name, size, batch, mode, dtype, True, iters, warmup, variant="naive")
        elif f == "keras_hub":
            ips, _ = keras_tf(name, size, batch, mode, dtype, True, iters, warmup, build=keras_hub_vit)
        elif f in ("keras_jax", "keras_jax_step"):  # Keras' train_on_batch, or the bare jitted step
            jax_mode = "step" if f == "keras_jax_step" and mode == "train" else mode
            ips, peak = keras_jax(name, size, batch, jax_mode, iters, warmup, remat=remat, dtype=dtype)
            return ips, None, peak, None
        elif f == "keras_torch":
            ips, peak = keras_torch(name, size, batch, mode, iters, warmup, optimizer, dtype)
            return ips, None, peak, None
        elif f in ("timm", "timm_compile"):
            ips = timm_torch(name, size, batch, mode, dtype, f == "timm_compile", iters, warmup, int8=int8)
        else:
            error = f"unknown framework {f!r}"
    except Exception as e:
        error = f"{type(e).__name__}: {str(e)[:200]}"
    return ips, flops, rss_gb(), error


def measure_isolated(*row):
    """`measure` in a fresh process, so the peak memory is this row's alone."""
    out = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--row", json.dumps(row)],
        env=dict(os.environ, PYTHONPATH=ROOT),
        capture_output=True,
        text=True,
    )
    lines = out.stdout.strip().splitlines()
    if out.returncode or not lines:
        return None, None, float("nan"), f"row process exited {out.returncode}: {out.stderr[-300:]}"
    return tuple(json.loads(lines[-1]))


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default="ViT-S/16,ViT-B/16")
    p.add_argument("--image_sizes", default="224")
    p.add_argument("--batch_sizes", default="1,8,32")
    p.add_argument("--modes", default="infer,train")
    p.add_argument("--dtypes", default="fp32")
    p.add_argument(
        "--frameworks",
        default="keras_tf,keras_tf_naive,timm",
        help="keras_tf (XLA), keras_tf_noxla, keras_tf_fusible (no jit_compile; TF's auto-clustering "
        "hands only element-wise ops to XLA), keras_tf_fused / keras_tf_fused_noxla / keras_jax_fused "
        "(attention through keras.ops.dot_product_attention), keras_tf_naive (compile+train_on_batch), "
        "keras_jax, keras_jax_step (training: the bare jitted AdamW step, no Keras trainer), "
        "keras_hub (ViTBackbone + head, same step/XLA), keras_torch / keras_torch_fused (the PyTorch backend: the "
        "eager call, or train_on_batch; suffix _fadamw: keras_vit.FusedAdamW instead of keras.optimizers.AdamW), "
        "timm (eager), timm_compile; suffix _remat "
        '(keras_tf, keras_tf_noxla, keras_jax: remat=True), _remat_attention (remat="attention") '
        "or _int8 (keras_tf, keras_tf_noxla: "
        "model.quantize('int8'); timm: torch dynamic int8), e.g. keras_tf_int8, timm_int8",
    )
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument(
        "--no-isolate",
        dest="isolate",
        action="store_false",
        help="measure every row in this process (peak memory then accumulates over rows)",
    )
    p.add_argument("--row", help=argparse.SUPPRESS)  # internal: one row as JSON, result as JSON
    args = p.parse_args(argv)
    if args.row:
        print(json.dumps(measure(*json.loads(args.row))))
        return
    from bench.machine import header

    print(header(), flush=True)

    fw = args.frameworks.split(",")
    ceilings = {"tf": gemm_tf()}
    if any(f.startswith("timm") for f in fw):
        ceilings["torch"] = gemm_torch()
    print("# fp32 2048^3 GEMM: " + ", ".join(f"{k} {v:.1f} GFLOP/s" for k, v in ceilings.items()))
    print(
        f"{'model':<9} {'px':>4} {'mode':<5} {'batch':>5} {'dtype':<5} {'framework':<16} {'img/s':>8} "
        f"{'ms/batch':>9} {'GFLOP/s':>8} {'%GEMM':>6} {'vs timm':>8} {'peak GB':>7}"
    )
    for name in args.models.split(","):
        for size in map(int, args.image_sizes.split(",")):
            for mode in args.modes.split(","):
                for batch in map(int, args.batch_sizes.split(",")):
                    for dtype in args.dtypes.split(","):
                        rows, mems, flops = {}, {}, None
                        for f in fw:
                            run = measure_isolated if args.isolate else measure
                            ips, f_flops, peak, error = run(f, name, size, mode, batch, dtype, args.iters, args.warmup)
                            if error:  # a framework that cannot run here is reported, not fatal
                                print(f"# {f} {name} {mode} b{batch} {dtype}: {error}")
                            if ips is not None:
                                rows[f], mems[f] = ips, peak
                                flops = flops or f_flops
                        ref = rows.get("timm")
                        for f, ips in rows.items():
                            work = None if flops is None else flops * (3 if mode == "train" else 1)
                            gfs = None if work is None else ips * work / 1e9
                            ceiling = ceilings["torch" if f.startswith("timm") else "tf"]
                            print(
                                f"{name:<9} {size:>4} {mode:<5} {batch:>5} {dtype:<5} {f:<16} {ips:>8.2f} "
                                f"{1000 * batch / ips:>9.0f} {gfs or float('nan'):>8.1f} "
                                f"{100 * (gfs or float('nan')) / ceiling:>5.0f}% "
                                f"{(ips / ref if ref else float('nan')):>7.2f}x {mems[f]:>7.2f}",
                                flush=True,
                            )


if __name__ == "__main__":
    main()
