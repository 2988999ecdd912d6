"""The experiment configs: the paper's Tables 3 and 4 (values typed from the paper / REFERENCE §4), no field
that nothing reads, and every row of every config file builds its model and trains two steps."""

import gc
import importlib
import os
import pkgutil
import re
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_vit
import recipes.configs
from conftest import ROOT
from recipes.configs import base, demo, finetune, mpp, pretrain

# Table 3: variant -> (model, data, epochs, base LR, decay, weight decay, dropout)
TABLE_3 = {
    "vit_b16_jft": ("ViT-B/16", "jft300m", 7, 8e-4, "linear", 0.1, 0.0),
    "vit_b32_jft": ("ViT-B/32", "jft300m", 7, 8e-4, "linear", 0.1, 0.0),
    "vit_l32_jft": ("ViT-L/32", "jft300m", 7, 6e-4, "linear", 0.1, 0.0),
    "vit_l16_jft": ("ViT-L/16", "jft300m", 7, 4e-4, "linear", 0.1, 0.0),
    "vit_l16_jft_14ep": ("ViT-L/16", "jft300m", 14, 4e-4, "linear", 0.1, 0.0),
    "vit_h14_jft": ("ViT-H/14", "jft300m", 14, 3e-4, "linear", 0.1, 0.0),
    "r50_vit_b16_jft": ("R50+ViT-B/16", "jft300m", 7, 8e-4, "linear", 0.1, 0.0),
    "r50_vit_b32_jft": ("R50+ViT-B/32", "jft300m", 7, 8e-4, "linear", 0.1, 0.0),
    "r50_vit_l32_jft": ("R50+ViT-L/32", "jft300m", 7, 2e-4, "linear", 0.1, 0.0),
    "r50_vit_l16_jft": ("R50+ViT-L/16", "jft300m", 7, 4e-4, "linear", 0.1, 0.0),
    "r50_vit_l16_jft_14ep": ("R50+ViT-L/16", "jft300m", 14, 4e-4, "linear", 0.1, 0.0),
    "vit_b16_i21k": ("ViT-B/16", "imagenet21k", 90, 1e-3, "linear", 0.03, 0.1),
    "vit_b32_i21k": ("ViT-B/32", "imagenet21k", 90, 1e-3, "linear", 0.03, 0.1),
    "vit_l16_i21k": ("ViT-L/16", "imagenet21k", 90, 1e-3, "linear", 0.03, 0.1),
    "vit_l32_i21k": ("ViT-L/32", "imagenet21k", 90, 1e-3, "linear", 0.03, 0.1),
    "vit_l16_i21k_30ep": ("ViT-L/16", "imagenet21k", 30, 1e-3, "linear", 0.03, 0.1),
    "vit_l32_i21k_30ep": ("ViT-L/32", "imagenet21k", 30, 1e-3, "linear", 0.03, 0.1),
    "vit_b16_i1k": ("ViT-B/16", "imagenet2012", 300, 3e-3, "cosine", 0.3, 0.1),
    "vit_b32_i1k": ("ViT-B/32", "imagenet2012", 300, 3e-3, "cosine", 0.3, 0.1),
    "vit_l16_i1k": ("ViT-L/16", "imagenet2012", 300, 3e-3, "cosine", 0.3, 0.1),
    "vit_l32_i1k": ("ViT-L/32", "imagenet2012", 300, 3e-3, "cosine", 0.3, 0.1),
}

# Table 4: variant -> (TFDS name, steps, LR sweep, train split without the dev part)
TABLE_4 = {
    "imagenet": ("imagenet2012", 20_000, [0.003, 0.01, 0.03, 0.06], "train[:99%]"),
    "cifar100": ("cifar100", 10_000, [0.001, 0.003, 0.01, 0.03], "train[:98%]"),
    "cifar10": ("cifar10", 10_000, [0.001, 0.003, 0.01, 0.03], "train[:98%]"),
    "pets": ("oxford_iiit_pet", 500, [0.001, 0.003, 0.01, 0.03], "train[:90%]"),
    "flowers": ("oxford_flowers102", 500, [0.001, 0.003, 0.01, 0.03], "train[:90%]"),
}


