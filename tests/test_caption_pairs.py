"""Image-caption pairs for contrastive training (`recipes.captions`): a table (CSV, TSV, JSONL) beside the images
and webdataset shards as img2dataset writes them give the same examples and batches; LiT trains on them on
TensorFlow and JAX and is evaluated by retrieval on the held-out pairs (recomputed here in numpy from the saved
towers); a stopped run resumes to the uninterrupted run's weights; bad tables and shards are refused naming the
row, shard or sample, before the workdir is touched, and a changed caption is refused on a resume."""

import csv
import io
import json
import os
import tarfile

import keras
import numpy as np
import pytest

import keras_vit
from conftest import LIT_TOWER as TOWER
from conftest import ROOT, assert_resumes_to_uninterrupted, python_run
from recipes import data, folder, train
from recipes.configs import demo

WORDS = "zero,one,two,three,four,five,six,seven,eight,nine".split(",")
PAIRS = 60


def _png(image: np.ndarray) -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(image).save(buffer, format="PNG")
    return buffer.getvalue()


def _pairs():
    """60 (PNG bytes, caption) of scikit-learn's digit scans at 32 px, each caption naming its digit in words and
    its scan's number (no two alike: a tie between equal captions would leave recall@1 to the tie-break)."""
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    images = (x[:PAIRS].reshape(-1, 8, 8) * (255.0 / 16.0)).round().astype("uint8")
    images = np.kron(images, np.ones((4, 4), "uint8"))  # 32 x 32
    templates = ("scan {} of the digit {}", "handwritten {}: {}", "card {} shows the number {}")
    return [(_png(im), templates[i % 3].format(i, WORDS[label])) for i, (im, label) in enumerate(zip(images, y))]


