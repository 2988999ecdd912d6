"""timm repository directories and hub handles. Fixtures made by timm itself (tools/make_timm_hub_fixtures.py:
`save_for_hf(..., safe_serialization=True)`, every parameter perturbed); hub handles resolved offline against a
`huggingface_hub` cache laid out in a temporary directory as the library documents it
(models--<org>--<name>/refs/<revision> holding a commit, snapshots/<commit>/<files>)."""

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import keras_vit

from conftest import ROOT, timm_reads_save_pretrained

FIXTURES = os.path.join(ROOT, "tests", "fixtures", "timm_hub")
PLAIN = os.path.join(FIXTURES, "plain")


def test_a_timm_repository_directory_gives_timms_logits_and_its_data_config():
    model = keras_vit.load_model(PLAIN, classifier_activation=None)
    logits = model.predict(np.load(os.path.join(PLAIN, "input.npy")), verbose=0)
    assert np.abs(logits - np.load(os.path.join(PLAIN, "logits.npy"))).max() <= 1e-4  # measured 2.4e-7
    assert model.gelu_approximate is False and model.image_size == (32, 32) and model.classes == 5
    config = json.load(open(os.path.join(PLAIN, "config.json")))["pretrained_cfg"]
    assert (model.data_config.crop_pct, model.data_config.interpolation) == (config["crop_pct"], "bicubic")
    again = keras_vit.VisionTransformer(**{k: v for k, v in model.get_config().items() if k != "weights"})
    keras_vit.load_weights(again, PLAIN)
    np.testing.assert_array_equal(again.predict(np.load(os.path.join(PLAIN, "input.npy")), verbose=0), logits)


def test_deit3_loads_with_layerscale_and_late_class_token_and_gives_timms_logits(tmp_path):
    folder = os.path.join(FIXTURES, "deit3")
    model = keras_vit.load_model(folder, classifier_activation=None)
    assert model.encoder.layer_scale_init is not None and model.prefix_position_embedding is False
    assert model.position_embedding.pos_embedding.shape == (1, 16, 32)  # patches only
    x = np.load(os.path.join(folder, "input.npy"))
    logits = model.predict(x, verbose=0)
    assert np.abs(logits - np.load(os.path.join(folder, "logits.npy"))).max() <= 1e-4
    with pytest.raises(ValueError, match="LayerScale"):
        keras_vit.save_npz(model, str(tmp_path / "m.npz"))  # the official layout has no place for it
    out = keras_vit.save_pretrained(model, str(tmp_path / "repo"))
    back = keras_vit.load_model(out, classifier_activation=None)
    np.testing.assert_allclose(back.predict(x, verbose=0), logits, atol=1e-5)
    features = model.feature_model("sequence").predict(x, verbose=0)
    assert features.shape == (2, 17, 32)
    taps = model.intermediates(x, blocks=[0], attention=True)
    assert taps["attention"][0].shape == (2, 2, 17, 17)


@pytest.mark.parametrize(
    "edit, message",
    [
        ({"proj_bias": False}, "proj_bias=False"),
        ({"scale_attn_norm": True}, "scale_attn_norm=True"),
        ({"global_pool": "avgmax"}, "global_pool='avgmax'"),
        ({"reg_tokens": 4}, "register tokens: checkpoint 0, model 4"),
        ({"pre_norm": True}, "LayerNorm after the embeddings: checkpoint False, model True"),
        ({"qk_norm": True}, "qk-norm: checkpoint False"),
    ],
)  # parts keras_vit builds, stated but not in the file
def test_model_args_keras_vit_does_not_build_are_refused(tmp_path, edit, message):
    folder = tmp_path / "repo"
    shutil.copytree(PLAIN, folder)
    config = json.loads((folder / "config.json").read_text())
    config["model_args"].update(edit)
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match=message):
        keras_vit.load_model(str(folder))


def test_a_repository_with_only_a_pickle_says_how_to_convert(tmp_path):
    folder = tmp_path / "repo"
    shutil.copytree(PLAIN, folder)
    (folder / "model.safetensors").rename(folder / "pytorch_model.bin")
    with pytest.raises(FileNotFoundError, match="never loads: convert it with timm"):
        keras_vit.load_model(str(folder))


def _hub_cache(root, repo: str, revision: str, commit: str, files: dict) -> None:
    folder = root / f"models--{repo.replace('/', '--')}"
    (folder / "refs").mkdir(parents=True)
    (folder / "refs" / revision).write_text(commit)
    snapshot = folder / "snapshots" / commit
    snapshot.mkdir(parents=True)
    for name, source in files.items():
        shutil.copy(source, snapshot / name)


_RUN = """
import json, sys, numpy as np, keras_vit
images = np.load(%r)
out = {}
for handle in sys.argv[1:]:
    try:
        m = keras_vit.load_model(handle, classifier_activation=None)
        out[handle] = {"logits": m.predict(images, verbose=0).tolist(),
                       "crop_pct": m.data_config.crop_pct}
    except ValueError as e:
        out[handle] = {"error": str(e)}
print(json.dumps(out))
"""


