"""Image folders in the recipes: every file format and colour mode read as PIL reads it, deterministic splits,
a clear line for each bad layout before the workdir exists, undecodable files skipped and counted, the
folder's fingerprint guarding resumption, class names beside the model, LoRA and layer-wise decay runs."""

import json
import os
import shutil

import keras
import numpy as np
import pytest

import keras_vit
from image_folders import pixels, write_folder
from recipes import data, folder, train
from conftest import tiny_recipe_config


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    root = tmp_path_factory.mktemp("folder") / "images"
    names = write_folder(str(root))
    return str(root), names


def _config(root, **dataset):
    c = tiny_recipe_config(deterministic=True)
    c.dataset.update(name=f"folder:{root}", num_classes=0, train_split="train[:80%]", eval_split="train[80%:]")
    c.dataset.update(**dataset)
    return c


def test_every_format_decodes_as_pil_reads_it(images):
    root, _ = images
    checked = set()
    for directory, _, names in os.walk(root):
        for name in names:
            path = os.path.join(directory, name)
            if name.startswith("broken"):
                assert not folder._decodes(path)
                continue
            ours, theirs = np.asarray(folder.decode(path)), pixels(path)
            assert ours.shape == theirs.shape and ours.dtype == np.uint8
            ext = os.path.splitext(name)[1].lower()
            tolerance = 1 if ext == ".jpg" else 0  # both use the accurate integer IDCT
            assert np.abs(ours.astype(int) - theirs.astype(int)).max() <= tolerance, path
            checked.add(ext)
    assert checked == {".jpg", ".png", ".gif", ".bmp"}


def test_splits_are_deterministic_disjoint_and_skip_the_undecodable(images, caplog):
    root, names = images
    name = f"folder:{root}"
    train_part, held_out = data.load_source(name, "train[:80%]"), data.load_source(name, "train[80%:]")
    assert train_part.class_names == held_out.class_names == tuple(names)
    every = set(train_part.files) | set(held_out.files)
    assert not set(train_part.files) & set(held_out.files)
    on_disk = {os.path.relpath(os.path.join(d, n), root) for d, _, ns in os.walk(root) for n in ns}
    assert every == on_disk - {"digit_0/broken_0.jpg"}
    assert train_part.skipped + held_out.skipped == ("digit_0/broken_0.jpg",)
    again = data.load_source(name, "train[:80%]")
    assert again.files == train_part.files and again.fingerprint == train_part.fingerprint
    labels = [int(ex["label"]) for ex in train_part.dataset]
    assert labels == [names.index(f.split("/")[0]) for f in train_part.files]
    shapes = {tuple(ex["image"].shape) for ex in train_part.dataset}
    assert all(s[2] == 3 for s in shapes) and len(shapes) > 3  # any size, always RGB


def test_train_and_val_folders_are_splits(tmp_path):
    for split in ("train", "val"):
        write_folder(str(tmp_path / split), per_class=4, corrupt=0)
    src = data.load_source(f"folder:{tmp_path}", "val")
    assert src.num_examples == 3 * 7 and src.files[0].startswith("val/")
    shutil.rmtree(tmp_path / "val" / "digit_2")
    with pytest.raises(ValueError, match="differ; every split needs the same classes"):
        data.load_source(f"folder:{tmp_path}", "train")


