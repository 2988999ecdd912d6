"""`keras_vit.nn.norm_core.normed_matmul` (a pre-norm block's LayerNorm and the product that reads it, while
training on TF and JAX): the plain formula's values; gradients against the LayerNorm written out in float64 numpy
(closed form for the scale, offset and kernel, central differences for the input) and against each framework's
own differentiation of `norm(x) @ kernel`, on a residual stream with one large channel; bfloat16 inputs; a block's
training gradients equal to its inference call's for each variant the block builds; which calls take the core;
and a compiled backward pass of stacked pre-norm layers that keeps less (XLA's own buffer reports)."""

import pytest

from conftest import run_on_backend

_CHECK = r"""
import json, sys
from tests.xla_report import dump_compiled_programs, preallocated_temp_bytes
dump_compiled_programs(sys.argv[1])  # XLA's buffer reports of the compiled steps, before TensorFlow starts
import numpy as np, keras
from keras import ops
from keras_vit.nn import norm_core
from keras_vit.nn.layer_norm import LayerNorm
from keras_vit.nn.encoder_block import EncoderBlock
from tests.vjp import backend, grads, jax, tf

rng = np.random.default_rng(0)
d, n = 48, 20
x = (3.0 + 2.0 * rng.standard_normal((2, 7, d))).astype("float32")
x[..., 5] = 300.0  # one channel of "massive activations", as in trained ViTs' residual streams
gamma = (1 + 0.1 * rng.standard_normal(d)).astype("float32")
beta = (0.1 * rng.standard_normal(d)).astype("float32")
kernel = (rng.standard_normal((d, n)) / 7).astype("float32")
w = rng.standard_normal((2, 7, n)).astype("float32")
norm = LayerNorm(epsilon=1e-6)
norm.build(x.shape)

def ours(x, g, b, k):
    with keras.StatelessScope(state_mapping=[(norm.gamma, g), (norm.beta, b)]):
        return norm_core.normed_matmul(x, norm, k)

def plain(x, g, b, k):
    with keras.StatelessScope(state_mapping=[(norm.gamma, g), (norm.beta, b)]):
        return ops.matmul(norm(x), k)

def ln64(x):
    x = x.astype("float64")
    mean = x.mean(-1, keepdims=True)
    x_hat = (x - mean) / np.sqrt(((x - mean) ** 2).mean(-1, keepdims=True) + 1e-6)
    return x_hat, x_hat * gamma + beta

args = (x, gamma, beta, kernel)
y_ours, g_ours = grads(ours, args, w)
y_plain, g_plain = grads(plain, args, w)
x_hat, y64 = ln64(x)
d_y64 = w.astype("float64") @ kernel.T.astype("float64")
closed = {"gamma": (d_y64 * x_hat).sum((0, 1)), "beta": d_y64.sum((0, 1)),
          "kernel": y64.reshape(-1, d).T @ w.reshape(-1, n).astype("float64")}
numeric = []
for i in ((0, 1, 3), (1, 4, 5), (1, 6, 40)):
    up, down = x.astype("float64"), x.astype("float64")
    step = 1e-4 * max(1.0, abs(float(x[i])))
    up[i] += step; down[i] -= step
    fd = ((w * (ln64(up)[1] @ kernel)).sum() - (w * (ln64(down)[1] @ kernel)).sum()) / (2 * step)
    numeric.append([float(g_ours[0][i]), float(fd)])
rel = lambda a, b: float(np.abs(a - b).max() / np.abs(b).max())
out = {"value_vs_plain": rel(y_ours, y_plain), "value_vs_float64": rel(y_ours, y64 @ kernel),
       "grads_vs_autodiff": [rel(a, b) for a, b in zip(g_ours, g_plain)],
       "closed_form": {k: rel(g_ours[j], closed[k]) for j, k in ((1, "gamma"), (2, "beta"), (3, "kernel"))},
       "d_x_vs_central_differences": numeric}

# bfloat16 inputs (mixed precision): statistics in float32, each gradient in its argument's dtype
norm16 = LayerNorm(epsilon=1e-6, dtype="mixed_bfloat16")
norm16.build(x.shape)
x16 = ops.cast(x[..., :d], "bfloat16")
def ours16(x, k):
    return norm_core.normed_matmul(x, norm16, k)
def plain16(x, k):
    return ops.matmul(norm16(x), k)
k16 = ops.cast(kernel, "bfloat16")
if backend == "jax":
    (y16, vjp16), (y16p, vjp16p) = jax.vjp(ours16, x16, k16), jax.vjp(plain16, x16, k16)
    g16, g16p = vjp16(ops.cast(w, "bfloat16")), vjp16p(ops.cast(w, "bfloat16"))
else:
    with tf.GradientTape(persistent=True) as tape:
        tape.watch([x16, k16])
        y16, y16p = ours16(x16, k16), plain16(x16, k16)
        l16, l16p = tf.reduce_sum(y16 * tf.cast(w, "bfloat16")), tf.reduce_sum(y16p * tf.cast(w, "bfloat16"))
    g16, g16p = tape.gradient(l16, [x16, k16]), tape.gradient(l16p, [x16, k16])
f64 = lambda t: np.asarray(ops.cast(t, "float32"), "float64")
out["bf16"] = {"dtypes": [keras.backend.standardize_dtype(t.dtype) for t in (y16, *g16)],
               "value": rel(f64(y16), f64(y16p)), "grads": [rel(f64(a), f64(b)) for a, b in zip(g16, g16p)]}

# a block's training gradients equal its inference call's, for the variants it builds; and which norms fuse
calls = []
real = norm_core.normed_matmul
def counted(*a, **k):
    calls.append(1)
    return real(*a, **k)
import keras_vit.nn.attention as attention_module, keras_vit.nn.mlp as mlp_module, keras_vit.nn.swiglu as swiglu_module
modules = (attention_module, mlp_module, swiglu_module)
for module in modules:
    module.normed_matmul = counted
variants = {"plain": {}, "qk_norm": dict(qk_norm=True), "post_norm": dict(post_norm=True),
            "parallel": dict(parallel_layers=True), "swiglu": dict(swiglu=True),
            "swiglu_sub_norm": dict(swiglu=True, mlp_norm=True, qkv_bias=False, projection_bias=False),
            "swiglu_lora": dict(swiglu=True),
            "rms_norm": dict(rms_norm=True), "differential": dict(differential_attention=True),
            "layer_scale": dict(layer_scale_init=0.1), "lora": {}, "no_bias": dict(qkv_bias=False, projection_bias=False)}
tokens = rng.standard_normal((2, 9, 32)).astype("float32")
out["blocks"] = {}
for name, options in variants.items():
    block = EncoderBlock(num_heads=4, mlp_dim=64, **options)
    block.build(tokens.shape)
    if name.endswith("lora"):  # LoRA on the products that read the norms (SwiGLU's gate too)
        mlp = block.mlp
        for layer in (block.attention.query, block.attention.key, block.attention.value, mlp.dense_0,
                      *([mlp.gate] if hasattr(mlp, "gate") else [])):
            layer.enable_lora(2)
    values = [np.asarray(v.value) for v in block.trainable_variables]
    values = [v + rng.normal(0, 0.05, v.shape).astype(v.dtype) for v in values]  # LoRA's zero B moved too
    result = []
    for training in (True, False):
        del calls[:]
        def f(t, *vs):
            y, _ = block.stateless_call(list(vs), [v.value for v in block.non_trainable_variables], t,
                                        training=training)
            return y
        result.append(grads(f, [tokens, *values], np.ones(tokens.shape, "float32"))[1])
        result.append(len(calls))
    (g_train, fused_train, g_infer, fused_infer) = result
    # per gradient, relative to its size or a hundredth of the largest gradient's: some are 0 in exact arithmetic
    # (the key bias, qk-norm's key offset: a shift shared by every key cancels in the softmax)
    scale = max(float(np.abs(b).max()) for b in g_infer)
    out["blocks"][name] = {
        "fused_calls": [fused_train, fused_infer],
        "train_vs_infer": max(float(np.abs(a - b).max()) / max(float(np.abs(b).max()), 1e-2 * scale)
                              for a, b in zip(g_train, g_infer)),
    }
for module in modules:
    module.normed_matmul = real

# what XLA keeps for the backward pass of 12 pre-norm residual layers, x + LN(x) @ K, with the kernels' gradients
layers = [(rng.standard_normal((128, 128)) / 11).astype("float32") for _ in range(12)]
x0 = rng.standard_normal((512, 128)).astype("float32")
stack_norm = LayerNorm(epsilon=1e-6)
stack_norm.build((512, 128))

def loss(x, kernels, core):
    for k in kernels:
        x = x + (norm_core.normed_matmul(x, stack_norm, k) if core else ops.matmul(stack_norm(x), k))
    return ops.sum(ops.sin(x))

def temp(core):
    if backend == "jax":
        step = jax.jit(jax.grad(lambda x, kernels: loss(x, kernels, core), argnums=(0, 1)))
        return step.lower(x0, layers).compile().memory_analysis().temp_size_in_bytes
    name = "norm_stack_core" if core else "norm_stack_plain"
    kernels = [tf.Variable(k) for k in layers]

    def step(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            value = loss(x, kernels, core)
        return tape.gradient(value, [x, *kernels])

    step.__name__ = name
    tf.function(step, jit_compile=True)(tf.constant(x0))
    return preallocated_temp_bytes(sys.argv[1], name)

out["temp_bytes"] = {"core": temp(True), "plain": temp(False), "one_activation": 512 * 128 * 4}
print(json.dumps(out))
"""


