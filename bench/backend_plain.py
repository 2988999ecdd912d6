"""ViT-S/16 training steps written straight for a backend, without Keras: the limits `bench/backend_limit.py`
sets our Keras steps against. Same network as `keras_vit.create_model("ViT-S/16")` (pre-norm blocks, LayerNorm
epsilon 1e-6, tanh GELU, class token, learned position embeddings, fused q/k/v kernel), the same loss (mean
softmax cross-entropy), clipping (global norm 1.0) and AdamW (decoupled weight decay)."""

from __future__ import annotations

# the network and the step's hyper-parameters every row of bench/backend_limit.py shares
S16 = dict(patch=16, hidden=384, layers=12, heads=6, mlp=1536, classes=1000)
LR, WD, EPS, CLIP = 1e-4, 0.05, 1e-7, 1.0


def plain_flax(size: int, batch: int):
    """(step() that blocks, parameter count): flax.linen + optax, one `jax.jit` with the state donated, with the
    compile options of the keras JAX engine's step (`keras_vit.utils.xla_options`: no YNNPACK fusions on CPU)."""
    import flax.linen as nn
    import jax
    import jax.numpy as jnp
    import numpy as np
    import optax

    from keras_vit.utils.xla_options import tuned_jit

    d, h, m = S16["hidden"], S16["heads"], S16["mlp"]

    class Block(nn.Module):
        @nn.compact
        def __call__(self, x):
            y = nn.LayerNorm(epsilon=1e-6)(x)
            q, k, v = jnp.split(nn.DenseGeneral((3, h, d // h))(y), 3, axis=2)
            y = jax.nn.dot_product_attention(q[:, :, 0], k[:, :, 0], v[:, :, 0])
            x = x + nn.DenseGeneral(d, axis=(-2, -1))(y)
            y = nn.Dense(m)(nn.LayerNorm(epsilon=1e-6)(x))
            return x + nn.Dense(d)(nn.gelu(y, approximate=True))

    class ViT(nn.Module):
        @nn.compact
        def __call__(self, x):
            p = S16["patch"]
            x = nn.Conv(d, (p, p), strides=(p, p), padding="VALID")(x)
            x = x.reshape(x.shape[0], -1, d)
            cls = self.param("cls", nn.initializers.zeros, (1, 1, d))
            x = jnp.concatenate([jnp.broadcast_to(cls, (x.shape[0], 1, d)), x], axis=1)
            x = x + self.param("pos", nn.initializers.normal(0.02), (1, x.shape[1], d))
            for _ in range(S16["layers"]):
                x = Block()(x)
            return nn.Dense(S16["classes"])(nn.LayerNorm(epsilon=1e-6)(x)[:, 0])

    net = ViT()
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.uniform(-1, 1, (batch, size, size, 3)).astype("float32"))
    y = jnp.asarray(rng.integers(0, S16["classes"], batch).astype("int32"))
    params = net.init(jax.random.PRNGKey(0), x[:1])
    tx = optax.chain(optax.clip_by_global_norm(CLIP), optax.adamw(LR, eps=EPS, weight_decay=WD))
    state = [params, tx.init(params)]

    def step(params, opt_state):
        def loss(params):
            return optax.softmax_cross_entropy_with_integer_labels(net.apply(params, x), y).mean()

        value, grads = jax.value_and_grad(loss)(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        return value, optax.apply_updates(params, updates), opt_state

    compiled = tuned_jit(step, donate_argnums=(0, 1))  # compiled as the keras JAX engine's step is

    def run():
        value, state[0], state[1] = compiled(*state)
        value.block_until_ready()

    return run, sum(a.size for a in jax.tree.leaves(params))


def _tf_vit_variables(size: int):
    """{name: tf.Variable} of the ViT-S/16, initialised as the paper's code does (values do not matter here)."""
    import tensorflow as tf

    d, h, m, p = S16["hidden"], S16["heads"], S16["mlp"], S16["patch"]
    tokens = (size // p) ** 2 + 1
    shapes = {
        "embed/kernel": (p, p, 3, d),
        "embed/bias": (d,),
        "cls": (1, 1, d),
        "pos": (1, tokens, d),
        "norm/scale": (d,),
        "norm/bias": (d,),
        "head/kernel": (d, S16["classes"]),
        "head/bias": (S16["classes"],),
    }
    for i in range(S16["layers"]):
        shapes.update(
            {
                f"{i}/ln1/scale": (d,),
                f"{i}/ln1/bias": (d,),
                f"{i}/qkv/kernel": (d, 3, h, d // h),
                f"{i}/qkv/bias": (3, h, d // h),
                f"{i}/out/kernel": (h, d // h, d),
                f"{i}/out/bias": (d,),
                f"{i}/ln2/scale": (d,),
                f"{i}/ln2/bias": (d,),
                f"{i}/fc1/kernel": (d, m),
                f"{i}/fc1/bias": (m,),
                f"{i}/fc2/kernel": (m, d),
                f"{i}/fc2/bias": (d,),
            }
        )
    init = tf.random.Generator.from_seed(0)
    return {
        k: tf.Variable(
            tf.ones(s)
            if k.endswith("scale")
            else tf.zeros(s)
            if k.endswith("bias") or k == "cls"
            else init.normal(s, stddev=0.02),
            name=k,
        )
        for k, s in shapes.items()
    }


def _tf_forward(w: dict, x):
    import tensorflow as tf

    def norm(x, name):
        mean, var = tf.nn.moments(x, axes=[-1], keepdims=True)
        return (x - mean) * tf.math.rsqrt(var + 1e-6) * w[name + "/scale"] + w[name + "/bias"]

    p, d = S16["patch"], S16["hidden"]
    x = tf.nn.conv2d(x, w["embed/kernel"], strides=p, padding="VALID") + w["embed/bias"]
    x = tf.reshape(x, (tf.shape(x)[0], -1, d))
    x = tf.concat([tf.repeat(w["cls"], tf.shape(x)[0], axis=0), x], axis=1) + w["pos"]
    for i in range(S16["layers"]):
        qkv = tf.einsum("btd,dkhe->bkthe", norm(x, f"{i}/ln1"), w[f"{i}/qkv/kernel"])
        qkv = qkv + w[f"{i}/qkv/bias"][None, :, None]
        q, k, v = qkv[:, 0], qkv[:, 1], qkv[:, 2]
        scores = tf.einsum("bqhe,bkhe->bhqk", q, k) / (d // S16["heads"]) ** 0.5
        y = tf.einsum("bhqk,bkhe->bqhe", tf.nn.softmax(scores, axis=-1), v)
        x = x + tf.einsum("bqhe,hed->bqd", y, w[f"{i}/out/kernel"]) + w[f"{i}/out/bias"]
        y = tf.nn.gelu(norm(x, f"{i}/ln2") @ w[f"{i}/fc1/kernel"] + w[f"{i}/fc1/bias"], approximate=True)
        x = x + y @ w[f"{i}/fc2/kernel"] + w[f"{i}/fc2/bias"]
    return norm(x, "norm")[:, 0] @ w["head/kernel"] + w["head/bias"]


def plain_tf(size: int, batch: int):
    """(step() that blocks, parameter count): TensorFlow ops, one `tf.function(jit_compile=True)` step."""
    import tensorflow as tf

    w = _tf_vit_variables(size)
    names = sorted(w)
    params = [w[k] for k in names]
    slots = [(tf.Variable(tf.zeros_like(v)), tf.Variable(tf.zeros_like(v))) for v in params]
    t = tf.Variable(0.0)
    x = tf.random.uniform((batch, size, size, 3), -1, 1)
    y = tf.random.uniform((batch,), 0, S16["classes"], dtype=tf.int32)

    @tf.function(jit_compile=True)
    def step():
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(y, _tf_forward(w, x)))
        grads, _ = tf.clip_by_global_norm(tape.gradient(loss, params), CLIP)
        t.assign_add(1.0)
        rate = LR * tf.sqrt(1 - 0.999**t) / (1 - 0.9**t)
        for v, g, (m1, m2) in zip(params, grads, slots):
            v.assign_sub(LR * WD * v)
            m1.assign(0.9 * m1 + 0.1 * g)
            m2.assign(0.999 * m2 + 0.001 * tf.square(g))
            v.assign_sub(rate * m1 / (tf.sqrt(m2) + EPS))
        return loss

    return lambda: step().numpy(), sum(int(v.shape.num_elements()) for v in params)
