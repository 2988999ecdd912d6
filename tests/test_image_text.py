"""Two towers (`keras_vit.ImageTextModel`): open_clip's own tiny models (its own ViT image tower with CLIP's and
SigLIP's text towers; timm trunks of SigLIP, EVA-02, PE core and MobileCLIP2-L-14, whose text tower is bidirectional
and pooled at the highest id) (tests/fixtures/open_clip, written by
tools/make_open_clip_fixtures.py with open_clip) load with both towers' features and the similarity logits within
1e-5 of open_clip's, on TensorFlow here and on JAX and PyTorch; the causal attention CLIP's text tower needs
against float64 numpy on every path; refusals that name what they refuse and change nothing."""

import json
import os
import shutil

import keras
import numpy as np
import pytest

import keras_vit
from conftest import ROOT, run_on_backend
from keras_vit.nn.attention import MultiHeadDotProductAttention
from keras_vit.weights import open_clip, open_clip_preprocess

FIXTURES = os.path.join(ROOT, "tests", "fixtures", "open_clip")
KINDS = ("clip_tiny", "siglip_text_tiny", "siglip_tiny", "eva02_tiny", "pe_core_tiny", "mobileclip2_l14_tiny")


def _reference(name):
    return np.load(os.path.join(FIXTURES, name, "reference.npz"))


def _compare(model, ref) -> dict:
    images = ref["images_nchw"].transpose(0, 2, 3, 1)
    return {
        "text": float(np.abs(np.asarray(model.encode_text(ref["ids"], normalize=False)) - ref["text_features"]).max()),
        "image": float(np.abs(np.asarray(model.encode_image(images, normalize=False)) - ref["image_features"]).max()),
        "logits": float(np.abs(np.asarray(model((images, ref["ids"]))) - ref["logits"]).max()),
    }


@pytest.mark.parametrize("name", KINDS)
def test_open_clip_models_load_with_open_clips_features_and_logits(name):
    model = keras_vit.load_open_clip(os.path.join(FIXTURES, name))
    assert max(_compare(model, _reference(name)).values()) <= 1e-5
    tower = model.text_model.tower
    if name == "clip_tiny":  # OpenAI CLIP's form
        assert tower.causal and tower.pooling == "argmax" and not tower.projection_bias
        assert tower.activation == "quick_gelu" and model.logit_bias is None
    elif name.startswith("siglip"):  # SigLIP's
        assert not tower.causal and tower.pooling == "last" and tower.projection_bias
        assert tower.layer_norm_epsilon == 1e-6  # open_clip's SigLIP config: exact GELU (no act_kwargs)
        assert tower.activation == ("gelu_tanh" if name == "siglip_text_tiny" else "gelu")
        assert float(model.logit_bias) != 0.0


_ON_BACKEND = r"""
import json, sys, numpy as np, keras, keras_vit
np_ = keras.ops.convert_to_numpy  # a torch output requires grad: no np.asarray
out = {}
for name in sys.argv[2].split(","):
    ref = np.load(f"{sys.argv[1]}/{name}/reference.npz")
    m = keras_vit.load_open_clip(f"{sys.argv[1]}/{name}")
    images = ref["images_nchw"].transpose(0, 2, 3, 1)
    out[name] = max(
        float(np.abs(np_(m.encode_text(ref["ids"], normalize=False)) - ref["text_features"]).max()),
        float(np.abs(np_(m.encode_image(images, normalize=False)) - ref["image_features"]).max()),
        float(np.abs(np_(m((images, ref["ids"]))) - ref["logits"]).max()),
    )
if "jax" in sys.argv[3:]:  # the causal training core's gradient against JAX's autodiff of the masked formula
    import jax, jax.numpy as jnp
    from keras_vit.nn.attention_core import causal_attention_core
    rng = np.random.default_rng(1)
    q, k, v, w = (rng.standard_normal((2, 5, 2, 4)).astype("float32") for _ in range(4))
    def plain(q, k, v):
        s = jnp.einsum("bqhd,bkhd->bhqk", q, k) + jnp.where(jnp.triu(jnp.ones((5, 5), bool), 1), -jnp.inf, 0.0)
        return jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(s, axis=-1), v)
    ours = jax.grad(lambda *a: jnp.sum(w * causal_attention_core(*a)), argnums=(0, 1, 2))(q, k, v)
    theirs = jax.grad(lambda *a: jnp.sum(w * plain(*a)), argnums=(0, 1, 2))(q, k, v)
    out["causal_value"] = float(jnp.abs(causal_attention_core(q, k, v) - plain(q, k, v)).max())
    out["causal_grad"] = max(float(jnp.abs(a - b).max()) for a, b in zip(ours, theirs))
print(json.dumps(out))
"""


