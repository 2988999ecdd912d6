"""Image folders at scale: a resume reads the decode check back from the workdir (no second decode pass,
counted), a folder rewritten in place is checked again, files that now decode differently are refused (named
when the rewrite kept their size and time); the
training stream decodes only what it yields (not the shuffle buffer, not a resume's skip, not another
process's rows) and its batches are those of the eagerly decoded stream."""

import json
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

from image_folders import write_folder
from recipes import data, folder, train
from conftest import tiny_recipe_config


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    path = tmp_path_factory.mktemp("scale") / "images"
    write_folder(str(path), per_class=70)  # 1 % of 220 files: two may fail
    return str(path)


def _config(root, steps=2):
    c = tiny_recipe_config(total_steps=steps, deterministic=True)
    c.dataset.update(name=f"folder:{root}", num_classes=0, train_split="train[:80%]", eval_split="")
    return c


def _fresh_process(monkeypatch):
    """What a new process has: no decode check cached in memory."""
    monkeypatch.setattr(folder, "_CHECKED", {})


def test_a_resume_reads_the_decode_check_back_and_a_rewritten_folder_is_checked_again(root, tmp_path, monkeypatch):
    images = tmp_path / "images"
    shutil.copytree(root, images)
    work = str(tmp_path / "run")
    _fresh_process(monkeypatch)
    before = folder.DECODE_PASSES[0]
    train.train_and_evaluate(_config(images), work)
    assert folder.DECODE_PASSES[0] == before + 1
    record = json.loads((tmp_path / "run" / folder.CHECK_RECORD).read_text())
    assert record["undecodable"] == ["digit_0/broken_0.jpg"] and record["files"] == 3 * 73 + 1

    _fresh_process(monkeypatch)
    summary = train.train_and_evaluate(_config(images, steps=4), work)
    assert summary["resumed_from"] == 2 and folder.DECODE_PASSES[0] == before + 1  # read back, not decoded

    good = images / "digit_1" / "001.jpg"
    os.utime(good, ns=(os.stat(good).st_atime_ns, os.stat(good).st_mtime_ns + 10**9))  # touched: checked again
    _fresh_process(monkeypatch)
    summary = train.train_and_evaluate(_config(images, steps=6), work)
    assert summary["resumed_from"] == 4 and folder.DECODE_PASSES[0] == before + 2

    checked = {p: p.stat() for p in (images / "digit_1").rglob("*") if p.is_file()}  # as the last check saw them
    size = good.stat().st_size  # rewritten in place, same size, no longer an image: the batches would change
    good.write_bytes(b"\xff\xd8" + b"\0" * (size - 2))
    _fresh_process(monkeypatch)
    with pytest.raises(ValueError, match="decode differently from when the run .* started .*001.jpg"):
        train.train_and_evaluate(_config(images, steps=8), work)

    # every image of one class rewritten as a non-image with its size and modification time kept: the decode
    # check's record (keyed by both) is trusted, so only the input pipeline meets them, and names them
    for path, stat in checked.items():
        path.write_bytes(b"\0" * stat.st_size)
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    _fresh_process(monkeypatch)
    with pytest.raises(ValueError, match=r"image\(s\) of .* no longer decode, though .*digit_1/0") as raised:
        train.train_and_evaluate(_config(images, steps=40), work)
    assert "decode_check.json" in str(raised.value) and "new --workdir" in str(raised.value)
    assert folder.DECODE_PASSES[0] == before + 4  # the start trusted the record; one pass named the files


def _counted(source):
    """`source` with a decode that counts its calls (a Python counter bumped from inside the tf.data map)."""
    calls = []

    def count(path):
        calls.append(path)
        return np.int64(0)

    def decode(ex):
        tick = tf.numpy_function(count, [ex["path"]], tf.int64)
        out = source.decode(ex)
        return {"image": out["image"], "label": out["label"] + tf.cast(tick, out["label"].dtype)}

    counted = data.Source(
        source.dataset, source.num_examples, source.num_classes, records=source.records, decode=decode
    )
    return counted, calls


def _batches(ds, n):
    return [(np.asarray(x), np.asarray(y)) for x, y in ds.take(n)]


def test_the_stream_decodes_only_what_it_yields_and_keeps_the_eager_batches(root):
    source = data.load_source(f"folder:{root}", "train")
    eager = data.Source(source.dataset, source.num_examples, source.num_classes)  # decoded before the shuffle
    kw = dict(batch_size=8, image_size=16, training=True, seed=3, shuffle_buffer=64)
    counted, calls = _counted(source)
    lazy = _batches(data.make_dataset(counted, start_step=7, **kw), 2)
    reference = _batches(data.make_dataset(eager, start_step=7, **kw), 2)
    for (x, y), (rx, ry) in zip(lazy, reference):
        np.testing.assert_array_equal(x, rx)
        np.testing.assert_array_equal(y, ry)
    # seven skipped batches and a 64-file shuffle buffer decoded nothing; prefetch reads a few batches ahead
    assert 16 <= len(calls) <= 16 + 8 * 6, len(calls)

    parts = []
    for index in range(2):
        counted, calls = _counted(source)
        parts.append(_batches(data.make_dataset(counted, rows=(index, 2), **kw), 3))
        assert all(len(x) == 4 for x, _ in parts[-1])
        assert len(calls) <= 3 * 4 + 4 * 6  # its own rows only (and some read ahead)
    whole = _batches(data.make_dataset(eager, **kw), 3)
    for step, (x, y) in enumerate(whole):
        np.testing.assert_array_equal(np.concatenate([parts[0][step][0], parts[1][step][0]]), x)
        np.testing.assert_array_equal(np.concatenate([parts[0][step][1], parts[1][step][1]]), y)


def test_the_decode_check_finds_what_the_eager_decoder_finds(root, tmp_path):
    images = tmp_path / "images"
    shutil.copytree(root, images)
    (images / "digit_2" / "empty.png").write_bytes(b"")
    (images / "digit_1" / "cut.png").write_bytes((images / "digit_1" / "photo_rgba.png").read_bytes()[:40])
    whole = folder.scan(str(images))
    expected = [f for f in whole.files if not folder._decodes(str(images / f))]
    assert folder.undecodable(whole) == expected
    assert set(expected) == {"digit_0/broken_0.jpg", "digit_2/empty.png", "digit_1/cut.png"}
