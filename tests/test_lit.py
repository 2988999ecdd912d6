"""Contrastive image-text training in the recipes (`recipes.contrastive`): LiT on the bundled digits with
captions made from their names, on TensorFlow and JAX. The locked tower stays bit-equal to its source, the text
tower learns (zero-shot above chance on held-out digits), the saved two-tower model reloads and its zero-shot
accuracy, recomputed here in numpy from its towers' embeddings, is the run's; a stopped run resumes to the
uninterrupted run's weights; bad settings are refused before the workdir is touched."""

import json
import os

import keras
import numpy as np
import pytest

import keras_vit
from conftest import LIT_TOWER as TOWER
from conftest import ROOT, assert_resumes_to_uninterrupted, python_run
from recipes import train
from recipes.configs import demo

WORDS = "zero,one,two,three,four,five,six,seven,eight,nine"


def _config(init, steps, **contrastive):
    c = demo.get_config("lit")
    c.model.update(**TOWER)
    c.update(init_weights=init, total_steps=steps, log_every=steps, checkpoint_every=steps)
    c.contrastive.text.update(width=32, num_heads=2, num_layers=1, mlp_dim=64)
    c.contrastive.update(**contrastive)
    return c


def _test_digits():
    from recipes import demo as demo_run

    _, _, images, labels = demo_run._digits(32)  # as the recipes' evaluation prepares them: [-1, 1]
    return images, labels


def _zero_shot_in_numpy(model, words, templates, images):
    """Each class's caption embeddings averaged over the templates and normalised; the nearest class by cosine."""
    tokenizer = keras_vit.ClipTokenizer(model.text_model.context_length)
    texts = [t.format(w) for w in words for t in templates]
    text = keras.ops.convert_to_numpy(model.text_model(tokenizer(texts))).astype("float64")
    text /= np.linalg.norm(text, axis=1, keepdims=True)
    classes = text.reshape(len(words), len(templates), -1).mean(axis=1)
    classes /= np.linalg.norm(classes, axis=1, keepdims=True)
    image = keras.ops.convert_to_numpy(model.image_model(images)).astype("float64")
    return (image @ classes.T).argmax(axis=1)


def test_lit_learns_captions_keeps_the_tower_and_saves_two_towers(tmp_path, lit_init_model):
    config = _config(lit_init_model, 150, class_words=WORDS)
    summary = train.train_and_evaluate(config, str(tmp_path / "lit"))
    assert summary["zero_shot_accuracy"] >= 0.15, summary  # 10 classes: chance is 0.10 (measured 0.2-0.3)
    model = keras.models.load_model(summary["model"], compile=False)
    assert isinstance(model, keras_vit.ImageTextModel) and model.logit_bias is None
    source = {v.path: np.asarray(v) for v in keras.models.load_model(lit_init_model, compile=False).weights}
    for v in model.image_model.weights:  # locked: every image weight is the source's, bit for bit
        np.testing.assert_array_equal(np.asarray(v), source[v.path])
    images, labels = _test_digits()
    predicted = _zero_shot_in_numpy(model, WORDS.split(","), list(config.contrastive.templates), images)
    assert abs(float(np.mean(predicted == labels)) - summary["zero_shot_accuracy"]) <= 1e-3
    import tensorflow as tf  # the run's checkpoint holds the text tower and temperature (what a resume restores)

    saved = {n for n, _ in tf.train.list_variables(tf.train.latest_checkpoint(str(tmp_path / "lit" / "checkpoints")))}
    trained = [v.path for v in model.text_model.weights] + ["logit_scale"]
    assert all(any(n.startswith("model/") and p.replace("/", ".S") in n for n in saved) for p in trained)
    # the next step of the journey: the zero-shot command on the saved two-tower model, photos as PNG files
    from PIL import Image

    from keras_vit.analysis import zero_shot

    for i in range(2):
        Image.fromarray(((images[i] + 1) * 127.5).astype("uint8")).save(tmp_path / f"digit{i}.png")
    assert (
        zero_shot.main(
            [
                str(tmp_path / "digit0.png"),
                str(tmp_path / "digit1.png"),
                f"--weights={summary['model']}",
                f"--classes={WORDS}",
                "--templates=a handwritten {}.",
                "--top=1",
            ]
        )
        == 0
    )
    with pytest.raises(ValueError, match="not an image-text model"):
        keras_vit.load_image_text(lit_init_model)
    (tmp_path / "notes.txt").write_text("not a model")
    with pytest.raises(ValueError, match="an image-text model is a .keras file, a folder"):
        keras_vit.load_image_text(tmp_path / "notes.txt")
    ids = model.text_preprocessor()(["a handwritten seven."])
    assert ids.shape == (1, config.contrastive.text.context_length)
    assert summary["trainable_parameters"] == sum(int(np.prod(v.shape)) for v in model.text_model.weights) + 1