@pytest.mark.parametrize(
    "backend, kinds",
    [
        ("jax", "clip_tiny,siglip_tiny"),  # open_clip's own image tower and a timm trunk, both text-tower forms
        pytest.param("jax", ",".join(KINDS), marks=pytest.mark.slow),
        pytest.param("torch", ",".join(KINDS), marks=pytest.mark.slow),
    ],
)
def test_open_clip_models_on_jax_and_torch(backend, kinds):
    """Also, on JAX: the causal training core's gradient equals JAX's autodiff of the plain masked formula."""
    out = run_on_backend(_ON_BACKEND, backend, FIXTURES, kinds, backend)
    assert max(out.values()) <= 1e-5, out


def test_the_two_tower_model_saves_and_reloads(tmp_path):
    model = keras_vit.load_open_clip(os.path.join(FIXTURES, "siglip_text_tiny"))
    ref = _reference("siglip_text_tiny")
    model.save(tmp_path / "m.keras")
    again = keras.saving.load_model(tmp_path / "m.keras")
    assert type(again) is keras_vit.ImageTextModel and again.text_model.tower == model.text_model.tower
    assert max(_compare(again, ref).values()) <= 1e-5


def _causal_reference(layer, x):
    """The layer's causal self-attention in float64 numpy from its own weights."""
    w = {v.path.split("/", 1)[1]: np.asarray(v, "float64") for v in layer.weights}
    q, k, v = (np.einsum("btd,dhk->bthk", x, w[f"{n}/kernel"]) + w[f"{n}/bias"] for n in ("query", "key", "value"))
    s = np.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(q.shape[-1])
    n = x.shape[1]
    s = np.where(np.triu(np.ones((n, n), bool), 1), -np.inf, s)
    p = np.exp(s - s.max(-1, keepdims=True))
    y = np.einsum("bhqk,bkhd->bqhd", p / p.sum(-1, keepdims=True), v)
    return np.einsum("bthk,hkd->btd", y, w["out/kernel"]) + w["out/bias"]


@pytest.mark.parametrize("fused", [False, True])
@pytest.mark.parametrize("training", [False, True])
def test_causal_attention_is_causal_softmax_attention(fused, training, monkeypatch):
    monkeypatch.setattr(MultiHeadDotProductAttention, "FUSED", fused)
    rng = np.random.default_rng(0)
    layer = MultiHeadDotProductAttention(2, causal=True, name="a")
    x = rng.standard_normal((2, 6, 8)).astype("float32")
    layer.build(x.shape)
    for v in layer.weights:
        v.assign(rng.standard_normal(v.shape).astype("float32") * 0.5)
    got = np.asarray(layer(x, training=training))
    assert np.abs(got - _causal_reference(layer, x.astype("float64"))).max() <= 1e-5
    changed = x.copy()
    changed[:, 4:] += 1.0  # later tokens change; the first four rows may not
    assert np.abs(np.asarray(layer(changed, training=training))[:, :4] - got[:, :4]).max() <= 1e-6


def _copy(name, tmp_path):
    target = tmp_path / name
    shutil.copytree(os.path.join(FIXTURES, name), target)
    return target


