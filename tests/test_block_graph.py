"""`keras_vit.nn.block_graph`: an eager `model(x)` on TensorFlow or JAX runs the encoder's blocks through one
compiled block function. Checked against the model's own compiled graph (`predict`) and against the
block-by-block eager path: values, gradients (TensorFlow's tape), the fallback for blocks that differ, and that
training and attention maps never take it."""

import numpy as np
import pytest

import keras

pytestmark = pytest.mark.skipif(
    keras.backend.backend() not in ("tensorflow", "jax"),
    reason="PyTorch runs eagerly by design: no block function there",
)
TF = keras.backend.backend() == "tensorflow"

T = dict(
    patch_size=4,
    hidden_size=16,
    mlp_dim=32,
    num_heads=2,
    num_layers=3,
    input_shape=(16, 16, 3),
    classes=5,
    classifier_activation=None,
)


def _model(seed=0, **kw):
    import keras_vit

    model = keras_vit.VisionTransformer(**{**T, **kw})
    rng = np.random.default_rng(seed)
    model.set_weights(
        [rng.normal(0, 0.2, w.shape).astype(w.dtype) if w.dtype.kind == "f" else w for w in model.get_weights()]
    )
    return model


def _x(n=2, seed=1):
    return np.random.default_rng(seed).uniform(-1, 1, (n, 16, 16, 3)).astype("float32")


def _traces(block_graph) -> int:
    ((function, _),) = block_graph._FUNCTIONS.values()
    return function.experimental_get_tracing_count() if TF else function._cache_size()


def test_models_of_one_structure_share_the_function_and_none_is_kept_alive_by_it(monkeypatch):
    import gc
    import weakref

    from keras_vit.nn import block_graph

    monkeypatch.setattr(block_graph, "_FUNCTIONS", {})
    x = _x()
    first = _model(seed=0)
    first(x)
    second = _model(seed=5)  # same structure, other weights: no new trace, its own outputs
    got = np.asarray(second(x))
    assert len(block_graph._FUNCTIONS) == 1 and _traces(block_graph) == 1
    np.testing.assert_allclose(got, second.predict(x, verbose=0), atol=1e-5)
    assert np.abs(got - np.asarray(first(x))).max() > 1e-2
    gone = weakref.ref(first)
    del first
    gc.collect()
    assert gone() is None
    other = _model(hidden_size=24)  # another structure: a function of its own
    other(x)
    assert len(block_graph._FUNCTIONS) == 2


def _eager_block_by_block(monkeypatch, fn):
    from keras_vit.nn import block_graph

    with monkeypatch.context() as m:
        m.setattr(block_graph, "run_blocks", lambda encoder, x, rotary=None: None)
        return fn()


def test_eager_call_matches_the_models_graph_and_the_block_by_block_path(monkeypatch):
    from keras_vit.nn import block_graph

    monkeypatch.setattr(block_graph, "_FUNCTIONS", {})
    model, x = _model(), _x()
    got = np.asarray(model(x, training=False))
    assert _traces(block_graph) == 1  # one trace served all three blocks
    np.testing.assert_allclose(got, model.predict(x, verbose=0), atol=1e-5)
    np.testing.assert_allclose(got, _eager_block_by_block(monkeypatch, lambda: np.asarray(model(x))), atol=1e-5)
    assert np.abs(got).max() > 0.1  # a model whose output carries the weights
    model(_x(n=3), training=False)  # another batch size: traced again, still right
    np.testing.assert_allclose(np.asarray(model(_x(n=3))), model.predict(_x(n=3), verbose=0), atol=1e-5)


@pytest.mark.skipif(not TF, reason="TensorFlow's tape differentiates eager calls; JAX traces, and skips the path")
def test_gradients_through_the_block_function_equal_the_block_by_block_ones(monkeypatch):
    import tensorflow as tf

    model, x = _model(), tf.constant(_x())

    def grads():
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = tf.reduce_sum(tf.square(model(x, training=False)))
        return tape.gradient(loss, [x] + list(model.trainable_variables))

    fast, slow = grads(), _eager_block_by_block(monkeypatch, grads)
    assert len(fast) == len(slow) == 1 + len(model.trainable_variables)
    for a, b in zip(fast, slow):
        assert a is not None
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=1e-5, rtol=1e-4)