def test_sigmoid_loss_with_both_towers_trained(tmp_path, lit_init_model):
    config = _config(lit_init_model, 20, class_words=WORDS, loss="siglip", lock_image=False)
    summary = train.train_and_evaluate(config, str(tmp_path / "siglip"))
    model = keras.models.load_model(summary["model"], compile=False)
    assert model.logit_bias is not None and np.isfinite(summary["final_train"]["loss"])
    source = {v.path: np.asarray(v) for v in keras.models.load_model(lit_init_model, compile=False).weights}
    changed = [v.path for v in model.image_model.weights if not np.array_equal(np.asarray(v), source[v.path])]
    assert len(changed) >= len(model.image_model.weights) // 2  # the image tower trained too


@pytest.mark.slow  # the default suite resumes the TF engine in test_folder_resume.py; the test above checks the
# checkpoint holds the text tower
def test_lit_resumes_from_its_checkpoint_to_the_uninterrupted_runs_weights(tmp_path, lit_init_model):
    config = _config(lit_init_model, 40, class_words=WORDS)
    config.checkpoint_every = 20
    assert_resumes_to_uninterrupted(train.train_and_evaluate, config, tmp_path, stop=30, resumed_from=20)


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(loss="softmax"), "contrastive.loss"),
        (dict(class_words="zero,one"), "2 words, but the dataset has 10 classes"),
        (dict(init_weights=""), "lock_image"),
        (dict(chunked=True), "CLIP's softmax normalises each image over every text"),
        (dict(chunked=True, loss="siglip"), "on TensorFlow the replicas all-gather"),  # the suite's backend
    ],
)
def test_bad_contrastive_settings_are_refused_before_the_workdir_is_touched(tmp_path, lit_init_model, change, message):
    config = _config(lit_init_model, 2, class_words=WORDS)
    if "init_weights" in change:
        config.init_weights = change.pop("init_weights")
    config.contrastive.update(**change)
    with pytest.raises(ValueError, match=message):
        train.train_and_evaluate(config, str(tmp_path / "run"))
    assert not (tmp_path / "run").exists() or not any((tmp_path / "run").iterdir())