def _edit_config(folder, edit):
    path = folder / open_clip.CONFIG
    config = json.loads(path.read_text())
    edit(config["model_cfg"])
    path.write_text(json.dumps(config))


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda c: c["text_cfg"].update(hf_model_name="xlm-roberta-base"), "Hugging Face model 'xlm-roberta-base'"),
        (lambda c: c["text_cfg"].update(embed_cls=True), r"text_cfg.embed_cls=True"),
        (lambda c: c["vision_cfg"].update(layers=[3, 4, 6, 3]), "ResNet image tower"),
        (lambda c: c["text_cfg"].update(layers=3), "hold 2 block\\(s\\), its config 3"),
        (lambda c: c["text_cfg"].update(widht=32), "text_cfg.widht is not an open_clip setting"),
        (lambda c: c["vision_cfg"].update(timm_proj="linear"), "timm_proj='linear': an extra projection"),
    ],
)
def test_forms_not_built_are_refused_by_name(tmp_path, edit, message):
    folder = _copy("clip_tiny" if "timm_proj" not in message else "siglip_tiny", tmp_path)
    _edit_config(folder, edit)
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    with pytest.raises(ValueError, match=message):
        keras_vit.load_open_clip(folder)
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before


def test_an_unmapped_tensor_or_a_pickle_is_refused(tmp_path):
    from safetensors.numpy import load_file, save_file

    folder = _copy("clip_tiny", tmp_path)
    sd = load_file(str(folder / open_clip.WEIGHTS))
    sd["text_extra.weight"] = np.zeros(3, "float32")
    save_file(sd, str(folder / open_clip.WEIGHTS))
    with pytest.raises(ValueError, match="does not map, e.g. 'text_extra.weight'"):
        keras_vit.load_open_clip(folder)
    (folder / open_clip.WEIGHTS).unlink()
    (folder / open_clip.PICKLE).write_bytes(b"not read")
    with pytest.raises(FileNotFoundError, match="a pickle keras_vit never loads"):
        keras_vit.load_open_clip(folder)


def test_a_text_tower_refuses_a_misspelt_field():
    with pytest.raises(TypeError, match="unexpected keyword argument 'num_layer' \\(did you mean 'num_layers'\\?\\)"):
        keras_vit.TextTransformer(num_layer=2)
    with pytest.raises(ValueError, match="pooling 'eos' needs eos_id"):
        keras_vit.TextTower(pooling="eos")


@pytest.mark.parametrize("name", ["clip_tiny", "siglip_tiny"])
def test_zero_shot_weights_equal_open_clips_and_classify(name):
    """open_clip's `build_zero_shot_classifier` on the same prompts (their ids saved by the fixture script)."""
    ref = _reference(name)
    stored = {str(t): ids for t, ids in zip(ref["prompt_texts"], ref["prompt_ids"])}
    tokenizer = lambda texts: np.array([stored[t] for t in texts], "int32")  # noqa: E731
    model = keras_vit.load_open_clip(os.path.join(FIXTURES, name))
    classes = [str(c) for c in ref["zero_shot_classes"]]
    weights = keras_vit.zero_shot_weights(model, tokenizer, classes, "simple_imagenet", classes_per_batch=2)
    assert np.abs(weights - ref["zero_shot_weights"]).max() <= 1e-5
    classifier = keras_vit.ZeroShotClassifier(model, tokenizer, classes, "simple_imagenet")
    images = ref["images_nchw"].transpose(0, 2, 3, 1)
    image = ref["image_features"] / np.linalg.norm(ref["image_features"], axis=1, keepdims=True)
    scale = float(np.exp(np.asarray(model.logit_scale)))
    bias = float(model.logit_bias) if model.logit_bias is not None else 0.0
    want = scale * image @ ref["zero_shot_weights"] + bias  # open_clip's features and classifier
    assert np.abs(classifier(images) - want).max() <= 1e-4
    top = classifier.predict(images, top=2)
    assert [t[0][0] for t in top] == [classes[j] for j in want.argmax(axis=1)]
    assert all(abs(sum(p for _, p in t) - 1.0) < 1.0 for t in top) and len(top[0]) == 2


def test_prompt_templates_are_checked():
    assert len(keras_vit.prompt_templates("openai_imagenet")) == 80
    assert keras_vit.prompt_templates("simple_imagenet")[0] == "itap of a {}."
    assert keras_vit.prompt_templates(["a {} here"]) == ["a {} here"]
    with pytest.raises(ValueError, match="unknown template set 'imagenet'"):
        keras_vit.prompt_templates("imagenet")
    with pytest.raises(ValueError, match="must hold '\\{\\}' once"):
        keras_vit.prompt_templates(["no slot", "a {} {}"])