def test_blocks_of_different_structure_run_one_by_one_and_stay_right():
    from keras_vit.nn import block_graph

    model, x = _model(), _x()
    encoder = next(layer for layer in model.layers if hasattr(layer, "blocks"))
    dense = next(layer for layer in encoder.blocks[1]._flatten_layers() if isinstance(layer, keras.layers.Dense))
    dense.enable_lora(2)  # block 1 alone now has two more variables
    assert not block_graph._uniform(encoder.blocks)
    assert block_graph.run_blocks(encoder, x) is None
    np.testing.assert_allclose(np.asarray(model(x, training=False)), model.predict(x, verbose=0), atol=1e-5)


def test_a_model_changed_after_its_first_call_is_traced_again():
    model, x = _model(), _x()
    before = np.asarray(model(x, training=False))
    model.enable_lora(2)  # every block: the same structure again, with more variables
    for v in model.trainable_variables:
        if "lora_kernel_b" in v.path:
            v.assign(np.full(v.shape, 0.05, "float32"))
    after = np.asarray(model(x, training=False))
    assert np.abs(after - before).max() > 1e-3
    np.testing.assert_allclose(after, model.predict(x, verbose=0), atol=1e-5)


def test_stateless_call_runs_the_blocks_with_the_values_it_is_given(monkeypatch):
    """Keras' `stateless_call`, eagerly: the block function reads the values of the caller's scope, not the
    variables'."""
    model, x = _model(), _x()
    trainable = [np.asarray(v) * 1.1 for v in model.trainable_variables]
    other = [np.asarray(v) for v in model.non_trainable_variables]
    got = np.asarray(model.stateless_call(trainable, other, x, training=False)[0])
    want = _eager_block_by_block(
        monkeypatch, lambda: np.asarray(model.stateless_call(trainable, other, x, training=False)[0])
    )
    np.testing.assert_allclose(got, want, atol=1e-5)
    assert np.abs(got - np.asarray(model(x))).max() > 1e-2


def test_training_and_attention_maps_never_take_the_block_function(monkeypatch):
    from keras_vit.nn import block_graph

    calls = []
    real = block_graph.run_blocks
    monkeypatch.setattr(
        block_graph, "run_blocks", lambda encoder, x, rotary=None: calls.append(1) or real(encoder, x, rotary)
    )
    model, x = _model(dropout_rate=0.1), _x()
    model(x, training=True)
    tokens = np.random.default_rng(2).normal(size=(2, 17, 16)).astype("float32")
    _, attention = model.encoder(tokens, return_attention=True)
    assert len(attention) == 3 and calls == []
    model(x)
    assert calls == [1]


_JAX = """
import json, numpy as np, keras, keras_vit
from keras_vit.nn import block_graph
model = keras_vit.VisionTransformer(patch_size=4, hidden_size=16, mlp_dim=32, num_heads=2, num_layers=3,
                                    input_shape=(16, 16, 3), classes=5, classifier_activation=None)
rng = np.random.default_rng(0)
model.set_weights([rng.normal(0, 0.2, w.shape).astype(w.dtype) if w.dtype.kind == "f" else w
                   for w in model.get_weights()])
x = rng.uniform(-1, 1, (2, 16, 16, 3)).astype("float32")
fast = np.asarray(model(x, training=False))
((function, _),) = block_graph._FUNCTIONS.values()
traces = function._cache_size()
graph = model.predict(x, verbose=0)
values = ([np.asarray(v) * 1.1 for v in model.trainable_variables],
          [np.asarray(v) for v in model.non_trainable_variables])
fast_stateless = np.asarray(model.stateless_call(*values, x, training=False)[0])
import jax
from keras_vit.nn.encoder_block import EncoderBlock
calls, real_call = [], EncoderBlock.call
EncoderBlock.call = lambda self, *a, **k: calls.append(1) or real_call(self, *a, **k)
jitted = jax.jit(lambda t, n, x: model.stateless_call(t, n, x, training=False)[0])
traced = np.asarray(jitted(*values, x))  # the block function nested in a trace: one block traced
traced_calls = len(calls)
block_graph.run_blocks = lambda encoder, x, rotary=None: None
slow = np.asarray(model(x, training=False))
slow_traced = np.asarray(jax.jit(lambda t, n, x: model.stateless_call(t, n, x, training=False)[0])(*values, x))
EncoderBlock.call = real_call
slow_stateless = np.asarray(model.stateless_call(*values, x, training=False)[0])
print(json.dumps(dict(traces=traces, vs_predict=float(np.abs(fast - graph).max()),
                      vs_blocks=float(np.abs(fast - slow).max()), scale=float(np.abs(fast).max()),
                      stateless=float(np.abs(fast_stateless - slow_stateless).max()),
                      stateless_moved=float(np.abs(fast_stateless - fast).max()),
                      traced=float(np.abs(traced - slow_traced).max()), traced_calls=traced_calls)))
"""


