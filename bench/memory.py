"""Where a training step's resident memory goes: keras_vit (TF, JAX, PyTorch) vs timm, each row in a fresh process.

    .venv/bin/python bench/memory.py --model ViT-S/16 --batch 16

For each row the process reports its resident memory (VmRSS, GB) at four points: after importing the
framework (`runtime`), after building the model and the AdamW slots (`+ weights`), and the peak (VmHWM)
over two training steps (`step peak`). `step - built` is the step's own working set: activations kept
for backward, gradients, and the runtime's scratch. On JAX the row also prints XLA's own buffer
assignment for the compiled step (`XLA temp`, from `memory_analysis()`), which is what the step needs
beyond its arguments and outputs. Rows: see `--rows`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
# also puts the torchvision stand-in on the path
from bench.throughput import _timm_name, remat_suffix, rss_gb  # noqa: E402

ROWS = {
    "timm": "timm eager (fused SDPA attention: no N x N probabilities kept)",
    "timm_unfused": "timm eager, timm.layers.set_fused_attn(False) (softmax probabilities kept)",
    "keras_tf": "keras_vit, recipes step, TF + XLA (einsum attention)",
    "keras_tf_fused": "keras_vit, recipes step, TF + XLA, keras.ops.dot_product_attention",
    "keras_tf_noxla": "keras_vit, recipes step, TF graph without XLA",
    "keras_tf_remat": "keras_vit, recipes step, TF + XLA, remat=True",
    "keras_tf_remat_attention": 'keras_vit, recipes step, TF + XLA, remat="attention" (the default since 0.3.0)',
    "keras_tf_noxla_remat": "keras_vit, recipes step, TF graph without XLA, remat=True",
    "keras_jax": "keras_vit, JAX jit of a stateless AdamW step",
    "keras_jax_fused": "keras_vit, JAX jit, keras.ops.dot_product_attention",
    "keras_jax_remat": "keras_vit, JAX jit, remat=True",
    "keras_torch": "keras_vit, PyTorch backend, Keras' train_on_batch (einsum attention)",
    "keras_torch_fused": "keras_vit, PyTorch backend, Keras' train_on_batch, dot_product_attention (its default)",
    "keras_torch_fused_fadamw": "keras_vit, PyTorch backend, train_on_batch, dot_product_attention, FusedAdamW",
}


def _keras_model(name, size, row):
    import keras_vit
    from keras_vit.nn.attention import MultiHeadDotProductAttention

    MultiHeadDotProductAttention.FUSED = "fused" in row
    return keras_vit.create_model(
        name, input_shape=(size, size, 3), classifier_activation=None, remat=remat_suffix(row)[0]
    )


def _make_unimportable(names) -> None:
    """The named top-level packages raise ModuleNotFoundError on import, as where not installed: a None entry in
    `sys.modules` (which `importlib.util.find_spec` also reads as "not installed", as torch's dynamo asks)."""
    for name in names:
        sys.modules[name] = None


def run_row(row: str, name: str, size: int, batch: int) -> dict:
    """The four readings of one row, in this process."""
    out = {}
    if row.startswith("timm"):
        import timm  # through the torchvision stand-in where no real one is installed (bench.throughput)
        import torch

        out["runtime"] = rss_gb("VmRSS")
        if row == "timm_unfused":
            timm.layers.set_fused_attn(False)
        arch, size = _timm_name(name, size)
        model = timm.create_model(arch, img_size=size, act_layer="gelu_tanh")
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.05)
        for p in model.parameters():  # the slots exist before the first step, as Keras builds them
            opt.state[p] = {
                "step": torch.tensor(0.0),
                "exp_avg": torch.zeros_like(p),
                "exp_avg_sq": torch.zeros_like(p),
            }
        out["built"] = rss_gb("VmRSS")
        x, y = torch.rand(batch, 3, size, size) * 2 - 1, torch.randint(0, 1000, (batch,))
        for _ in range(2):
            opt.zero_grad(set_to_none=True)
            torch.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
    elif row.startswith("keras_jax"):
        import keras
        import numpy as np

        from bench.jax_step import adamw_step

        out["runtime"] = rss_gb("VmRSS")
        model = _keras_model(name, size, row)
        x = np.random.uniform(-1, 1, (batch, size, size, 3)).astype("float32")
        y = np.random.randint(0, 1000, (batch,))
        compiled, state = adamw_step(model, x, y)  # the AdamW slots are built here, before "built" is read
        out["built"] = rss_gb("VmRSS")
        out["xla_temp"] = compiled.memory_analysis().temp_size_in_bytes / 1e9
        for _ in range(2):
            value, *state = compiled(*state)
            value.block_until_ready()
    elif row.startswith("keras_torch"):
        import keras
        import torch

        out["runtime"] = rss_gb("VmRSS")  # before keras_vit is imported, as the other rows read it
        model = _keras_model(name, size, row)
        from keras_vit import FusedAdamW

        adamw = FusedAdamW if row.endswith("_fadamw") else keras.optimizers.AdamW
        model.compile(adamw(1e-4, weight_decay=0.05), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        model.optimizer.build(model.trainable_variables)
        out["built"] = rss_gb("VmRSS")
        x, y = torch.rand(batch, size, size, 3) * 2 - 1, torch.randint(0, 1000, (batch,))
        for _ in range(2):
            model.train_on_batch(x, y)
    else:
        import keras
        import tensorflow as tf

        import keras_vit
        from recipes.trainer import tf_step as steps

        out["runtime"] = rss_gb("VmRSS")
        model = _keras_model(name, size, row)
        opt = keras_vit.FusedAdamW(1e-4, weight_decay=0.05)  # the recipes' AdamW
        opt.build(model.trainable_variables)
        out["built"] = rss_gb("VmRSS")
        x = tf.random.uniform((batch, size, size, 3), -1, 1)
        y = tf.random.uniform((batch,), 0, 1000, dtype=tf.int32)
        step = steps.build_train_step(
            model, opt, num_classes=1000, global_batch_size=batch, jit_compile="noxla" not in row
        )
        for _ in range(2):
            step((x, y))["loss"].numpy()
    out["peak"] = rss_gb()
    return out


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="ViT-S/16")
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument(
        "--rows",
        default="timm,timm_unfused,keras_tf,keras_tf_fused,keras_tf_noxla,keras_tf_remat,"
        "keras_jax,keras_jax_fused,keras_jax_remat",
        help=", ".join(ROWS),
    )
    p.add_argument(
        "--unimportable",
        default="",
        help="comma-separated top-level packages the keras_vit TensorFlow and PyTorch rows cannot import, e.g. "
        "jax,pandas,sklearn: what a `pip install keras-vit[tensorflow]` or `[torch]` process has (TensorFlow imports "
        "JAX and Keras imports JAX, pandas and scikit-learn whenever they are installed, 0.2-0.4 GB of the runtime)",
    )
    p.add_argument("--row", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.row:
        if args.unimportable and args.row.startswith(("keras_tf", "keras_torch")):
            _make_unimportable(args.unimportable.split(","))
        print(json.dumps(run_row(args.row, args.model, args.size, args.batch)))
        return
    from bench.machine import header

    print(header(), flush=True)
    print(f"# {args.model} @ {args.size}, batch {args.batch}, fp32, AdamW; GB of resident memory")
    if args.unimportable:
        print(f"# the keras_vit TensorFlow and PyTorch rows without {args.unimportable}")
    print(f"{'row':<26} {'runtime':>8} {'built':>7} {'peak':>7} {'step-built':>10} {'XLA temp':>9} {'vs timm':>8}")
    timm_peak = None
    for row in args.rows.split(","):
        backend = "jax" if row.startswith("keras_jax") else "torch" if row.startswith("keras_torch") else "tensorflow"
        done = subprocess.run(
            [
                sys.executable,
                os.path.abspath(__file__),
                "--row",
                row,
                "--model",
                args.model,
                "--size",
                str(args.size),
                "--batch",
                str(args.batch),
                "--unimportable",
                args.unimportable,
            ],
            capture_output=True,
            text=True,
            env=dict(os.environ, PYTHONPATH=ROOT, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="2"),
        )
        if done.returncode:
            print(f"# {row}: exited {done.returncode}: {done.stderr[-300:]}")
            continue
        r = json.loads(done.stdout.strip().splitlines()[-1])
        timm_peak = r["peak"] if row == "timm" else timm_peak
        temp = f"{r['xla_temp']:>9.2f}" if "xla_temp" in r else f"{'':>9}"
        ratio = f"{r['peak'] / timm_peak:>7.2f}x" if timm_peak else f"{'':>8}"
        print(
            f"{row:<26} {r['runtime']:>8.2f} {r['built']:>7.2f} {r['peak']:>7.2f} {r['peak'] - r['built']:>10.2f} "
            f"{temp} {ratio}",
            flush=True,
        )


if __name__ == "__main__":
    main()
