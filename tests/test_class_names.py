"""The class names travel with the model: a data config's labels are a shipped set's name or the class names
themselves, kept through `.keras`, timm and `transformers` repositories and exports, and dropped where the head
predicts another number of classes (timm drops its `label_names` then too)."""

import json
import os

import numpy as np
import pytest

import keras_vit
from keras_vit import DataConfig

TINY = dict(patch_size=8, hidden_size=16, mlp_dim=32, num_heads=2, num_layers=1, input_shape=(32, 32, 3))
NAMES = ("cat", "dog", "fish")


def test_labels_are_a_set_name_or_class_names_and_bad_ones_are_refused_by_field():
    config = DataConfig(labels=["cat", "dog"])
    assert config.labels == ("cat", "dog")
    assert DataConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config
    assert DataConfig(labels="imagenet1k").labels == "imagenet1k"
    for bad in ([], ["cat", 3], ["cat", ""], ["two\nlines"], 7):
        with pytest.raises(ValueError, match="data_config labels must be"):
            DataConfig(labels=bad)


def test_a_head_of_another_size_keeps_no_labels():
    assert (
        keras_vit.VisionTransformer(**TINY, classes=2, data_config=dict(labels="imagenet21k")).data_config.labels
        is None
    )
    assert keras_vit.VisionTransformer(**TINY, classes=2, data_config=dict(labels=NAMES)).data_config.labels is None
    kept = keras_vit.VisionTransformer(**TINY, classes=3, data_config=dict(labels=NAMES))
    assert kept.data_config.labels == NAMES
    features = keras_vit.VisionTransformer(**TINY, include_top=False, data_config=dict(labels="imagenet1k"))
    assert features.data_config.labels == "imagenet1k"  # no head: nothing to compare with


def test_the_names_survive_keras_files_and_name_the_predictions(tmp_path):
    model = keras_vit.VisionTransformer(**TINY, classes=3, data_config=dict(labels=NAMES))
    model.save(tmp_path / "m.keras")
    back = keras_vit.load_model(str(tmp_path / "m.keras"))
    assert back.data_config.labels == NAMES
    probs = np.array([[0.1, 0.7, 0.2]])
    assert back.decode(probs, top=2)[0] == [("1", "dog", 0.7), ("2", "fish", 0.2)]
    image = np.random.default_rng(0).uniform(0, 255, (40, 30, 3)).astype("uint8")
    from PIL import Image

    Image.fromarray(image).save(tmp_path / "x.png")
    from keras_vit.analysis import predict

    (result,) = predict.classify(back, [str(tmp_path / "x.png")], top=3, labels=back.data_config.labels)
    assert sorted(t["name"] for t in result["top"]) == sorted(NAMES)


def _timm_labels(directory):
    with open(os.path.join(directory, "config.json")) as f:
        return json.load(f).get("label_names")


def test_timm_and_transformers_repositories_carry_the_names(tmp_path):
    model = keras_vit.VisionTransformer(
        **TINY, classes=3, data_config=dict(labels=NAMES, pass_order="pillow12", crop_pct=0.9)
    )
    repo = keras_vit.save_pretrained(model, str(tmp_path / "timm"))
    assert _timm_labels(repo) == list(NAMES)  # where timm's own save_for_hf writes them
    back = keras_vit.load_model(repo)
    assert back.data_config.labels == NAMES and back.data_config.pass_order == "pillow12"
    # the keras_vit object beside timm's fields is versioned and checked
    config_path = os.path.join(repo, "config.json")
    config = json.loads(open(config_path).read())
    assert config["keras_vit"] == {"schema": 1, "antialias": model.data_config.antialias, "pass_order": "pillow12"}
    for block, says in (
        ({"antialias": True, "pass_order": "pillow12"}, "schema None, not 1"),  # an earlier 0.3 build's
        (dict(config["keras_vit"], pass_ordre="pillow12"), "the field 'pass_ordre'"),
        ("pillow12", "keras_vit field is a str"),
    ):
        open(config_path, "w").write(json.dumps(dict(config, keras_vit=block)))
        with pytest.raises(ValueError, match=f"config.json.*{says}"):
            keras_vit.load_model(repo)
    open(config_path, "w").write(json.dumps(config))
    # timm's rule: another head drops the names
    assert keras_vit.load_model(repo, classes=5).data_config.labels is None
    hf = keras_vit.save_safetensors(model, str(tmp_path / "hf"), layout="transformers")
    with open(os.path.join(hf, "config.json")) as f:
        assert json.load(f)["id2label"] == {"0": "cat", "1": "dog", "2": "fish"}
    assert keras_vit.load_model(hf).data_config.labels == NAMES
    unnamed = keras_vit.save_safetensors(
        keras_vit.VisionTransformer(**TINY, classes=3), str(tmp_path / "hf2"), layout="transformers"
    )
    assert keras_vit.load_model(unnamed).data_config.labels is None  # transformers' LABEL_i placeholders


def test_timm_label_names_of_wordnet_ids_are_the_shipped_set(tmp_path):
    from keras_vit.vit.labels import label_set

    model = keras_vit.VisionTransformer(**TINY, classes=1000)
    repo = keras_vit.save_pretrained(model, str(tmp_path / "timm"))
    config = json.loads(open(os.path.join(repo, "config.json")).read())
    config["label_names"] = [c.id for c in label_set("imagenet1k")]
    open(os.path.join(repo, "config.json"), "w").write(json.dumps(config))
    assert keras_vit.load_model(repo).data_config.labels == "imagenet1k"
    config["label_names"] = {"0": "a", "2": "b"}
    open(os.path.join(repo, "config.json"), "w").write(json.dumps(config))
    with pytest.raises(ValueError, match="label_names in config.json must map 0..n-1"):
        keras_vit.load_model(repo)


def test_the_serving_export_returns_the_models_names(tmp_path):
    import tensorflow as tf

    from hub_export import export

    model = keras_vit.VisionTransformer(**TINY, classes=3, data_config=dict(labels=NAMES))
    out = export(model, str(tmp_path / "serve"), "classification", format="serving", top_k=3)
    from PIL import Image
    import io

    buffer = io.BytesIO()
    Image.fromarray(np.full((20, 24, 3), 128, "uint8")).save(buffer, format="PNG")
    result = tf.saved_model.load(out).signatures["serving_default"](images=tf.constant([buffer.getvalue()]))
    assert sorted(s.decode() for s in result["labels"][0].numpy()) == sorted(NAMES)
    meta = json.loads(open(os.path.join(out, "metadata.json")).read())
    assert meta["data_config"]["labels"] == list(NAMES)


def test_set_class_names_names_the_head_or_refuses_another_count(tmp_path):
    model = keras_vit.VisionTransformer(**TINY, classes=3)
    model.set_class_names(["cat", "dog", "fish"])
    assert model.decode(np.array([[0.1, 0.2, 0.7]]), top=1)[0][0][1] == "fish"
    model.save(tmp_path / "m.keras")
    assert keras_vit.load_model(str(tmp_path / "m.keras")).data_config.labels == NAMES
    with pytest.raises(ValueError, match="2 class names for the 3-class head"):
        model.set_class_names(["cat", "dog"])
    with pytest.raises(ValueError, match="1000 class names for the 3-class head"):
        model.set_class_names("imagenet1k")
    assert model.data_config.labels == NAMES  # a refusal changes nothing