@pytest.mark.skipif(not TF, reason="the JAX run is the subprocess here; under JAX the tests above cover it")
def test_jax_calls_through_one_jitted_block_match_predict_and_the_block_by_block_path():
    from conftest import run_on_backend

    got = run_on_backend(_JAX, "jax")
    assert got["traces"] == 1 and got["scale"] > 0.1
    assert got["vs_predict"] <= 1e-5 and got["vs_blocks"] <= 1e-5
    assert got["stateless"] <= 1e-5 and got["stateless_moved"] > 1e-2
    assert got["traced"] <= 1e-5 and got["traced_calls"] <= 1  # 3 blocks, at most one traced (0: cached)


_PAIRS = r"""
import json, numpy as np, keras, keras_vit
T = dict(patch_size=4, hidden_size=16, mlp_dim=32, num_heads=2, num_layers=3, input_shape=(16, 16, 3), classes=5,
         classifier_activation=None)
x = np.random.default_rng(1).uniform(-1, 1, (2, 16, 16, 3)).astype("float32")


def model(lora=None, **kw):
    m = keras_vit.VisionTransformer(**{**T, **kw})
    if lora:
        m.enable_lora(**lora)
    rng = np.random.default_rng(0)
    m.set_weights([rng.normal(0, 0.2, w.shape).astype(w.dtype) for w in m.get_weights()])
    return m


# pairs that differ in one setting each, built one after the other in this process
pairs = {"lora_alpha": (dict(lora=dict(rank=2, alpha=4.0)), dict(lora=dict(rank=2, alpha=16.0))),
         "lora_targets": (dict(lora=dict(rank=2)), dict(lora=dict(rank=2, target_layer_names=("query", "key", "value", "out")))),
         "layer_norm_epsilon": (dict(), dict(layer_norm_epsilon=0.5)),
         "activation": (dict(), dict(activation="quick_gelu")), "qk_norm": (dict(), dict(qk_norm=True)),
         # the family options that keep the same variables: only the settings tell them apart
         "rotate_half": (dict(rotary_embedding=dict()), dict(rotary_embedding=dict(rotate_half=True))),
         "rotary_form": (dict(rotary_embedding=dict()), dict(rotary_embedding=dict(form="centered", temperature=100))),
         "post_norm": (dict(), dict(post_norm=True)),
         # differential attention: each block's lambda_init is its own (blocks of one model differ)
         "differential_depth": (dict(differential_attention=True, num_layers=1), dict(differential_attention=True)),
         "position_resampling": (dict(prefix_position_embedding=False), dict(
             prefix_position_embedding=False, position_resampling=dict(grid=(2, 2), aspect_preserving=True)))}
out = {}
for name, (first, second) in pairs.items():
    a, b = model(**first), model(**second)
    a(x)  # the first model traces the shared function
    # the second's eager call against its own graph (predict) and its merged, plain copy
    reference = b.merge_lora() if b.lora_layers() else b
    out[name] = float(np.abs(np.asarray(b(x)) - reference.predict(x, verbose=0)).max())
print(json.dumps(out))
"""


@pytest.mark.parametrize(
    "backend", ["tensorflow", pytest.param("jax", marks=pytest.mark.slow)]
)  # one in the default suite
def test_models_differing_in_one_setting_never_share_a_block_function_wrongly(backend):
    """The shared function's key comes from every setting a layer keeps (LoRA's alpha and targets, epsilon,
    activation, qk-norm, the rotary pairing, post-norm, differential attention's depth), so a second model never
    runs with the first's; the
    rotary table is an input of the function, so two rotary forms share one correctly."""
    from conftest import run_on_backend

    got = run_on_backend(_PAIRS, backend)
    assert max(got.values()) <= 1e-5, got