def test_every_table_3_row():
    assert set(pretrain.ROWS) == set(TABLE_3)
    for variant, (model, data, epochs, lr, decay, wd, dropout) in TABLE_3.items():
        c = pretrain.get_config(variant)
        assert (
            c.model.name,
            c.dataset.name,
            c.num_epochs,
            c.optimizer.learning_rate,
            c.optimizer.decay,
            c.optimizer.weight_decay,
            c.model.dropout_rate,
        ) == (model, data, epochs, lr, decay, wd, dropout)
        assert (c.batch_size, c.optimizer.warmup_steps, c.optimizer.b1, c.optimizer.b2) == (4096, 10_000, 0.9, 0.999)
        assert c.dataset.image_size == 224 and c.optimizer.name == "adamw"
        assert c.optimizer.clip_norm == (1.0 if data == "imagenet2012" else 0.0)
        # pre-training heads carry a representation layer of width D, hybrids included
        assert c.model.representation_size == keras_vit.vit_config(model).hidden_size


def test_every_table_4_row():
    for variant, (name, steps, sweep, dev) in TABLE_4.items():
        for v in (variant, variant + "_polyak"):
            c = finetune.get_config(v)
            assert (c.dataset.name, c.total_steps, c.dataset.train_split) == (name, steps, dev)
            assert (c.optimizer.name, c.optimizer.momentum, c.optimizer.decay, c.optimizer.weight_decay) == (
                "sgd",
                0.9,
                "cosine",
                0.0,
            )
            assert (c.batch_size, c.optimizer.clip_norm, c.dataset.image_size, c.optimizer.warmup_steps) == (
                512,
                1.0,
                384,
                500,
            )
            assert c.optimizer.learning_rate in sweep
            assert c.ema_decay == (0.9999 if v.endswith("_polyak") else 0.0)


def test_mpp_config_follows_appendix_b12():
    c = mpp.get_config("vit_b16_jft")
    assert c.mpp.enabled and (c.mpp.corrupt_rate, c.mpp.mask_rate, c.mpp.random_rate, c.mpp.bits) == (0.5, 0.8, 0.1, 3)
    assert 2 ** (3 * c.mpp.bits) == 512
    assert (c.optimizer.learning_rate, c.optimizer.warmup_steps, c.optimizer.decay, c.batch_size) == (
        2e-4,
        10_000,
        "cosine",
        4096,
    )


@pytest.mark.parametrize("module", [pretrain, finetune, mpp, demo])
def test_unknown_variant_lists_known_ones(module):
    with pytest.raises(ValueError, match="Unknown variant 'nope'.*known variants: "):
        module.get_config("nope")


def _leaves(config, prefix=""):
    for key, value in config.items():
        if hasattr(value, "items"):
            yield from _leaves(value, f"{prefix}{key}.")
        else:
            yield prefix + key


def test_every_config_field_is_read_by_the_trainer():
    code = ""
    for folder in ("recipes", "keras_vit"):
        for directory, _, names in os.walk(os.path.join(ROOT, folder)):  # every room of the package
            code += "".join(open(os.path.join(directory, n)).read() for n in names if n.endswith(".py"))
    unread = []
    for leaf in _leaves(base.base_config()):
        field = leaf.split(".")[-1]
        if not re.search(rf"\.{field}\b|[\"']{field}[\"']", code):  # attribute access, or a name the code indexes by
            unread.append(leaf)
    assert unread == []


# TensorFlow keeps each row's traced step alive in its runtime after `clear_session` (about 0.5-1 GB a full-width
# row), so `make test-slow`'s 51 full-width rows run in fresh processes, a chunk each; a child process sees them here.
_IN_CHILD = "KERAS_VIT_CONFIG_ROWS_CHILD"
_CHUNK = 6


def _all_rows():
    """(module, variant, id, default) for every row of every config file; the default suite trains the first of
    each file (but the demo's, which tests/test_demo.py trains) and the first hybrid of each but pretraining's
    (its hybrid rows are the largest)."""
    for info in pkgutil.iter_modules(recipes.configs.__path__):
        module = importlib.import_module(f"recipes.configs.{info.name}")
        if hasattr(module, "get_config") and hasattr(module, "variants"):
            hybrid_seen = False
            for i, variant in enumerate(module.variants()):
                first_hybrid = variant.startswith("r") and "vit" in variant and not hybrid_seen
                first_hybrid = first_hybrid and info.name != "pretrain"
                hybrid_seen = hybrid_seen or first_hybrid
                default = (i == 0 and info.name != "demo") or first_hybrid
                yield module, variant, f"{info.name}:{variant}", default