def _bad_layouts(tmp_path):
    root = tmp_path / "bad"
    yield "missing", root / "nope", "does not exist"
    (root / "empty").mkdir(parents=True)
    yield "empty", root / "empty", "holds no class subfolders"
    write_folder(str(root / "one"), per_class=3, classes=(0,), corrupt=0)
    yield "one class", root / "one", r"holds one class folder \('digit_0'\)"
    for c in ("a", "b"):
        (root / "noimg" / c).mkdir(parents=True)
        (root / "noimg" / c / "notes.txt").write_text("x")
    yield "no images", root / "noimg", "holds no image files"
    write_folder(str(root / "mixed"), per_class=3, corrupt=0)
    shutil.copy(next((root / "mixed" / "digit_0").glob("*.png")), root / "mixed" / "stray.png")
    yield "images beside classes", root / "mixed", r"holds image files directly \('stray.png'\)"
    write_folder(str(root / "splits" / "train"), per_class=3, corrupt=0)
    (root / "splits" / "cats").mkdir()
    yield "splits and classes", root / "splits", r"mixes split folders \(train\) with 'cats'"
    write_folder(str(root / "broken"), per_class=3, corrupt=2)
    yield "undecodable", root / "broken", "2 of 20 images .* cannot be decoded"


def test_every_bad_layout_is_one_line_before_the_workdir_exists(tmp_path):
    for case, root, message in _bad_layouts(tmp_path):
        workdir = tmp_path / "work" / case.replace(" ", "_")
        with pytest.raises(ValueError, match=message):
            train.train_and_evaluate(_config(root), str(workdir))
        assert not workdir.exists(), case


def test_a_folder_run_saves_class_names_and_refuses_a_changed_folder(images, tmp_path):
    root = tmp_path / "images"
    shutil.copytree(images[0], root)
    c = _config(root)
    summary = train.train_and_evaluate(c, str(tmp_path / "run"))
    assert (tmp_path / "run" / "class_names.txt").read_text().split() == images[1]
    record = json.loads((tmp_path / "run" / "dataset.json").read_text())
    assert record["skipped"] == ["digit_0/broken_0.jpg"] and record["class_names"] == images[1]
    assert keras_vit.load_model(summary["model"]).classes == 3
    with pytest.raises(ValueError, match="num_classes=5, but .* has 3 class folders"):
        train.train_and_evaluate(_config(root, num_classes=5), str(tmp_path / "other"))
    shutil.copy(root / "digit_1" / "001.jpg", root / "digit_1" / "001_copy.jpg")
    with pytest.raises(ValueError, match="differ from those the run in .* started on"):
        train.train_and_evaluate(c, str(tmp_path / "run"))


def test_lora_run_trains_adapters_and_head_only_and_its_adapters_reload(images, tmp_path):
    root = images[0]
    base = _config(root)
    base.total_steps = 4
    pre = train.train_and_evaluate(base, str(tmp_path / "base"))
    c = _config(root)
    c.update(init_weights=pre["model"], total_steps=3)
    c.lora.update(rank=2, targets="query,value,Dense_0")
    c.optimizer.update(layer_decay=0.75)
    tuned = train.train_and_evaluate(c, str(tmp_path / "lora"))
    start, end = (keras_vit.load_model(p) for p in (pre["model"], tuned["model"]))
    x = np.random.default_rng(0).uniform(-1, 1, (4, 32, 32, 3)).astype("float32")
    changed = [
        a.path
        for a, b in zip(start.weights, end.weights)
        if not np.array_equal(keras.ops.convert_to_numpy(a), keras.ops.convert_to_numpy(b))
    ]
    kinds = {p.split("/")[-2] if "encoderblock" in p else p.split("/")[0] for p in changed}
    assert kinds <= {"query", "value", "Dense_0", "head"} and "query" in kinds and "head" in kinds
    assert not any(p.endswith("/bias") and "encoderblock" in p for p in changed)  # biases stay frozen
    keras_vit.load_lora_weights(start, tuned["lora_weights"])  # the base + the adapters file = the merged model.keras
    np.testing.assert_allclose(start.predict(x, verbose=0), end.predict(x, verbose=0), atol=1e-5)


