"""The matmuls of a ViT step, alone: GFLOP/s of PyTorch, TensorFlow (oneDNN), TF's XLA and JAX's XLA.

    .venv/bin/python bench/gemm.py --model ViT-S/16 --batch 16

A training step is ~90 % these products, so each engine's rate on them bounds its step rate: where JAX's
XLA runs them at half PyTorch's rate, no Keras-side change can bring a JAX step near timm's. Shapes: the
QKV, attention-out and two MLP projections (M = batch x tokens), and the two batched attention products
(batch x heads of tokens x tokens x head_dim), each forward as in the model; best of 10 after 3 warm-ups.
"""

from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench.throughput import timed  # noqa: E402


def shapes(model: str, batch: int, size: int = 224) -> dict:
    """{name: (batch dims, M, K, N)} of the model's products."""
    import keras_vit

    c = keras_vit.vit_config(model)
    n = (size // c.patch_size) ** 2 + 1
    m, d, h = batch * n, c.hidden_size, c.num_heads
    return {
        "qkv": ((), m, d, 3 * d),
        "attn out": ((), m, d, d),
        "mlp in": ((), m, d, c.mlp_dim),
        "mlp out": ((), m, c.mlp_dim, d),
        "q k^T": ((batch * h,), n, d // h, n),
        "probs v": ((batch * h,), n, n, d // h),
    }


def rates(batch_dims, m, k, n) -> dict:
    import jax
    import numpy as np
    import tensorflow as tf
    import torch

    rng = np.random.default_rng(0)
    a = rng.standard_normal((*batch_dims, m, k)).astype("float32")
    b = rng.standard_normal((*batch_dims, k, n)).astype("float32")
    flops = 2 * int(np.prod(batch_dims or (1,))) * m * k * n
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    fa, fb = tf.constant(a), tf.constant(b)
    tf_plain = tf.function(lambda: tf.matmul(fa, fb))
    tf_xla = tf.function(lambda: tf.matmul(fa, fb), jit_compile=True)
    ja, jb = jax.device_put(a), jax.device_put(b)
    jmm = jax.jit(lambda x, y: x @ y)

    def best(fn):
        return timed(fn, 10, 3, best=True)

    out = {
        "torch": best(lambda: torch.matmul(ta, tb)),
        "tf": best(lambda: tf_plain().numpy()),
        "tf_xla": best(lambda: tf_xla().numpy()),
        "jax": best(lambda: jmm(ja, jb).block_until_ready()),
    }
    return {k: flops / v / 1e9 for k, v in out.items()}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="ViT-S/16")
    p.add_argument("--batch", type=int, default=16)
    args = p.parse_args(argv)
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from bench.machine import header

    print(header(), flush=True)
    print(f"# {args.model}, batch {args.batch}: fp32 GFLOP/s, best of 10")
    print(
        f"{'product':<10} {'shape':<22} {'torch':>7} {'TF':>7} {'TF XLA':>7} {'JAX':>7} {'JAX/torch':>9} "
        f"{'TF/torch':>8}"
    )
    for name, (bd, m, k, n) in shapes(args.model, args.batch).items():
        r = rates(bd, m, k, n)
        shape = ("x".join(map(str, bd)) + "@" if bd else "") + f"{m}x{k}x{n}"
        print(
            f"{name:<10} {shape:<22} {r['torch']:>7.1f} {r['tf']:>7.1f} {r['tf_xla']:>7.1f} {r['jax']:>7.1f} "
            f"{r['jax'] / r['torch']:>8.2f}x {r['tf'] / r['torch']:>7.2f}x",
            flush=True,
        )


if __name__ == "__main__":
    main()
