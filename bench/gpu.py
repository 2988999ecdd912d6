"""ViT training and inference on one GPU: keras_vit on Keras' JAX backend (einsum vs fused attention) against
timm eager and timm + torch.compile, bf16 mixed precision, each row in a fresh process.

    python bench/gpu.py --out gpu.json                       # every row, one sitting
    python bench/gpu.py --models ViT-B/16 --rows jax_fused   # some

keras_vit rows: variables float32, compute bf16 (`mixed_bfloat16`), one jitted step from
`stateless_call` + AdamW's `stateless_apply` with the state donated (the recipes' JAX step without its
input pipeline), compiled with the library's XLA options (`keras_vit.utils.xla_options`; `_defaults` rows: XLA's). timm rows: `torch.autocast(bfloat16)`, AdamW, `fused_attn` (PyTorch SDPA) as timm ships it.
img/s is the median of timed steps; peak is the device allocator's high-water mark; MFU is the model's
training (3x forward) or forward FLOPs x img/s over the dense bf16 peak given by --peak_tflops.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SIZES = {"ViT-B/16": (16, 768, 3072, 12, 12), "ViT-L/16": (16, 1024, 4096, 16, 24)}


def forward_flops(name: str, image: int = 224, classes: int = 1000) -> float:
    """Multiply-adds x 2 of one image's forward pass (patch embedding, blocks, head)."""
    p, d, mlp, _, layers = SIZES[name]
    n = (image // p) ** 2 + 1
    block = 2 * n * (4 * d * d + 2 * d * mlp) + 2 * 2 * n * n * d
    return layers * block + 2 * (n - 1) * p * p * 3 * d + 2 * d * classes


_JAX = r"""
import json, statistics, sys, time
import jax, jax.numpy as jnp, numpy as np, keras, keras_vit
name, mode, batch, path, iters = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
from keras_vit.utils.xla_options import tuned_jit
jit = jax.jit if sys.argv[6] == "defaults" else tuned_jit  # XLA's defaults, or the library's options
keras_vit.MultiHeadDotProductAttention.FUSED = path == "fused"
keras.mixed_precision.set_global_policy("mixed_bfloat16")
model = keras_vit.create_model(name, classifier_activation=None)
x = jnp.asarray(np.random.uniform(-1, 1, (batch, 224, 224, 3)).astype("float32"))
y = jnp.asarray(np.random.randint(0, 1000, (batch,)))
tv = [v.value for v in model.trainable_variables]
nv = [v.value for v in model.non_trainable_variables]
if mode == "infer":
    f = jit(lambda t, n, x: model.stateless_call(t, n, x, training=False)[0])
    run = lambda: f(tv, nv, x).block_until_ready()
else:
    opt = keras.optimizers.AdamW(1e-4, weight_decay=0.05)
    opt.build(model.trainable_variables)
    ov = [v.value for v in opt.variables]
    def step(state, x, y):
        t, o = state
        def loss(t):
            logits, _ = model.stateless_call(t, nv, x, training=True)
            return jnp.mean(-jnp.take_along_axis(jax.nn.log_softmax(logits.astype(jnp.float32)), y[:, None], 1))
        l, g = jax.value_and_grad(loss)(t)
        t, o = opt.stateless_apply(o, g, t)
        return (t, o), l
    f = jit(step, donate_argnums=(0,))
    state = [(tv, ov)]
    def run():
        state[0], l = f(state[0], x, y)
        l.block_until_ready()
for _ in range(3): run()
ts = []
for _ in range(iters):
    t0 = time.perf_counter(); run(); ts.append(time.perf_counter() - t0)
stats = jax.devices()[0].memory_stats() or {}
print(json.dumps({"ips": batch / statistics.median(ts), "peak_gb": stats.get("peak_bytes_in_use", 0) / 1e9}))
"""

_TORCH = r"""
import json, sys, torch
from bench.throughput import timm_torch
name, mode, batch, compiled, iters = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1", int(sys.argv[5])
ips = timm_torch(name, 224, batch, mode, "bf16", compiled, iters, 3, device="cuda")
print(json.dumps({"ips": ips, "peak_gb": torch.cuda.max_memory_allocated() / 1e9}))
"""

# jax_<attention path>: compiled with the library's XLA options (keras_vit.utils.xla_options); _defaults: XLA's own
ROWS = ("jax_einsum", "jax_fused", "jax_einsum_defaults", "jax_fused_defaults", "timm", "timm_compile")


def row(kind: str, name: str, mode: str, batch: int, iters: int) -> dict:
    if kind.startswith("jax"):
        jit = "defaults" if kind.endswith("_defaults") else "tuned"
        cmd = [sys.executable, "-c", _JAX, name, mode, str(batch), kind.split("_")[1], str(iters), jit]
        env = dict(
            os.environ, KERAS_BACKEND="jax", PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")])
        )
    else:
        cmd = [sys.executable, "-c", _TORCH, name, mode, str(batch), "1" if kind == "timm_compile" else "0", str(iters)]
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if done.returncode:
        last = done.stderr.strip().splitlines()[-1][:300] if done.stderr.strip() else f"exit {done.returncode}"
        return {"error": last}
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default="ViT-B/16,ViT-L/16")
    p.add_argument("--rows", default=",".join(ROWS))
    p.add_argument("--modes", default="train,infer")
    p.add_argument("--train_batch", type=int, default=128)
    p.add_argument("--infer_batch", type=int, default=512)
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--peak_tflops", type=float, default=989.4, help="dense bf16 peak (H100 SXM: 989.4)")
    p.add_argument("--out", default="")
    args = p.parse_args(argv)
    results = []
    print(f"{'model':9} {'mode':5} {'batch':>5} {'row':19} {'img/s':>8} {'peak GB':>8} {'MFU':>6}", flush=True)
    for name in args.models.split(","):
        for mode in args.modes.split(","):
            batch = args.train_batch if mode == "train" else args.infer_batch
            flops = forward_flops(name) * (3 if mode == "train" else 1)
            for kind in args.rows.split(","):
                r = row(kind, name, mode, batch, args.iters)
                r.update(model=name, mode=mode, batch=batch, row=kind)
                if "ips" in r:
                    r["mfu"] = r["ips"] * flops / (args.peak_tflops * 1e12)
                    print(
                        f"{name:9} {mode:5} {batch:>5} {kind:19} {r['ips']:>8.1f} {r['peak_gb']:>8.2f} "
                        f"{100 * r['mfu']:>5.1f}%",
                        flush=True,
                    )
                else:
                    print(f"{name:9} {mode:5} {batch:>5} {kind:19} error: {r['error']}", flush=True)
                results.append(r)
                if args.out:
                    with open(args.out, "w") as f:
                        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