def test_layer_decay_scales_each_rate_by_depth():
    from recipes.configs.base import base_config
    from recipes.trainer import optim

    model = keras_vit.VisionTransformer(
        patch_size=8, hidden_size=16, mlp_dim=32, num_heads=2, num_layers=3, input_shape=(16, 16, 3), classes=4
    )
    opt = base_config().optimizer
    opt.update(name="sgd", momentum=0.0, learning_rate=1.0, warmup_steps=0, decay="constant", weight_decay=0.1)
    variables = model.trainable_variables
    optimizer = optim.make_optimizer(opt, 10, lr_scales=optim.layer_decay_scales(variables, 3, 0.5))
    optimizer.build(variables)
    before = {v.path: keras.ops.convert_to_numpy(v).copy() for v in variables}
    optimizer.apply([keras.ops.ones_like(v) for v in variables], variables)
    # head: full rate; block i of 3: 0.5 ** (3 - i); embeddings 0.5 ** 4 (BEiT's rule); weight decay scaled alike
    expected_scale = {
        "head/kernel": 1.0,
        "Transformer/encoder_norm/gamma": 1.0,
        "embedding/kernel": 0.0625,
        "cls/cls": 0.0625,
        "posembed_input/pos_embedding": 0.0625,
        "Transformer/encoderblock_2/MlpBlock_3/Dense_0/kernel": 0.5,
        "Transformer/encoderblock_0/MultiHeadDotProductAttention_1/query/kernel": 0.125,
    }
    after = {v.path: keras.ops.convert_to_numpy(v) for v in variables}
    for path, scale in expected_scale.items():
        np.testing.assert_allclose(after[path], before[path] * (1 - 0.1 * scale) - scale, atol=1e-6)


def test_layer_decay_adamw_scales_each_rate_in_the_fused_update():
    """The recipes' AdamW is `keras_vit.FusedAdamW`: on TensorFlow its fused update (eager, and compiled by XLA as
    in the recipes' step) reads each variable's factor. Adam's first step moves each weight by
    lr * scale * sqrt(1 - b2) / (1 - b1) * m / (sqrt(v) + eps) with m = (1 - b1) g, v = (1 - b2) g^2."""
    import tensorflow as tf

    from recipes.configs.base import base_config
    from recipes.trainer import optim

    model = keras_vit.VisionTransformer(
        patch_size=8, hidden_size=16, mlp_dim=32, num_heads=2, num_layers=3, input_shape=(16, 16, 3), classes=4
    )
    opt = base_config().optimizer
    opt.update(name="adamw", learning_rate=0.01, warmup_steps=0, decay="constant", weight_decay=0.1, wd_exclude="")
    variables = model.trainable_variables
    b1, b2, eps = opt.b1, opt.b2, 1e-7  # epsilon: Keras' AdamW default, which the recipes keep
    step = 0.01 * np.sqrt(1 - b2) / (1 - b1) * (1 - b1) / (np.sqrt(1 - b2) + eps)  # for g = 1
    expected_scale = {
        "head/kernel": 1.0,
        "embedding/kernel": 0.0625,
        "Transformer/encoderblock_2/MlpBlock_3/Dense_0/kernel": 0.5,
        "Transformer/encoderblock_0/MultiHeadDotProductAttention_1/query/kernel": 0.125,
    }
    for compiled in (False, True):
        optimizer = optim.make_optimizer(opt, 10, lr_scales=optim.layer_decay_scales(variables, 3, 0.5))
        assert isinstance(optimizer, keras_vit.FusedAdamW)
        optimizer.build(variables)
        before = {v.path: keras.ops.convert_to_numpy(v).copy() for v in variables}
        apply = lambda g: optimizer.apply(g, variables)  # noqa: E731
        apply = tf.function(apply, jit_compile=True) if compiled else apply
        apply([keras.ops.ones_like(v) for v in variables])
        after = {v.path: keras.ops.convert_to_numpy(v) for v in variables}
        for path, scale in expected_scale.items():
            want = before[path] * (1 - 0.01 * 0.1 * scale) - scale * step
            np.testing.assert_allclose(after[path], want, atol=1e-6, err_msg=f"{path}, compiled={compiled}")
        for v in variables:
            v.assign(before[v.path])