@pytest.mark.parametrize("backend", ["tensorflow", "jax"])
def test_normed_matmul_values_gradients_and_memory(backend, tmp_path):
    out = run_on_backend(_CHECK, backend, str(tmp_path))
    assert out["value_vs_plain"] <= 1e-6, out  # the layer's own forward formula
    assert out["value_vs_float64"] <= 1e-5, out
    assert max(out["grads_vs_autodiff"]) <= 1e-4, out  # x, gamma, beta, kernel: float32 rounding, one channel at 300
    for name, error in out["closed_form"].items():
        assert error <= 1e-5, (name, out)
    for ours, numeric in out["d_x_vs_central_differences"]:
        assert ours == pytest.approx(numeric, rel=1e-3, abs=1e-4), out
    bf16 = out["bf16"]
    assert bf16["dtypes"] == ["bfloat16", "bfloat16", "bfloat16"], bf16
    assert bf16["value"] <= 1e-2 and max(bf16["grads"]) <= 3e-2, bf16  # bfloat16's 8 bits, two roundings apart
    blocks = out["blocks"]
    for name, result in blocks.items():
        # float32 rounding of the training and inference paths (up to 1.1e-5 measured on variants that do not
        # take this core: the attention and MLP cores differ from the inference formulas by that much)
        assert result["train_vs_infer"] <= 3e-5, (name, result)
        assert result["fused_calls"][1] == 0, (name, result)  # inference calls keep the norm as its own layer
    # both pre-norms fuse where the block has a LayerNorm before float products; RMSNorm, post-norm and the
    # parallel block's shared norm stay layers; SwiGLU's two kernels are one product with the norm
    expected = dict(plain=2, qk_norm=2, lora=2, layer_scale=2, no_bias=2, differential=2)
    expected.update(swiglu=2, swiglu_sub_norm=2, swiglu_lora=2)
    expected.update(post_norm=0, parallel=0, rms_norm=0)
    assert {k: v["fused_calls"][0] for k, v in blocks.items()} == expected, blocks
    # XLA's temporaries: the plain form keeps LN(x) of each of the 12 layers besides x; the core x only
    t = out["temp_bytes"]
    assert t["core"] <= t["plain"] - 6 * t["one_activation"], t