def test_lit_on_jax_learns_and_saves_two_towers(tmp_path, lit_init_model):
    flags = [f"--config.model.{k}={v}" for k, v in TOWER.items()] + [
        "--config=recipes/configs/demo.py:lit",
        f"--config.init_weights={lit_init_model}",
        "--config.total_steps=150",
        "--config.log_every=150",
        "--config.contrastive.text.width=32",
        "--config.contrastive.text.num_heads=2",
        "--config.contrastive.text.num_layers=1",
        "--config.contrastive.text.mlp_dim=64",
    ]
    flags = flags[len(TOWER) :] + flags[: len(TOWER)]  # the config file first, its overrides after
    env = dict(os.environ, KERAS_BACKEND="jax", PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    done = python_run(
        ["-m", "recipes.train", "--backend=jax", f"--workdir={tmp_path / 'jax'}", *flags], cwd=ROOT, env=env
    )
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((tmp_path / "jax" / "summary.json").read_text())
    assert summary["zero_shot_accuracy"] >= 0.15, summary
    model = keras.models.load_model(summary["model"], compile=False)
    images, labels = _test_digits()
    predicted = _zero_shot_in_numpy(model, WORDS.split(","), list(demo.get_config("lit").contrastive.templates), images)
    assert abs(float(np.mean(predicted == labels)) - summary["zero_shot_accuracy"]) <= 1e-3


_MIRRORED = """
import json, sys, tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
import keras
from recipes import train
from recipes.configs import demo

init, root, loss = sys.argv[1], sys.argv[2], sys.argv[3]  # one loss per process (a second strategy's collectives
for replicas in (1, 2):  # in one process clash with the first's)
    c = demo.get_config("lit")
    c.model.update(hidden_size=32, mlp_dim=64, num_layers=2, num_heads=4, patch_size=8)
    c.update(init_weights=init, total_steps=6, log_every=6, checkpoint_every=100, batch_size=16)
    c.update(deterministic=True, jit_compile=False)  # as the two-replica run (no XLA across devices)
    c.dataset.eval_split = ""
    c.contrastive.text.update(width=32, num_heads=2, num_layers=1, mlp_dim=64)
    c.contrastive.update(class_words="zero,one,two,three,four,five,six,seven,eight,nine", loss=loss)
    c.contrastive.lock_image = False  # both towers train: the gathered images carry gradients too
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]) if replicas == 2 else None
    train.train_and_evaluate(c, f"{root}/{loss}{replicas}", strategy=strategy)
"""


def test_two_mirrored_replicas_train_to_one_devices_weights(tmp_path, lit_init_model):
    """CLIP's and SigLIP's losses over two replicas (two logical CPUs) compare each replica's images with both
    replicas' texts (all-gathered): the run ends with the weights of one device on the same global batch. Each
    replica's batch alone as its negatives would not."""
    env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    for loss in ("clip", "siglip"):
        done = python_run(["-c", _MIRRORED, lit_init_model, str(tmp_path), loss], cwd=ROOT, env=env, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        one, two = (keras.models.load_model(tmp_path / f"{loss}{r}" / "model.keras", compile=False) for r in (1, 2))
        assert json.loads((tmp_path / f"{loss}2" / "summary.json").read_text())["replicas"] == 2
        source = {v.path: np.asarray(v) for v in keras.models.load_model(lit_init_model, compile=False).weights}
        assert any(not np.array_equal(np.asarray(v), source[v.path]) for v in one.image_model.weights)
        for x, y in zip(one.weights, two.weights):
            np.testing.assert_allclose(np.asarray(y), np.asarray(x), atol=2e-5, rtol=0, err_msg=f"{loss} {x.path}")


def test_an_input_pipelines_part_of_the_batch_gets_the_captions_one_device_gives_it():
    """A pipeline that reads rows 8..15 of each global batch (several workers) captions them as one device
    captions rows 8..15: an example's template follows its position in the global batch."""
    import tensorflow as tf

    from recipes import contrastive

    table = np.arange(10 * 3 * 2, dtype="int32").reshape(30, 2)  # 10 classes x 3 templates, 2 "tokens" each
    labels = np.array([3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3], "int64")
    images = np.zeros((16, 1), "float32")

    def ids(rows, first):
        stream = tf.data.Dataset.from_tensors((images[rows], labels[rows]))
        return next(iter(contrastive.with_captions(stream, table, 3, first)))[0][1].numpy()

    whole = ids(slice(0, 16), 0)
    np.testing.assert_array_equal(ids(slice(8, 16), 8), whole[8:])
    np.testing.assert_array_equal(whole[:, 0] // 2, labels * 3 + np.arange(16) % 3)  # class c, template t: c*3+t


def test_a_caption_table_too_large_for_the_graph_is_read_on_the_host(monkeypatch):
    """Caption ids past `LARGEST_CONSTANT` bytes (a million captions) are looked up on the host instead of being
    stored in the dataset's graph: the same batches."""
    import tensorflow as tf

    from recipes import contrastive

    table = np.arange(40, dtype="int32").reshape(20, 2)
    labels = np.array([3, 19, 0, 7, 7, 12], "int64")
    stream = tf.data.Dataset.from_tensors((np.zeros((6, 1), "float32"), labels))
    in_graph = next(iter(contrastive.with_captions(stream, table, 1)))[0][1].numpy()
    monkeypatch.setattr(contrastive, "LARGEST_CONSTANT", 0)
    on_host = next(iter(contrastive.with_captions(stream, table, 1)))[0][1].numpy()
    np.testing.assert_array_equal(on_host, in_graph)
    np.testing.assert_array_equal(in_graph, table[labels])


_ONE_STEP = """
import json, sys
import numpy as np, keras
import keras_vit
from recipes import contrastive
from recipes.configs import demo

out = {}
for loss in ("clip", "siglip"):
    keras.utils.set_random_seed(0)
    c = demo.get_config("lit").contrastive
    c.update(loss=loss, logit_scale=1.5, logit_bias=-2.0)
    c.text.update(width=32, num_heads=2, num_layers=1, mlp_dim=64)
    model = keras_vit.VisionTransformer(input_shape=(32, 32, 3), patch_size=8, hidden_size=32, mlp_dim=64,
                                        num_layers=1, num_heads=4, classes=10)
    net, loss_fn = contrastive.build(model, c)
    rng = np.random.default_rng(0)
    images = rng.uniform(-1, 1, (6, 32, 32, 3)).astype("float32")
    ids = rng.integers(1, 400, (6, 16)).astype("int32")
    labels = np.arange(6, dtype="int32")
    image, text = (keras.ops.convert_to_numpy(x).tolist() for x in net((images, ids)))
    optimizer = keras.optimizers.SGD(0.1)
    optimizer.build(net.trainable_variables)
    if keras.backend.backend() == "jax":
        from recipes.trainer.jax_step import JaxEngine
        engine = JaxEngine(net, optimizer, None, num_classes=10, global_batch_size=6, loss_fn=loss_fn)
        engine(((images, ids), labels))
        engine.sync()
    else:
        from recipes.trainer import tf_step
        step = tf_step.build_train_step(net, optimizer, num_classes=10, global_batch_size=6, jit_compile=False,
                                        loss_fn=loss_fn)
        step(((images, ids), labels))
    bias = None if net.logit_bias is None else float(keras.ops.convert_to_numpy(net.logit_bias))
    out[loss] = dict(image=image, text=text, scale=float(keras.ops.convert_to_numpy(net.logit_scale)), bias=bias)
print(json.dumps(out))
"""


@pytest.mark.parametrize("backend", ["tensorflow", "jax"])
def test_one_step_trains_the_temperature_and_bias_by_their_closed_form_gradients(backend):
    """The learned temperature (and SigLIP's bias) take one SGD step along the loss' gradient, written out here in
    numpy from the step's embeddings, for CLIP's and SigLIP's losses: on JAX the loss read them outside the step's
    values once, and they never moved."""
    from conftest import run_on_backend

    results = run_on_backend(_ONE_STEP, backend)
    for loss, out in results.items():
        image, text = np.asarray(out["image"], "float64"), np.asarray(out["text"], "float64")
        n, scale, bias = len(image), 1.5, -2.0 if loss == "siglip" else 0.0
        cosine = image @ text.T
        z = np.exp(scale) * cosine + bias
        eye = np.eye(n)
        if loss == "siglip":
            y = 2 * eye - 1
            dz = -y / (1 + np.exp(y * z)) / n  # d/dz of -sum(log sigmoid(y z)) / n
        else:
            row = np.exp(z - z.max(1, keepdims=True))
            col = np.exp(z - z.max(0, keepdims=True))
            dz = (row / row.sum(1, keepdims=True) - eye + col / col.sum(0, keepdims=True) - eye) / (2 * n)
        step = np.sum(dz * np.exp(scale) * cosine)
        np.testing.assert_allclose(out["scale"], scale - 0.1 * step, rtol=0, atol=1e-5, err_msg=loss)
        if loss == "siglip":
            np.testing.assert_allclose(out["bias"], bias - 0.1 * np.sum(dz), rtol=0, atol=1e-5)
        assert abs(out["scale"] - scale) > 1e-3, loss


_CHUNKED = """
import json, sys
import numpy as np
import keras
from recipes import train
from recipes.configs import demo

init, root = sys.argv[1], sys.argv[2]
for chunked in (False, True):
    c = demo.get_config("lit")
    c.model.update(hidden_size=32, mlp_dim=64, num_layers=2, num_heads=4, patch_size=8)
    c.update(init_weights=init, total_steps=4, log_every=4, checkpoint_every=100, batch_size=16)
    c.dataset.eval_split = ""
    c.contrastive.text.update(width=32, num_heads=2, num_layers=1, mlp_dim=64)
    c.contrastive.update(class_words="zero,one,two,three,four,five,six,seven,eight,nine", loss="siglip")
    c.contrastive.update(lock_image=False, chunked=chunked)  # both towers train: the ring carries the texts' gradients
    train.train_and_evaluate(c, f"{root}/chunked{chunked}")
"""


def test_siglips_chunked_loss_on_four_jax_devices_trains_as_the_gathered_one(tmp_path, lit_init_model):
    """`config.contrastive.chunked`: each of four devices scores its images against one block of texts at a time,
    passing the blocks around the ring; the run ends with the weights, losses and accuracy of the gathered form
    (each image against every text at once), both towers trained and captions repeated within a batch."""
    env = dict(os.environ, KERAS_BACKEND="jax", PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    env["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
    done = python_run(["-c", _CHUNKED, lit_init_model, str(tmp_path)], cwd=ROOT, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    gathered, chunked = (json.loads((tmp_path / f"chunked{c}" / "summary.json").read_text()) for c in (False, True))
    assert chunked["devices"] == 4, chunked
    for key in ("loss", "accuracy", "grad_norm"):
        a, b = chunked["final_train"][key], gathered["final_train"][key]
        assert abs(a - b) <= 1e-6 * max(1.0, abs(b)), (key, a, b)  # float32 sums in another order
    one, two = (keras.models.load_model(tmp_path / f"chunked{c}" / "model.keras", compile=False) for c in (False, True))
    for x, y in zip(one.weights, two.weights):
        np.testing.assert_allclose(np.asarray(y), np.asarray(x), atol=2e-5, rtol=0, err_msg=x.path)