def test_the_tokenizer_open_clip_would_pick_comes_with_the_model(tmp_path):
    clip = keras_vit.load_open_clip(os.path.join(FIXTURES, "clip_tiny"))
    tok = clip.text_preprocessor()
    assert isinstance(tok, keras_vit.ClipTokenizer) and tok.context_length == 12 and tok.clean == "lower"
    clip.save(tmp_path / "clip.keras")  # CLIP's tokenizer is part of the saved model's config
    assert keras.saving.load_model(tmp_path / "clip.keras").text_preprocessor().context_length == 12
    folder = _copy("siglip_tiny", tmp_path)
    _edit_config(
        folder, lambda c: c["text_cfg"].update(hf_tokenizer_name="timm/x", tokenizer_kwargs={"clean": "canonicalize"})
    )
    siglip = keras_vit.load_open_clip(folder)
    with pytest.raises(ValueError, match="names the Hugging Face tokenizer 'timm/x', and .* holds no tokenizer.json"):
        siglip.text_preprocessor()
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(FIXTURES, "hub_tokenizer", name), folder / name)
    tok = keras_vit.load_open_clip(folder).text_preprocessor()
    assert isinstance(tok, keras_vit.HubTokenizer) and tok.clean == "canonicalize" and tok.context_length == 10
    assert tok(["A Photo, of a cat!"]).shape == (1, 10)


def test_the_image_towers_preprocessing_is_open_clips_preprocess_cfg(tmp_path):
    model = keras_vit.load_open_clip(os.path.join(FIXTURES, "clip_tiny"))
    dc = model.image_model.data_config
    assert (dc.mean, dc.std, dc.crop_mode, dc.interpolation, dc.antialias) == (
        (0.5,) * 3,
        (0.5,) * 3,
        "center",
        "bicubic",
        True,
    )
    folder = _copy("clip_tiny", tmp_path)
    path = folder / open_clip.CONFIG
    config = json.loads(path.read_text())
    config["preprocess_cfg"] = {"resize_mode": "longest"}
    path.write_text(json.dumps(config))
    with pytest.raises(ValueError, match="resize_mode='longest'"):
        keras_vit.load_open_clip(folder)
    config["preprocess_cfg"] = {}
    path.write_text(json.dumps(config))
    dc = keras_vit.load_open_clip(folder).image_model.data_config  # open_clip's defaults: OpenAI's mean and std
    assert dc.mean == open_clip_preprocess.OPENAI_MEAN and dc.std == open_clip_preprocess.OPENAI_STD


def test_the_zero_shot_command_classifies_a_folder(tmp_path, capsys):
    """`python -m keras_vit.zero_shot` on a folder of photos: the tiny CLIP given CLIP's whole vocabulary (its
    token table grown to 49408 rows in the test), so that its shipped tokenizer serves it."""
    from PIL import Image
    from safetensors.numpy import load_file, save_file

    from keras_vit.analysis import zero_shot

    folder = _copy("clip_tiny", tmp_path)
    sd = load_file(str(folder / open_clip.WEIGHTS))
    sd["token_embedding.weight"] = np.random.default_rng(0).standard_normal((49408, 32)).astype("float32")
    save_file(sd, str(folder / open_clip.WEIGHTS))
    _edit_config(folder, lambda c: c["text_cfg"].update(vocab_size=49408))
    photos = tmp_path / "photos"
    photos.mkdir()
    rng = np.random.default_rng(0)
    for i, size in enumerate([(40, 30), (32, 50)]):
        Image.fromarray(rng.integers(0, 256, (*size, 3), dtype=np.uint8)).save(photos / f"{i}.png")
    argv = [str(photos), f"--weights={folder}", "--classes=cat,dog,car", "--templates=simple_imagenet", "--json"]
    assert zero_shot.main(argv) == 0
    results = json.loads(capsys.readouterr().out)
    assert [os.path.basename(r["image"]) for r in results] == ["0.png", "1.png"]
    model = keras_vit.load_open_clip(folder)
    classifier = keras_vit.ZeroShotClassifier(
        model, model.text_preprocessor(), ["cat", "dog", "car"], "simple_imagenet"
    )
    pre = model.image_model.preprocessor()
    for result in results:
        image = np.asarray(Image.open(result["image"]).convert("RGB"))
        want = classifier.predict(np.asarray(pre(image)), top=3)[0]
        assert [(r["name"], round(r["score"], 5)) for r in result["top"]] == [(n, round(p, 5)) for n, p in want]
    assert zero_shot.main([str(photos), f"--weights={folder}", "--classes=cat"]) == 2
    assert "at least two class names" in capsys.readouterr().err


