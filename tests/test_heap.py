"""`keras_vit.utils.heap`: freed heap pages go back to the OS (read from /proc, not from the code under test),
the trimming thread stops with its block, and the training steps' first call runs inside it."""

import ctypes
import threading

import numpy as np
import pytest

from keras_vit.utils import heap

glibc = pytest.mark.skipif(not heap.available(), reason="needs glibc's malloc_trim")


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024


def _free_in_the_middle_of_the_heap(mb: int):
    """Allocates `mb` MB in 64 KiB blocks (below glibc's mmap threshold, so from the arena), touches them, and
    frees all but the last one, which keeps the freed pages below the heap's top where free() cannot trim."""
    libc = ctypes.CDLL(None)
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    blocks = [libc.malloc(64 * 1024) for _ in range(mb * 16)]
    for b in blocks:
        ctypes.memset(b, 1, 64 * 1024)
    for b in blocks[:-1]:
        libc.free(b)
    return libc, blocks[-1]


@glibc
def test_trim_gives_freed_pages_back_to_the_os():
    libc, last = _free_in_the_middle_of_the_heap(200)
    try:
        before = _rss_mb()
        assert heap.trim()
        assert before - _rss_mb() > 100  # of the 200 MB freed, most is resident until the trim
    finally:
        libc.free(last)


@glibc
def test_returning_freed_memory_trims_while_the_block_runs_and_stops_after():
    libc, last = _free_in_the_middle_of_the_heap(200)
    try:
        before = _rss_mb()
        with heap.returning_freed_memory(interval=0.01):
            threading.Event().wait(0.2)  # the block runs; the thread trims meanwhile
            during = _rss_mb()
            assert any(t.name == "keras_vit-heap-trim" for t in threading.enumerate())
        assert before - during > 100
        assert not any(t.name == "keras_vit-heap-trim" for t in threading.enumerate())
    finally:
        libc.free(last)


def test_returning_freed_memory_stops_its_thread_on_an_error_and_checks_the_interval():
    with pytest.raises(KeyError):
        with heap.returning_freed_memory(interval=0.01):
            raise KeyError("inside")
    assert not any(t.name == "keras_vit-heap-trim" for t in threading.enumerate())
    for bad in (0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="interval must be > 0 seconds"):
            with heap.returning_freed_memory(interval=bad):
                pass
        with pytest.raises(ValueError, match="interval must be > 0 seconds"):
            heap.first_call_returning_freed_memory(lambda: None, interval=bad)


def test_without_malloc_trim_everything_is_a_no_op(monkeypatch):
    monkeypatch.setattr(heap, "_malloc_trim", lambda: None)
    assert not heap.available() and heap.trim() is False
    with heap.returning_freed_memory():
        assert not any(t.name == "keras_vit-heap-trim" for t in threading.enumerate())


def test_only_the_first_call_runs_inside_the_trimming_block(monkeypatch):
    monkeypatch.setattr(heap, "available", lambda: True)
    trims = []
    monkeypatch.setattr(heap, "trim", lambda: trims.append(1) or True)

    def step(x):
        """the step"""
        threading.Event().wait(0.05)
        return x + 1

    wrapped = heap.first_call_returning_freed_memory(step, interval=0.005)
    assert wrapped(1) == 2 and len(trims) >= 2  # some while it ran, one at the end
    first = len(trims)
    assert wrapped(2) == 3 and len(trims) == first
    assert wrapped.__wrapped__ is step and wrapped.__doc__ == "the step"


def test_the_recipes_training_steps_trim_on_their_first_call(monkeypatch):
    """Both engines' steps go through `first_call_returning_freed_memory`, whatever the backend here."""
    import keras

    import keras_vit

    seen = []
    real = heap.first_call_returning_freed_memory
    monkeypatch.setattr(heap, "first_call_returning_freed_memory", lambda f, **kw: seen.append(f) or real(f, **kw))
    model = keras_vit.VisionTransformer(
        patch_size=4,
        hidden_size=8,
        mlp_dim=16,
        num_heads=2,
        num_layers=1,
        input_shape=(8, 8, 3),
        classes=3,
        classifier_activation=None,
    )
    opt = keras.optimizers.AdamW(1e-3)
    opt.build(model.trainable_variables)
    x = np.random.default_rng(0).uniform(-1, 1, (2, 8, 8, 3)).astype("float32")
    y = np.array([0, 2])
    if keras.backend.backend() == "tensorflow":
        from recipes.trainer import tf_step

        step = tf_step.build_train_step(model, opt, num_classes=3, global_batch_size=2)
        out = step((x, y))
    elif keras.backend.backend() == "jax":
        from recipes.trainer import jax_step

        engine = jax_step.JaxEngine(model, opt, None, num_classes=3, global_batch_size=2)
        out = engine((x, y))
    else:
        pytest.skip("the recipes train on TensorFlow and JAX")
    assert len(seen) == 1 and np.isfinite(float(out["loss"]))


def test_fit_runs_the_first_call_of_each_training_function_it_makes_inside_the_trimming_block(monkeypatch):
    """Keras' own `fit`: one trimming block for the call that compiles, none for the calls after it; a training
    function made again (`force=True`, or after `compile`) gets its own."""
    import contextlib

    import keras

    import keras_vit

    blocks = []

    @contextlib.contextmanager
    def counting(interval=heap.DEFAULT_INTERVAL):
        blocks.append(interval)
        yield

    monkeypatch.setattr(heap, "returning_freed_memory", counting)
    model = keras_vit.VisionTransformer(
        patch_size=4,
        hidden_size=8,
        mlp_dim=16,
        num_heads=2,
        num_layers=1,
        input_shape=(8, 8, 3),
        classes=3,
        classifier_activation=None,
    )
    model.compile(
        optimizer=keras.optimizers.SGD(0.1), loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    )
    x = np.random.default_rng(0).uniform(-1, 1, (8, 8, 8, 3)).astype("float32")
    y = np.arange(8) % 3
    first = model.fit(x, y, batch_size=4, epochs=2, verbose=0).history["loss"]
    assert len(blocks) == 1 and all(np.isfinite(first))
    model.train_on_batch(x[:4], y[:4])
    assert len(blocks) == 1
    model.make_train_function(force=True)
    model.train_on_batch(x[:4], y[:4])
    assert len(blocks) == 2
    assert model.train_function.__wrapped__ is not None  # still Keras' function underneath


def test_fit_with_the_trimming_block_trains_exactly_as_without(monkeypatch):
    import keras

    import keras_vit

    def fitted():
        keras.utils.set_random_seed(3)
        model = keras_vit.VisionTransformer(
            patch_size=4,
            hidden_size=8,
            mlp_dim=16,
            num_heads=2,
            num_layers=1,
            input_shape=(8, 8, 3),
            classes=3,
            classifier_activation=None,
        )
        model.compile(
            optimizer=keras.optimizers.AdamW(1e-2), loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        )
        x = np.random.default_rng(0).uniform(-1, 1, (8, 8, 8, 3)).astype("float32")
        model.fit(x, np.arange(8) % 3, batch_size=4, epochs=2, verbose=0, shuffle=False)
        return [np.asarray(w) for w in model.get_weights()]

    trimmed = fitted()
    monkeypatch.setattr(heap, "first_call_returning_freed_memory", lambda f, interval=0.1: f)
    plain = fitted()
    assert len(trimmed) == len(plain)
    for a, b in zip(trimmed, plain):
        np.testing.assert_array_equal(a, b)