@pytest.mark.parametrize("swiglu", [False, True])
def test_quantized_projections_take_the_norm_as_a_layer(swiglu, monkeypatch):
    """Once `model.quantize("int8")` replaced a block's kernels, the norm runs as its own layer before Keras' int8
    layers, in training calls too (the core would read a float kernel that is no longer there)."""
    import numpy as np

    import keras_vit.nn.attention as attention_module
    import keras_vit.nn.mlp as mlp_module
    import keras_vit.nn.swiglu as swiglu_module
    from keras_vit.nn import norm_core
    from keras_vit.nn.encoder_block import EncoderBlock

    block = EncoderBlock(num_heads=2, mlp_dim=16, swiglu=swiglu)
    block.build((1, 3, 8))
    mlp = block.mlp
    for layer in (*(getattr(block.attention, n) for n in ("query", "key", "value", "out")), mlp.dense_0, mlp.dense_1):
        layer.quantize("int8")
    if swiglu:
        mlp.gate.quantize("int8")
    calls = []

    def counted(*a, **k):
        calls.append(1)
        return norm_core.normed_matmul(*a, **k)

    for module in (attention_module, mlp_module, swiglu_module):
        monkeypatch.setattr(module, "normed_matmul", counted)
    x = np.random.default_rng(0).standard_normal((1, 3, 8)).astype("float32")
    y_train, y_infer = block(x, training=True), block(x, training=False)
    assert calls == []
    np.testing.assert_allclose(np.asarray(y_train), np.asarray(y_infer), rtol=1e-6, atol=1e-6)