def _write_shards(root, pairs, shards=2, extra=None):
    """img2dataset's layout: <key>.png, <key>.txt and <key>.json per sample, `shards` tar files."""
    os.makedirs(root, exist_ok=True)
    per = -(-len(pairs) // shards)
    for s in range(shards):
        with tarfile.open(os.path.join(root, f"{s:05d}.tar"), "w") as tar:
            for i in range(s * per, min(len(pairs), (s + 1) * per)):
                image, caption = pairs[i]
                members = {"png": image, "txt": caption.encode(), "json": json.dumps({"key": f"{i:09d}"}).encode()}
                members.update((extra or {}).get(i, {}))
                for ext, payload in members.items():
                    info = tarfile.TarInfo(f"{i:09d}.{ext}")
                    info.size = len(payload)
                    tar.addfile(info, io.BytesIO(payload))
    return root


@pytest.fixture(scope="module")
def pairs_on_disk(tmp_path_factory):
    """The same 60 pairs as a CSV, a TSV (open_clip's column names), a JSONL and two webdataset shards."""
    root = tmp_path_factory.mktemp("pairs")
    pairs = _pairs()
    (root / "images").mkdir()
    for i, (image, _) in enumerate(pairs):
        (root / "images" / f"{i:03d}.png").write_bytes(image)
    rows = [(f"images/{i:03d}.png", caption) for i, (_, caption) in enumerate(pairs)]
    with open(root / "pairs.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["image", "caption"])
        w.writerows(rows)
    with open(root / "pairs.tsv", "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, delimiter="\t")
        w.writerow(["filepath", "title"])
        w.writerows(rows)
    with open(root / "pairs.jsonl", "w", encoding="utf-8") as f:
        for image, caption in rows:
            f.write(json.dumps({"image": image, "caption": caption}) + "\n")
    _write_shards(str(root / "shards"), pairs)
    return root


def _config(init, name, steps, **contrastive):
    c = demo.get_config("lit")
    c.model.update(**TOWER)
    c.dataset.update(name=name, train_split="train[:80%]", eval_split="train[80%:]", num_classes=0)
    c.update(init_weights=init, total_steps=steps, log_every=steps, checkpoint_every=steps, batch_size=16)
    c.contrastive.text.update(width=32, num_heads=2, num_layers=1, mlp_dim=64)
    c.contrastive.update(class_words="", **contrastive)
    return c


def _first_batch(name):
    source = data.load_source(name, "train[:80%]")
    ds = data.make_dataset(source, 8, 32, True, seed=3)
    images, labels = next(iter(ds))
    return source, np.asarray(images), np.asarray(labels)


def test_tables_and_shards_give_the_same_examples_and_batches(pairs_on_disk):
    pairs = _pairs()
    sources = {}
    for kind in ("pairs.csv", "pairs.tsv", "pairs.jsonl", "shards", "shards/00000.tar"):
        sources[kind] = data.load_source(f"captions:{pairs_on_disk / kind}", "train")
    for kind in ("pairs.csv", "pairs.tsv", "pairs.jsonl", "shards"):
        assert sorted(sources[kind].captions) == sorted(c for _, c in pairs), kind
        assert sources[kind].num_examples == PAIRS and sources[kind].class_names == ()
    assert sources["shards/00000.tar"].num_examples == PAIRS // 2
    # the table's rows and the shards' samples in the same order: the same fixed shuffle, the same batches
    first = {kind: _first_batch(f"captions:{pairs_on_disk / kind}") for kind in ("pairs.csv", "pairs.jsonl", "shards")}
    source, images, labels = first["pairs.csv"]
    for kind in ("pairs.jsonl", "shards"):
        other, other_images, other_labels = first[kind]
        np.testing.assert_array_equal(other_images, images)
        assert [other.captions[i] for i in other_labels] == [source.captions[i] for i in labels]
    # each example's label is its row: the caption of the image it was decoded from
    by_png = {image: caption for image, caption in pairs}
    from PIL import Image

    decoded = {np.asarray(Image.open(io.BytesIO(png))).tobytes(): c for png, c in by_png.items()}
    eval_source = data.load_source(f"captions:{pairs_on_disk / 'shards'}", "train[80%:]")
    for image, label in data.make_dataset(eval_source, 64, 32, False).unbatch().as_numpy_iterator():
        pixels = np.round((image + 1.0) * 127.5).astype("uint8")[..., 0]  # the eval resize is the identity here
        assert decoded[pixels.tobytes()] == eval_source.captions[label]


def _retrieval_in_numpy(model, source):
    """Image-to-text and text-to-image recall@1 of the saved towers on a split, by cosine, in numpy."""
    images = np.concatenate([x for x, _ in data.make_dataset(source, 64, 32, False).as_numpy_iterator()])
    tokenizer = keras_vit.ClipTokenizer(model.text_model.context_length)
    text = keras.ops.convert_to_numpy(model.text_model(tokenizer(list(source.captions)))).astype("float64")
    image = keras.ops.convert_to_numpy(model.image_model(images)).astype("float64")
    text /= np.linalg.norm(text, axis=1, keepdims=True)
    image /= np.linalg.norm(image, axis=1, keepdims=True)
    s = image @ text.T  # row i: image i, whose caption is text i (the eval stream is in label order)
    return float(np.mean(s.argmax(1) == np.arange(len(s)))), float(np.mean(s.argmax(0) == np.arange(len(s))))


def test_lit_on_a_caption_table_is_evaluated_by_retrieval(tmp_path, pairs_on_disk, lit_init_model):
    name = f"captions:{pairs_on_disk / 'pairs.csv'}"
    summary = train.train_and_evaluate(_config(lit_init_model, name, 30), str(tmp_path / "lit"))
    retrieval = summary["retrieval"]
    assert set(retrieval) >= {"image_to_text_R@1", "text_to_image_R@10", "image_to_text_mean_rank"}
    assert summary["eval_accuracy"] == retrieval["image_to_text_R@1"] and "zero_shot_accuracy" not in summary
    assert "class_words" not in summary and not (tmp_path / "lit" / "class_names.txt").exists()
    model = keras.models.load_model(summary["model"], compile=False)
    source = {v.path: np.asarray(v) for v in keras.models.load_model(lit_init_model, compile=False).weights}
    for v in model.image_model.weights:  # locked: the image tower is its source's
        np.testing.assert_array_equal(np.asarray(v), source[v.path])
    i2t, t2i = _retrieval_in_numpy(model, data.load_source(name, "train[80%:]"))
    assert abs(i2t - retrieval["image_to_text_R@1"]) <= 1e-6 and abs(t2i - retrieval["text_to_image_R@1"]) <= 1e-6
    record = json.loads((tmp_path / "lit" / "dataset.json").read_text())
    assert record["class_names"] == [] and record["examples"] == 48


def test_a_stopped_run_on_shards_resumes_and_a_changed_caption_is_refused(tmp_path, pairs_on_disk, lit_init_model):
    shards = _write_shards(str(tmp_path / "shards"), _pairs())
    config = _config(lit_init_model, f"captions:{shards}", 8)
    config.checkpoint_every = 4
    assert_resumes_to_uninterrupted(train.train_and_evaluate, config, tmp_path, stop=6, resumed_from=4)
    assert len(os.listdir(tmp_path / "stopped" / "caption_ids")) == 2  # the train and eval splits' ids, kept

    changed, row = _pairs(), int(folder.order(PAIRS)[0])  # a training row (the splits cut a fixed shuffle)
    changed[row] = (changed[row][0], changed[row][1].upper())  # same length, another caption
    _write_shards(shards, changed)
    with pytest.raises(ValueError, match="differ from those the run"):
        train.train_and_evaluate(config, str(tmp_path / "stopped"))


def test_lit_on_jax_trains_on_shards(tmp_path, pairs_on_disk, lit_init_model):
    flags = [
        "--config=recipes/configs/demo.py:lit",
        f"--config.init_weights={lit_init_model}",
        f"--config.dataset.name=captions:{pairs_on_disk / 'shards'}",
        "--config.dataset.train_split=train[:80%]",
        "--config.dataset.eval_split=train[80%:]",
        "--config.dataset.num_classes=0",
        "--config.contrastive.class_words=",
        "--config.batch_size=16",
        "--config.total_steps=10",
        "--config.log_every=10",
        "--config.contrastive.text.width=32",
        "--config.contrastive.text.num_heads=2",
        "--config.contrastive.text.num_layers=1",
        "--config.contrastive.text.mlp_dim=64",
        *[f"--config.model.{k}={v}" for k, v in TOWER.items()],
    ]
    env = dict(os.environ, KERAS_BACKEND="jax", PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    done = python_run(
        ["-m", "recipes.train", "--backend=jax", f"--workdir={tmp_path / 'jax'}", *flags], cwd=ROOT, env=env
    )
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((tmp_path / "jax" / "summary.json").read_text())
    model = keras.models.load_model(summary["model"], compile=False)
    i2t, t2i = _retrieval_in_numpy(model, data.load_source(f"captions:{pairs_on_disk / 'shards'}", "train[80%:]"))
    assert abs(i2t - summary["retrieval"]["image_to_text_R@1"]) <= 1e-6
    assert abs(t2i - summary["retrieval"]["text_to_image_R@1"]) <= 1e-6


def _table(tmp_path, header, rows, name="bad.csv"):
    with open(tmp_path / name, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
    return f"captions:{tmp_path / name}"


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda p, png: _table(p, ["image", "caption"], [["a.png", "x"], ["missing.png", "y"]]), "row 3: image"),
        (lambda p, png: _table(p, ["image", "filepath", "caption"], [["a.png", "a.png", "x"]]), "image and filepath"),
        (lambda p, png: _table(p, ["image", "text"], [["a.png", "x"]]), "no column name its captions"),
        (lambda p, png: _table(p, ["image", "caption"], []), "holds no rows"),
        (lambda p, png: f"captions:{p / 'a.png'}", "a table"),
        (
            lambda p, png: (
                (p / "bad.jsonl").write_text('{"image": "a.png", "caption": 3}\n') and f"captions:{p / 'bad.jsonl'}"
            ),
            "line 1: the caption",
        ),
        (
            lambda p, png: (
                _write_shards(str(p / "s"), [(png, "x"), (png, "y")], 1, {1: {"webp": b"RIFF"}})
                and f"captions:{p / 's'}"
            ),
            "WebP",
        ),
        (
            lambda p, png: _write_shards(str(p / "s"), [(png, "x")], 1, {0: {"jpg": png}}) and f"captions:{p / 's'}",
            "two images",
        ),
        (lambda p, png: (p / "s").mkdir() or f"captions:{p / 's'}", "no .tar files"),
    ],
)
def test_bad_tables_and_shards_are_refused_before_the_workdir_is_touched(tmp_path, lit_init_model, make, message):
    png = _pairs()[0][0]
    (tmp_path / "a.png").write_bytes(png)
    name = make(tmp_path, png)
    with pytest.raises(ValueError, match=message):
        train.train_and_evaluate(_config(lit_init_model, name, 2), str(tmp_path / "run"))
    assert not (tmp_path / "run").exists()


def test_a_shard_sample_without_its_caption_and_a_run_without_contrastive_are_refused(tmp_path, lit_init_model):
    png = _pairs()[0][0]
    root = tmp_path / "s"
    root.mkdir()
    with tarfile.open(root / "0.tar", "w") as tar:
        info = tarfile.TarInfo("sample.png")
        info.size = len(png)
        tar.addfile(info, io.BytesIO(png))
    with pytest.raises(ValueError, match=r"sample 'sample': no caption \(.txt\)"):
        data.load_source(f"captions:{root}", "train")
    good = _write_shards(str(tmp_path / "good"), _pairs()[:4], 1)
    config = _config(lit_init_model, f"captions:{good}", 2)
    config.contrastive.enabled = False
    with pytest.raises(ValueError, match="contrastive.enabled=True"):
        train.train_and_evaluate(config, str(tmp_path / "run"))
    assert not (tmp_path / "run").exists()


@pytest.fixture
def served(tmp_path):
    """A local HTTP server over `tmp_path / "www"` (the standard library's), its base URL."""
    import functools
    import http.server
    import threading

    root = tmp_path / "www"
    root.mkdir()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield root, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_brace_patterns_and_urls_name_the_same_shards(pairs_on_disk, served, tmp_path):
    """`{00000..00001}.tar` names the folder's two shards; over HTTP (a local server) they are copied into the
    cache once, used again while the server says the same of them, fetched anew when a shard changed; a missing
    shard or URL is refused by name."""
    shards = pairs_on_disk / "shards"
    whole = data.load_source(f"captions:{shards}", "train")
    pattern = data.load_source(f"captions:{shards}/{{00000..00001}}.tar", "train")
    assert pattern.captions == whole.captions and pattern.fingerprint == whole.fingerprint

    www, url = served
    for name in ("00000.tar", "00001.tar"):
        (www / name).write_bytes((shards / name).read_bytes())
    cache = tmp_path / "cache"
    remote = data.load_source(f"captions:{url}/{{00000..00001}}.tar", "train", data_dir=str(cache))
    assert remote.captions == whole.captions
    copies = sorted((cache / "caption_shards").rglob("*.tar"))
    assert [p.name for p in copies] == ["00000.tar", "00001.tar"]
    assert all(p.read_bytes() == (shards / p.name).read_bytes() for p in copies)
    images = np.concatenate([x for x, _ in data.make_dataset(remote, 64, 32, False).as_numpy_iterator()])
    expected = np.concatenate([x for x, _ in data.make_dataset(whole, 64, 32, False).as_numpy_iterator()])
    np.testing.assert_array_equal(images, expected)

    stamp = copies[0].stat().st_mtime_ns
    again = data.load_source(f"captions:{url}/{{00000..00001}}.tar", "train", data_dir=str(cache))
    assert again.fingerprint == remote.fingerprint and copies[0].stat().st_mtime_ns == stamp  # not fetched again

    pairs = _pairs()
    pairs[0] = (pairs[0][0], "a caption changed on the server")
    _write_shards(str(www), pairs)  # both shards rewritten, the first with one caption changed
    later = copies[0].stat().st_mtime + 60  # rewritten a minute later, as the server then says (Last-Modified has
    for name in ("00000.tar", "00001.tar"):  # one-second steps, and tar pads both to the same size)
        os.utime(www / name, (later, later))
    changed = data.load_source(f"captions:{url}/{{00000..00001}}.tar", "train", data_dir=str(cache))
    assert "a caption changed on the server" in changed.captions and changed.fingerprint != remote.fingerprint

    with pytest.raises(ValueError, match=r"00002.tar' does not exist \(1 of the 3 shards"):
        data.load_source(f"captions:{shards}/{{00000..00002}}.tar", "train")
    with pytest.raises(ValueError, match=r"/00007.tar' does not exist"):
        data.load_source(f"captions:{url}/00007.tar", "train", data_dir=str(cache))
    assert not list(cache.rglob("*.partial"))


def test_a_runs_caption_ids_are_kept_for_its_later_starts(tmp_path, monkeypatch, caplog):
    """The ids of a caption run's captions are written to its workdir once, equal to CLIP's BPE tokenizer's, and
    read back at a later start without tokenizing; other captions or another context length are another file;
    a damaged file is tokenized again and rewritten."""
    from recipes import contrastive

    cfg = demo.get_config("lit").contrastive
    captions = [caption for _, caption in _pairs()]
    ids = contrastive.tokenize(cfg, captions, str(tmp_path))
    np.testing.assert_array_equal(ids, keras_vit.ClipTokenizer(cfg.text.context_length)(captions))
    (kept,) = (tmp_path / "caption_ids").iterdir()

    def refuse(*args, **kwargs):
        raise AssertionError("tokenized again")

    with monkeypatch.context() as patch:
        patch.setattr(keras_vit.ClipTokenizer, "__call__", refuse)
        np.testing.assert_array_equal(contrastive.tokenize(cfg, captions, str(tmp_path)), ids)
    contrastive.tokenize(cfg, captions[:-1] + ["another caption"], str(tmp_path))
    length, cfg.text.context_length = cfg.text.context_length, 8
    assert contrastive.tokenize(cfg, captions, str(tmp_path)).shape == (PAIRS, 8)
    assert len(os.listdir(tmp_path / "caption_ids")) == 3
    cfg.text.context_length = length
    kept.write_bytes(kept.read_bytes()[:100])  # truncated
    np.testing.assert_array_equal(contrastive.tokenize(cfg, captions, str(tmp_path)), ids)
    assert "could not be read" in caplog.text
    np.testing.assert_array_equal(np.load(kept), ids)