def test_hub_handles_resolve_offline_through_the_cache(tmp_path):
    pytest.importorskip("huggingface_hub")
    cache = tmp_path / "hub"
    files = {n: os.path.join(PLAIN, n) for n in ("config.json", "model.safetensors")}
    _hub_cache(cache, "timm/vit_test.plain", "main", "a" * 40, files)
    _hub_cache(cache, "someone/no_weights", "main", "b" * 40, {"config.json": files["config.json"]})
    handles = [
        "hf-hub:timm/vit_test.plain",
        "hf://timm/vit_test.plain",
        "hf-hub:timm/vit_test.plain@v2",
        "hf-hub:someone/no_weights",
        "hf-hub:timm/not_cached",
    ]
    env = dict(os.environ, HF_HUB_CACHE=str(cache), HF_HUB_OFFLINE="1", TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=ROOT)
    done = subprocess.run(
        [sys.executable, "-c", _RUN % os.path.join(PLAIN, "input.npy"), *handles],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    want = np.load(os.path.join(PLAIN, "logits.npy"))
    for handle in handles[:2]:
        assert np.abs(np.asarray(out[handle]["logits"]) - want).max() <= 1e-4, handle
        assert out[handle]["crop_pct"] == 0.9
    assert "config.json of timm/vit_test.plain@v2 is not in the hub cache" in out[handles[2]]["error"]
    assert "model.safetensors of someone/no_weights is not in the hub cache" in out[handles[3]]["error"]
    assert "HF_HUB_OFFLINE is set" in out[handles[4]]["error"]


@pytest.mark.parametrize("handle", ["hf-hub:timm", "hf://a/b/c", "hf-hub:/x"])
def test_malformed_handles_are_refused_before_any_fetch(handle):
    with pytest.raises(ValueError, match="a hub handle is hf-hub:<org>/<name>"):
        keras_vit.load_model(handle)


def _random_model(**kwargs):
    model = keras_vit.VisionTransformer(
        8, 32, 64, 2, 2, input_shape=(32, 32, 3), classes=5, classifier_activation=None, **kwargs
    )
    rng = np.random.default_rng(8)
    model.set_weights([(rng.normal(size=w.shape) * 0.2).astype("float32") for w in model.get_weights()])
    return model


@pytest.mark.parametrize(
    "kwargs",
    [dict(gelu_approximate=False), dict(gelu_approximate=True), dict(classifier="gap", gelu_approximate=False)],
)
def test_save_pretrained_writes_a_timm_repository_that_reads_back(tmp_path, kwargs):
    model = _random_model(
        **kwargs, data_config=dict(crop_pct=0.875, crop_mode="center", interpolation="bicubic", antialias=True)
    )
    out = keras_vit.save_pretrained(model, str(tmp_path / "repo"))
    config = json.load(open(os.path.join(out, "config.json")))
    assert config["model_args"]["act_layer"] == ("gelu_tanh" if model.gelu_approximate else "gelu")
    assert config["pretrained_cfg"]["crop_pct"] == 0.875 and config["pretrained_cfg"]["input_size"] == [3, 32, 32]
    back = keras_vit.load_model(out, classifier_activation=None)
    assert (back.classifier, back.gelu_approximate, back.data_config) == (
        model.classifier,
        model.gelu_approximate,
        model.data_config,
    )
    x = np.random.default_rng(0).uniform(-1, 1, (2, 32, 32, 3)).astype("float32")
    np.testing.assert_allclose(back.predict(x, verbose=0), model.predict(x, verbose=0), atol=1e-5)
    with pytest.raises(FileExistsError):
        keras_vit.save_pretrained(model, out)
    keras_vit.save_pretrained(model, out, overwrite=True)


@pytest.mark.slow
@pytest.mark.parametrize(
    "kwargs",
    [
        dict(gelu_approximate=False),
        dict(classifier="gap", gelu_approximate=True),
        dict(layer_scale_init=0.1, prefix_position_embedding=False, gelu_approximate=False),
    ],
)  # DeiT-III's parts
def test_timm_loads_save_pretrained_strictly_with_our_logits(tmp_path, kwargs):
    model = _random_model(**kwargs)
    x = np.random.default_rng(7).uniform(-1, 1, (2, 32, 32, 3)).astype("float32")
    assert timm_reads_save_pretrained(model, x, tmp_path) <= 1e-5


def test_deit3_exports_to_onnx_and_resizes(tmp_path):
    from hub_export import export
    from hub_export.formats import runtime_model

    folder = os.path.join(FIXTURES, "deit3")
    model = keras_vit.load_model(folder, classifier_activation=None)
    x = np.load(os.path.join(folder, "input.npy"))
    out = export(model, str(tmp_path / "onnx"), "classification", format="onnx")
    run = runtime_model(os.path.join(out, "model.onnx"))
    np.testing.assert_allclose(np.asarray(run(x)), model.predict(x, verbose=0), atol=1e-4)
    bigger = keras_vit.load_model(folder, input_shape=(48, 48, 3), classifier_activation=None)
    assert bigger.position_embedding.pos_embedding.shape == (1, 36, 32) and bigger.grid_size == (6, 6)
    assert bigger.predict(np.zeros((1, 48, 48, 3), "float32"), verbose=0).shape == (1, 5)