@pytest.mark.parametrize(
    "ids, message",
    [
        (np.full((1, 5), 64), "token id 64 is outside the text tower's vocabulary \\(0..63\\)"),
        (np.full((1, 5), -1), "token id -1 is outside"),
        (np.ones((1, 13), "int32"), "13 tokens per text, but the text tower's context length is 12"),
        (np.ones(5, "int32"), "must be \\(texts, tokens\\), got shape \\(5,\\)"),
        (np.full((1, 5), 1.5), "must be whole numbers"),
    ],
)
def test_the_text_input_contract(ids, message):
    model = keras_vit.load_open_clip(os.path.join(FIXTURES, "clip_tiny"))
    with pytest.raises(ValueError, match=message):
        model.encode_text(ids)


_HUB_RUN = r"""
import json, sys, numpy as np, keras_vit
out = {}
for handle in sys.argv[2:]:
    try:
        m = keras_vit.load_open_clip(handle)
        ref = np.load(sys.argv[1])
        out[handle] = float(np.abs(np.asarray(m.encode_text(ref["ids"], normalize=False)) - ref["text_features"]).max())
    except (ValueError, FileNotFoundError) as e:
        out[handle] = str(e)
print(json.dumps(out))
"""


def test_hub_handles_and_open_clips_names_resolve_offline_through_the_cache(tmp_path):
    """open_clip repositories in a `huggingface_hub` cache laid out here, read with HF_HUB_OFFLINE=1, by hub handle
    and by open_clip's pretrained name (the repository open_clip publishes that tag in); one holding only the pickle
    is refused naming it. The tiny CLIP (QuickGELU) stands in under real repository names: under one whose config
    leaves QuickGELU out, the name applies open_clip's record of those weights (open_clip's logits) and the handle
    takes the config as written (exact GELU: other logits)."""
    pytest.importorskip("huggingface_hub")
    from conftest import python_run

    from test_timm_hub import _hub_cache

    cache = tmp_path / "hub"
    without_quick_gelu = json.load(open(os.path.join(FIXTURES, "clip_tiny", open_clip.CONFIG)))
    del without_quick_gelu["model_cfg"]["quick_gelu"]
    for repo, names in (
        ("laion/tiny-clip", (open_clip.CONFIG, open_clip.WEIGHTS)),
        ("laion/pickled", (open_clip.CONFIG,)),
        ("laion/CLIP-ViT-B-32-laion2B-s34B-b79K", (open_clip.CONFIG, open_clip.WEIGHTS)),
        ("timm/vit_base_patch32_clip_224.laion400m_e31", (open_clip.WEIGHTS,)),
    ):
        _hub_cache(cache, repo, "main", "c" * 40, {n: os.path.join(FIXTURES, "clip_tiny", n) for n in names})
    (cache / "models--laion--pickled" / "snapshots" / ("c" * 40) / open_clip.PICKLE).write_bytes(b"pickle")
    quick = cache / "models--timm--vit_base_patch32_clip_224.laion400m_e31" / "snapshots" / ("c" * 40)
    (quick / open_clip.CONFIG).write_text(json.dumps(without_quick_gelu))
    env = dict(os.environ, HF_HUB_CACHE=str(cache), HF_HUB_OFFLINE="1", PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="3")
    ref = os.path.join(FIXTURES, "clip_tiny", "reference.npz")
    sources = [
        "hf-hub:laion/tiny-clip",
        "hf-hub:laion/pickled",
        "ViT-B-32:laion2b_s34b_b79k",
        "ViT-B-32:laion400m_e31",
        "hf-hub:timm/vit_base_patch32_clip_224.laion400m_e31",
        "ViT-B-32",
        "RN50:openai",
        "ViT-B-32:nope",
    ]
    done = python_run(["-c", _HUB_RUN, ref, *sources], env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["hf-hub:laion/tiny-clip"] <= 1e-5 and out["ViT-B-32:laion2b_s34b_b79k"] <= 1e-5, out
    assert "holds open_clip_pytorch_model.bin and no open_clip_model.safetensors" in out["hf-hub:laion/pickled"]
    assert out["ViT-B-32:laion400m_e31"] <= 1e-5, out  # QuickGELU from open_clip's record
    assert out["hf-hub:timm/vit_base_patch32_clip_224.laion400m_e31"] > 1e-3, out  # the config as written
    assert "name one: ViT-B-32:openai, ViT-B-32:laion400m_e31" in out["ViT-B-32"]
    assert "ResNet image tower" in out["RN50:openai"]
    assert "no pretrained tag 'nope'" in out["ViT-B-32:nope"]


def test_open_clips_names_are_listed_apart_from_the_image_models_and_a_typo_is_answered():
    names = keras_vit.list_models("image-text")
    assert {"ViT-B-32:openai", "ViT-B-16-SigLIP2:webli", "PE-Core-B-16:meta", "EVA02-B-16:merged2b_s8b_b131k"} <= set(
        names
    )
    assert not {n for n in names if n.split(":")[0].startswith(("RN", "convnext", "coca", "ViTamin", "MobileCLIP-S"))}
    assert not set(names) & set(keras_vit.list_models()) and "ViT-B/16" in keras_vit.list_models()
    with open(os.path.join(ROOT, "docs", "image-text.md")) as f:
        assert f"lists the {len(names)} of open_clip" in f.read()  # the docs' count is the table's
    with pytest.raises(FileNotFoundError, match=r"close names: ViT-B-16-SigLIP2:webli"):
        keras_vit.load_open_clip("ViT-B-16-SigLP2:webli")


def test_load_model_sends_two_tower_folders_to_load_image_text():
    with pytest.raises(ValueError, match="image-text model in open_clip's layout .* keras_vit.load_image_text"):
        keras_vit.load_model(os.path.join(FIXTURES, "clip_tiny"))
    clip = os.path.join(ROOT, "tests", "fixtures", "transformers_clip", "clip_eos")
    with pytest.raises(ValueError, match="'clip' model, not a transformers 'vit': both towers .*load_image_text"):
        keras_vit.load_model(clip)


@pytest.mark.parametrize("name", KINDS)
def test_save_open_clip_writes_back_open_clips_own_file(name, tmp_path):
    """Load, write back: the same tensor names and values as the file open_clip wrote, and the same outputs."""
    from safetensors.numpy import load_file

    model = keras_vit.load_open_clip(os.path.join(FIXTURES, name))
    out = keras_vit.save_open_clip(model, tmp_path / "out")
    ours = load_file(os.path.join(out, open_clip.WEIGHTS))
    theirs = load_file(os.path.join(FIXTURES, name, open_clip.WEIGHTS))
    assert sorted(ours) == sorted(theirs)
    assert {k: v.shape for k, v in ours.items()} == {k: v.shape for k, v in theirs.items()}  # logit_scale is 0-d
    assert max(float(np.abs(ours[k] - theirs[k]).max()) for k in theirs) == 0.0
    assert json.loads((tmp_path / "out" / open_clip.CONFIG).read_text()) == json.loads(
        open(os.path.join(FIXTURES, name, open_clip.CONFIG)).read()
    )
    with pytest.raises(FileExistsError):
        keras_vit.save_open_clip(model, tmp_path / "out")


_OPEN_CLIP_READS_OURS = r"""
import json, sys, numpy as np, torch, open_clip
from open_clip.model import CLIP, CustomTextCLIP
from safetensors.torch import load_file
folder, ref = sys.argv[1], np.load(sys.argv[2])
cfg = json.load(open(f"{folder}/open_clip_config.json"))["model_cfg"]
kwargs = {k: v for k, v in cfg.items() if k != "custom_text"}
vision = dict(kwargs["vision_cfg"]); shrink = vision.pop("timm_model_args", None); kwargs["vision_cfg"] = vision
import open_clip.timm_model as tm
create = tm.timm.create_model
if shrink:
    tm.timm.create_model = lambda *a, **k: create(*a, **{**k, **shrink})
model = (CustomTextCLIP if cfg.get("custom_text") else CLIP)(**kwargs).eval()
model.load_state_dict(load_file(f"{folder}/open_clip_model.safetensors"), strict=True)
with torch.no_grad():
    text = model.encode_text(torch.from_numpy(ref["ids"])).numpy()
print(json.dumps({"text": float(np.abs(text - ref["text_features"]).max())}))
"""


@pytest.mark.slow
@pytest.mark.parametrize("name", KINDS)
def test_open_clip_loads_what_save_open_clip_writes_strictly(name, tmp_path):
    from conftest import run_with_torch

    model = keras_vit.load_open_clip(os.path.join(FIXTURES, name))
    out = keras_vit.save_open_clip(model, tmp_path / "out")
    done = run_with_torch(["-c", _OPEN_CLIP_READS_OURS, out, os.path.join(FIXTURES, name, "reference.npz")])
    assert json.loads(done.stdout.strip().splitlines()[-1])["text"] <= 1e-5


def test_a_causal_tower_reads_only_up_to_the_batchs_last_pooled_token():
    """Host ids are cut after the last token a causal tower's pooling picks: the outputs equal the whole
    sequence's (a tensor input is not cut); a bidirectional tower reads every token."""
    import keras

    from keras_vit.vit.text_model import tokens_read

    clip, siglip = (keras_vit.load_open_clip(os.path.join(FIXTURES, n)) for n in ("clip_tiny", "siglip_text_tiny"))
    ids = _reference("clip_tiny")["ids"][[0, 2]]  # their highest ids (the end-of-text token here) at 4 and 1
    assert tokens_read(ids, clip.text_model.tower) == 5
    whole = keras.ops.convert_to_numpy(clip.text_model(keras.ops.convert_to_tensor(ids)))
    np.testing.assert_allclose(np.asarray(clip.text_model(ids)), whole, atol=1e-6, rtol=0)
    np.testing.assert_allclose(clip.text_model.predict(ids, verbose=0), whole, atol=1e-6, rtol=0)
    siglip_ids = _reference("siglip_text_tiny")["ids"]
    assert tokens_read(siglip_ids, siglip.text_model.tower) == siglip_ids.shape[1]


def _towers_of_our_own(image_name="vit_tiny_patch16_224", **image):
    """Two towers put together in keras_vit (as LiT makes them): timm's architecture as the image tower, its
    pooled features the embedding; a small causal text tower projecting into that width; CLIP's BPE."""
    from keras_vit.vit.text_model import TextTransformer
    from keras_vit.vit.text_tower import TextTower

    keras.utils.set_random_seed(1)
    tower = keras_vit.create_model(image_name, include_top=False, pooling=None, name="image_model", **image)
    text = TextTower(
        context_length=16, width=32, num_heads=2, num_layers=1, mlp_dim=64, output_dim=tower.output_shape[-1]
    )
    return keras_vit.ImageTextModel(
        tower, TextTransformer(text, name="text_model"), logit_scale=2.3, tokenizer={"kind": "clip", "clean": "lower"}
    )


SQUASH = dict(size=224, mean=[0.5] * 3, std=[0.5] * 3, interpolation="bicubic", resize_mode="squash")


def test_save_open_clip_writes_a_config_for_towers_keras_vit_put_together(tmp_path):
    """A model keras_vit built (no open_clip config of its own) is written with a config naming timm's
    architecture as the trunk and its text tower in text_cfg's terms; `load_open_clip` reads back its embeddings.
    What open_clip cannot build is refused by name, and nothing is written: a tower that is no registered timm
    architecture at its own size, a crop fraction open_clip's preprocessing cannot state (unless the caller states
    the preprocessing), a tokenizer it cannot name."""
    model = _towers_of_our_own()
    with pytest.raises(ValueError, match=r"crop_pct=0.9 .* pass preprocess_cfg"):
        keras_vit.save_open_clip(model, tmp_path / "cropped")
    out = keras_vit.save_open_clip(model, tmp_path / "out", preprocess_cfg=SQUASH)
    config = json.loads((tmp_path / "out" / open_clip.CONFIG).read_text())
    assert config["model_cfg"]["vision_cfg"] == dict(
        image_size=224,
        timm_model_name="vit_tiny_patch16_224",
        timm_model_pretrained=False,
        timm_pool="token",
        timm_proj="none",
    )
    assert config["model_cfg"]["text_cfg"] == dict(
        context_length=16, vocab_size=49408, width=32, heads=2, layers=1, mlp_ratio=2.0
    )
    back = keras_vit.load_open_clip(out)
    images = np.random.default_rng(0).uniform(-1, 1, (2, 224, 224, 3)).astype("float32")
    ids = model.text_preprocessor()(["a photo of a cat", "two dogs"])
    np_ = keras.ops.convert_to_numpy
    np.testing.assert_allclose(np_(back((images, ids))), np_(model((images, ids))), atol=1e-5, rtol=0)
    assert back.image_model.data_config.crop_mode == "squash"

    small = _towers_of_our_own(input_shape=(96, 96, 3))
    with pytest.raises(ValueError, match=r"model_args \{'img_size': \[96, 96\]\}: open_clip builds a timm trunk"):
        keras_vit.save_open_clip(small, tmp_path / "small", preprocess_cfg=SQUASH)
    hub = keras_vit.ImageTextModel(model.image_model, model.text_model, tokenizer=object())
    with pytest.raises(ValueError, match="this model's tokenizer \\(object\\)"):
        keras_vit.save_open_clip(hub, tmp_path / "hub", preprocess_cfg=SQUASH)
    assert sorted(os.listdir(tmp_path)) == ["out"]


_OPEN_CLIP_BUILDS_OURS = r"""
import json, sys, numpy as np, torch, open_clip
folder, inputs = sys.argv[1], np.load(sys.argv[2])
model = open_clip.create_model("local-dir:" + folder, pretrained=folder + "/open_clip_model.safetensors").eval()
tokenizer = open_clip.get_tokenizer("local-dir:" + folder)
ids = tokenizer(["a photo of a cat", "two dogs"]).numpy()
with torch.no_grad():
    image = model.encode_image(torch.from_numpy(inputs["images"]).permute(0, 3, 1, 2)).numpy()
    text = model.encode_text(torch.from_numpy(ids)).numpy()
print(json.dumps({"image": image.tolist(), "text": text.tolist(), "ids": ids.tolist()}))
"""


@pytest.mark.slow
def test_open_clip_builds_and_loads_what_keras_vit_wrote_for_its_own_towers(tmp_path):
    """open_clip's own `create_model("local-dir:...")` builds the config written for towers keras_vit put
    together, loads the weights strictly, and gives their image and text embeddings; its tokenizer gives our ids."""
    from conftest import run_with_torch

    model = _towers_of_our_own()
    out = keras_vit.save_open_clip(model, tmp_path / "out", preprocess_cfg=SQUASH)
    images = np.random.default_rng(0).uniform(-1, 1, (2, 224, 224, 3)).astype("float32")
    np.savez(tmp_path / "inputs.npz", images=images)
    theirs = json.loads(
        run_with_torch(["-c", _OPEN_CLIP_BUILDS_OURS, out, str(tmp_path / "inputs.npz")]).stdout.splitlines()[-1]
    )
    ids = model.text_preprocessor()(["a photo of a cat", "two dogs"])
    np.testing.assert_array_equal(np.asarray(theirs["ids"]), ids)
    np_ = keras.ops.convert_to_numpy
    np.testing.assert_allclose(
        np.asarray(theirs["image"]), np_(model.encode_image(images, normalize=False)), atol=1e-4, rtol=0
    )
    np.testing.assert_allclose(
        np.asarray(theirs["text"]), np_(model.encode_text(ids, normalize=False)), atol=1e-5, rtol=0
    )