def _rows():
    """The rows this process trains: the default ones, or in a child process every row (the parent names which)."""
    for module, variant, row_id, default in _all_rows():
        if default or os.environ.get(_IN_CHILD):
            yield pytest.param(module, variant, id=row_id)


def _slow_chunks():
    slow = [row_id for *_, row_id, default in _all_rows() if not default]
    return [slow[i : i + _CHUNK] for i in range(0, len(slow), _CHUNK)]


def test_rows_are_enumerated_from_every_config_file():
    files = {row[2].split(":")[0] for row in _all_rows()}
    assert files == {"demo", "finetune", "mpp", "pretrain", "vtab"}
    assert sum(map(len, _slow_chunks())) + len(list(_rows())) == len(list(_all_rows()))
    assert len(list(_all_rows())) == len(pretrain.ROWS) + 2 * len(finetune.ROWS) + 1 + len(mpp.VARIANTS) + 19 + len(
        demo.variants()
    )


def _synthetic(num_classes):
    def make(batch, size, training):
        rng = np.random.default_rng(0)
        images = rng.uniform(-1, 1, (8, size, size, 3)).astype("float32")
        labels = rng.integers(0, num_classes, 8).astype("int64")
        ds = tf.data.Dataset.from_tensor_slices((images, labels))
        return (ds.repeat() if training else ds).batch(batch)

    return make


@pytest.fixture
def fresh_session():
    yield
    keras.backend.clear_session()  # ViT-H / L rows with 21k-class heads would otherwise pile up
    gc.collect()


@pytest.mark.parametrize("module, variant", list(_rows()))
def test_every_row_builds_and_trains_two_steps(module, variant, tmp_path, fresh_session):
    """Each row at a tiny override: 2 encoder blocks, 2 patches per side, batch 4, 2 steps, no XLA."""
    from recipes import train

    c = module.get_config(variant)
    name = c.model.name
    patch = keras_vit.vit_config(name).effective_patch_size if name else c.model.patch_size
    c.model.num_layers = 2
    c.dataset.image_size = 2 * patch if name else c.dataset.image_size
    c.update(batch_size=4, total_steps=2, log_every=1, checkpoint_every=2, jit_compile=False, init_weights="")
    c.optimizer.warmup_steps = 1
    c.fewshot.every = 0
    c.dataset.num_classes = c.dataset.num_classes or 3  # the folder row learns its classes from the folder
    if c.contrastive.enabled:  # no pre-trained tower to lock here: both towers train
        c.contrastive.lock_image = False
    data = _synthetic(c.dataset.num_classes)
    summary = train.train_and_evaluate(c, str(tmp_path), train_input=data, eval_input=data)
    assert summary["steps"] == 2 and np.isfinite(summary["final_train"]["loss"])
    if c.contrastive.enabled:
        two_towers = keras.models.load_model(summary["model"], compile=False)
        assert isinstance(two_towers, keras_vit.ImageTextModel) and "zero_shot_accuracy" in summary
        assert two_towers.image_model.vit_config.num_layers == 2
        return
    model = keras_vit.load_model(summary["model"])
    assert model.vit_config.num_layers == 2 and model.classes == c.dataset.num_classes
    if name:
        table = keras_vit.vit_config(name)
        assert (model.vit_config.hidden_size, model.vit_config.resnet_layers) == (
            table.hidden_size,
            table.resnet_layers,
        )
        assert model.representation_size == (c.model.representation_size or None)


@pytest.mark.slow
@pytest.mark.parametrize("chunk", _slow_chunks(), ids=lambda chunk: f"{chunk[0]}..{chunk[-1]}")
def test_every_full_width_row_trains_two_steps_in_a_fresh_process(chunk):
    """The rows the default suite leaves out, each chunk in a child pytest (the memory note above)."""
    test = f"{os.path.abspath(__file__)}::test_every_row_builds_and_trains_two_steps"
    child = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", ""] + [f"{test}[{c}]" for c in chunk],
        env={**os.environ, _IN_CHILD: "1"},
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert child.returncode == 0, child.stdout[-6000:] + child.stderr[-3000:]
    assert f"{len(chunk)} passed" in child.stdout
