"""`transformers`' two-tower repositories read into two towers (`keras_vit.load_image_text`): tiny `CLIPModel`s and
`SiglipModel`s written by transformers (tests/fixtures/transformers_clip, tools/make_transformers_clip_fixtures.py)
load with transformers' embeddings and logits, on each backend; their tokenizers (a `tokenizer.json`, or the first
SigLIP's SentencePiece `spiece.model`) give transformers' ids; a `Siglip2Model` with a NaFlex image tower takes
transformers' batches of photos at their own aspect ratios, and `naflex_batch` makes its processor's batches; both of
transformers' CLIP text poolings are followed; a repository in a hub cache loads by handle offline; what the reader cannot place is
refused by name."""

import json
import os
import shutil

import keras
import numpy as np
import pytest

import keras_vit
from conftest import ROOT, python_run, run_on_backend
from keras_vit.weights import transformers_clip

FIXTURES = os.path.join(ROOT, "tests", "fixtures", "transformers_clip")
KINDS = ("clip_eos", "clip_legacy_eos", "siglip", "siglip_spiece")


def _errors(model, folder) -> dict:
    ref = np.load(os.path.join(folder, "reference.npz"))
    images, ids = ref["images"], ref["token_ids"]
    return {
        "image": float(np.abs(np.asarray(model.encode_image(images)) - ref["image_embeds"]).max()),
        "text": float(np.abs(np.asarray(model.encode_text(ids)) - ref["text_embeds"]).max()),
        "logits": float(np.abs(np.asarray(model((images, ids))) - ref["logits_per_image"]).max()),
    }


@pytest.mark.parametrize("name", KINDS)
def test_clipmodel_repositories_load_with_transformers_embeddings_and_logits(name):
    folder = os.path.join(FIXTURES, name)
    model = keras_vit.load_image_text(folder)
    assert max(_errors(model, folder).values()) <= 1e-5
    tower = model.text_model.tower
    if name.startswith(
        "siglip"
    ):  # bidirectional, the last token, a projection with a bias, the tanh GELU in both towers
        assert not tower.causal and tower.pooling == "last" and tower.projection_bias
        assert (
            tower.activation == "gelu_tanh"
            and model.image_model.get_config()["variant"]["mlp"]["activation"] == "gelu_tanh"
        )
        assert model.logit_bias is not None and model.image_model.data_config.crop_mode == "squash"
        return
    assert tower.causal and tower.activation == "quick_gelu" and model.logit_bias is None
    # transformers pools at the first end-of-text token, or at the highest id for a config saying eos_token_id 2
    assert (tower.pooling, tower.eos_id) == (("eos", 1) if name == "clip_eos" else ("argmax", None))
    assert model.image_model.data_config.crop_mode == "center"  # its CLIPImageProcessor: shortest edge, centre crop


def test_the_two_poolings_give_different_texts_in_transformers_too():
    """The fixtures' end-of-text id is not the highest id, so the two poolings disagree (the test above tells
    them apart)."""
    a, b = (np.load(os.path.join(FIXTURES, name, "reference.npz"))["text_embeds"] for name in KINDS[:2])
    assert np.abs(a - b).max() > 1e-2


@pytest.mark.parametrize("name", ["clip_eos", "siglip", "siglip_spiece"])
def test_the_repositorys_tokenizer_gives_transformers_ids(name):
    folder = os.path.join(FIXTURES, name)
    battery = json.load(open(os.path.join(folder, "tokenizer_battery.json")))
    ids = keras_vit.load_image_text(folder).text_preprocessor()(battery["texts"])
    assert ids.tolist() == battery["ids"]  # accents, emoji, HTML entities as written, CJK, empty, cut to the context


@pytest.mark.parametrize(
    "key, settings",
    [("ids_64", {}), ("ids_64_not_legacy", {"legacy": False}), ("ids_64_cased", {"do_lower_case": False})],
)
def test_a_sentencepiece_vocabulary_gives_siglip_tokenizers_ids(tmp_path, key, settings):
    """transformers' SiglipTokenizer's ids at SigLIP's context of 64 (nothing cut: a text ending with its end
    token keeps one, a text starting with it, the word marker "▁" written in a text, punctuation, upper case),
    under the settings its tokenizer_config.json may change; refusals of what it cannot apply."""
    folder = _copy(tmp_path, "siglip_spiece")
    battery = json.loads((folder / "tokenizer_battery.json").read_text())
    config = json.loads((folder / "tokenizer_config.json").read_text())
    (folder / "tokenizer_config.json").write_text(json.dumps({**config, **settings}))
    tokenizer = keras_vit.SentencePieceTokenizer(folder, 64)
    assert tokenizer(battery["texts"]).tolist() == battery[key]
    assert tokenizer("a photo of a cat", 4).tolist() == [battery["ids"][0][:3] + [tokenizer.eos_id]]
    with pytest.raises(TypeError, match="must be a str"):
        tokenizer(["a cat", None])
    for edit, message in (
        ({"pad_token": "<nowhere>"}, "not in spiece.model's vocabulary"),
        ({"padding_side": "left"}, "right-padded"),
        ({"sp_model_kwargs": {"enable_sampling": True}}, "does not apply"),
    ):
        (folder / "tokenizer_config.json").write_text(json.dumps({**config, **edit}))
        with pytest.raises(ValueError, match=message):
            keras_vit.SentencePieceTokenizer(folder, 64)
    (folder / "spiece.model").write_bytes(b"not a SentencePiece model")
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="is not a SentencePiece model"):
        keras_vit.SentencePieceTokenizer(folder, 64)


def test_a_siglip_without_a_tokenizer_file_loads_and_says_why_it_has_no_tokenizer(tmp_path):
    folder = _copy(tmp_path, "siglip")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (folder / name).unlink()
    model = keras_vit.load_image_text(folder)
    assert max(_errors(model, folder).values()) <= 1e-5
    with pytest.raises(ValueError, match="holds neither tokenizer.json nor spiece.model"):
        model.text_preprocessor()


_ON_BACKEND = r"""
import json, sys, numpy as np, keras, keras_vit
np_ = keras.ops.convert_to_numpy
out = {}
for name in ("clip_eos", "clip_legacy_eos", "siglip", "siglip_spiece"):
    folder = f"{sys.argv[1]}/{name}"
    ref = np.load(f"{folder}/reference.npz")
    m = keras_vit.load_image_text(folder)
    out[name] = max(
        float(np.abs(np_(m.encode_image(ref["images"])) - ref["image_embeds"]).max()),
        float(np.abs(np_(m.encode_text(ref["token_ids"])) - ref["text_embeds"]).max()),
        float(np.abs(np_(m((ref["images"], ref["token_ids"]))) - ref["logits_per_image"]).max()),
    )
folder = f"{sys.argv[1]}/siglip2_naflex"
ref = np.load(f"{folder}/reference.npz")
m = keras_vit.load_image_text(folder)
batch = {k: ref[k] for k in ("pixel_values", "pixel_attention_mask", "spatial_shapes")}
out["siglip2_naflex"] = max(
    float(np.abs(np_(m.encode_image(batch)) - ref["image_embeds"]).max()),
    float(np.abs(np_(m.encode_text(ref["token_ids"])) - ref["text_embeds"]).max()),
    float(np.abs(np_(m((batch, ref["token_ids"]))) - ref["logits_per_image"]).max()),
)
print(json.dumps(out))
"""


@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_clipmodel_repositories_load_on_jax_and_torch(backend):
    out = run_on_backend(_ON_BACKEND, backend, FIXTURES)
    assert max(out.values()) <= 1e-4, out  # logits (SigLIP 2's among them) to 1e-4, embeddings to 1e-5 above


def _copy(tmp_path, name="clip_eos"):
    folder = tmp_path / name
    shutil.copytree(os.path.join(FIXTURES, name), folder)
    return folder


def _edit_config(folder, edit):
    config = json.loads((folder / "config.json").read_text())
    edit(config)
    (folder / "config.json").write_text(json.dumps(config))


def test_what_the_reader_cannot_place_is_refused_by_name(tmp_path):
    from safetensors.numpy import load_file, save_file

    extra = _copy(tmp_path)
    tensors = load_file(str(extra / "model.safetensors"))
    save_file({**tensors, "text_model.extra.weight": np.zeros(3, "float32")}, str(extra / "model.safetensors"))
    with pytest.raises(ValueError, match="'text_model.extra.weight' has no place"):
        keras_vit.load_image_text(extra)
    vision_only = _copy(tmp_path / "v")
    _edit_config(vision_only, lambda c: c.update(architectures=["CLIPVisionModelWithProjection"]))
    with pytest.raises(ValueError, match="CLIPModel's two towers"):
        keras_vit.load_image_text(vision_only)
    mixed = _copy(tmp_path / "m")
    _edit_config(mixed, lambda c: c["text_config"].update(hidden_act="gelu"))
    with pytest.raises(ValueError, match="one tower with quick GELU and one without"):
        keras_vit.load_image_text(mixed)
    pickled = _copy(tmp_path / "p")
    (pickled / "model.safetensors").rename(pickled / transformers_clip.PICKLE)
    with pytest.raises(FileNotFoundError, match="pytorch_model.bin, a pickle"):
        keras_vit.load_image_text(pickled)
    cropped = _copy(tmp_path / "c")
    processor = json.loads((cropped / "preprocessor_config.json").read_text())
    processor["crop_size"] = {"height": 28, "width": 28}
    (cropped / "preprocessor_config.json").write_text(json.dumps(processor))
    with pytest.raises(ValueError, match="resize to 32 then crop 28"):
        keras_vit.load_image_text(cropped)
    with pytest.raises(ValueError, match="neither open_clip's open_clip_config.json nor a transformers"):
        keras_vit.load_image_text(tmp_path)


_HUB_RUN = r"""
import json, sys, numpy as np, keras_vit
out = {}
for handle in sys.argv[2:]:
    try:
        m = keras_vit.load_image_text(handle)
        ref = np.load(sys.argv[1])
        out[handle] = float(np.abs(np.asarray(m((ref["images"], ref["token_ids"]))) - ref["logits_per_image"]).max())
    except (ValueError, FileNotFoundError) as e:
        out[handle] = str(e)
print(json.dumps(out))
"""


def test_a_transformers_repository_loads_by_handle_from_the_hub_cache_offline(tmp_path):
    pytest.importorskip("huggingface_hub")
    from test_timm_hub import _hub_cache

    cache = tmp_path / "hub"
    files = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "preprocessor_config.json")
    for repo, names in (("openai/clip-tiny", files), ("openai/clip-no-weights", files[:1])):
        _hub_cache(cache, repo, "main", "c" * 40, {n: os.path.join(FIXTURES, "clip_eos", n) for n in names})
    env = dict(os.environ, HF_HUB_CACHE=str(cache), HF_HUB_OFFLINE="1", PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="3")
    ref = os.path.join(FIXTURES, "clip_eos", "reference.npz")
    done = python_run(["-c", _HUB_RUN, ref, "hf-hub:openai/clip-tiny", "hf-hub:openai/clip-no-weights"], env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["hf-hub:openai/clip-tiny"] <= 1e-5, out
    assert "model.safetensors" in out["hf-hub:openai/clip-no-weights"], out


def _naflex():
    folder = os.path.join(FIXTURES, "siglip2_naflex")
    ref = np.load(os.path.join(folder, "reference.npz"))
    return (
        keras_vit.load_image_text(folder),
        ref,
        {k: ref[k] for k in ("pixel_values", "pixel_attention_mask", "spatial_shapes")},
    )


def test_a_siglip2_naflex_repository_loads_with_transformers_embeddings_and_logits():
    """Siglip2Model with a NaFlex image tower: transformers' own batch of three photos of other sizes and aspect
    ratios (padded to 16 patches) gives its image and text embeddings and logits; the tokenizer its ids."""
    model, ref, batch = _naflex()
    np_ = keras.ops.convert_to_numpy
    np.testing.assert_allclose(np_(model.encode_image(batch)), ref["image_embeds"], atol=1e-5, rtol=0)
    np.testing.assert_allclose(np_(model.encode_text(ref["token_ids"])), ref["text_embeds"], atol=1e-5, rtol=0)
    np.testing.assert_allclose(np_(model((batch, ref["token_ids"]))), ref["logits_per_image"], atol=1e-4, rtol=0)
    with open(os.path.join(FIXTURES, "siglip", "tokenizer_battery.json")) as f:
        texts = json.load(f)["texts"][:4]  # the fixture script's texts, whose ids transformers' tokenizer gave
    np.testing.assert_array_equal(model.text_preprocessor()(texts), ref["token_ids"])
    assert model.naflex == dict(patch_size=4, max_patches=16, mean=(0.5,) * 3, std=(0.5,) * 3, interpolation="bilinear")


def test_a_naflex_model_saved_and_loaded_keeps_its_batch_settings(tmp_path):
    model, ref, batch = _naflex()
    model.save(tmp_path / "siglip2.keras")
    again = keras_vit.load_image_text(str(tmp_path / "siglip2.keras"))
    assert again.naflex == model.naflex
    image = keras.ops.convert_to_numpy(again.encode_image(keras_vit.naflex_batch([ref["photo_0"]], **again.naflex)))
    mine = keras.ops.convert_to_numpy(model.encode_image(keras_vit.naflex_batch([ref["photo_0"]], **model.naflex)))
    np.testing.assert_allclose(image, mine, atol=1e-6, rtol=0)


def test_naflex_batch_with_the_repositorys_settings_is_its_processors_batch():
    """`keras_vit.naflex_batch(photos, **model.naflex)` lays the photos out as transformers' processor does (the
    same patch grid per photo, padding, coordinates); its pixels are within one 8-bit level of the processor's,
    which resizes 8-bit pixels and rounds them."""
    from keras_vit.vit.naflex import from_transformers

    model, ref, batch = _naflex()
    ours = keras_vit.naflex_batch([ref[f"photo_{i}"] for i in range(3)], **model.naflex)
    theirs = from_transformers(batch)
    np.testing.assert_array_equal(ours["patch_valid"], theirs["patch_valid"])
    np.testing.assert_array_equal(
        ours["patch_coord"][ours["patch_valid"]], theirs["patch_coord"][theirs["patch_valid"]]
    )
    level = 1.0 / 255 / 0.5  # one 8-bit level after the normalisation (std 0.5)
    assert float(np.abs(ours["patches"] - theirs["patches"]).max()) <= level + 1e-6
    features = keras.ops.convert_to_numpy(model.encode_image(ours))
    np.testing.assert_allclose(features, ref["image_embeds"], atol=2e-2, rtol=0)


def test_a_square_image_at_the_grids_size_is_the_same_through_the_fixed_size_tower():
    """The image tower also runs as a fixed-size model (its position grid at 4 x 4 patches, 16 px): a 16 px square
    photo gives the embedding its NaFlex batch gives; a malformed transformers batch is refused by name."""
    model, ref, batch = _naflex()
    photo = ref["photo_2"]  # 9 x 9, which the processor brings to a 4 x 4 grid
    naflex = keras_vit.naflex_batch([photo], **model.naflex)
    square = naflex["patches"][0].reshape(4, 4, 4, 4, 3).transpose(0, 2, 1, 3, 4).reshape(1, 16, 16, 3)
    fixed = keras.ops.convert_to_numpy(model.encode_image(square))
    np.testing.assert_allclose(fixed, keras.ops.convert_to_numpy(model.encode_image(naflex)), atol=1e-5, rtol=0)
    bad = dict(batch, spatial_shapes=np.array([[4, 4], [5, 3], [4, 4]]))
    with pytest.raises(ValueError, match="image 0: spatial_shapes 4x4 does not match its attention mask"):
        model.encode_image(bad)


def test_the_zero_shot_command_gives_a_naflex_model_each_photo_at_its_aspect_ratio(tmp_path, capsys):
    """`python -m keras_vit.zero_shot` on a SigLIP 2 NaFlex repository scores NaFlex batches of the photos (the
    repository's settings), not the photos squashed to the fixed-size tower's square."""
    from PIL import Image

    from keras_vit.analysis import zero_shot

    model, ref, _ = _naflex()
    (tmp_path / "photos").mkdir()
    for i in range(3):
        Image.fromarray(ref[f"photo_{i}"]).save(tmp_path / "photos" / f"{i}.png")
    folder = os.path.join(FIXTURES, "siglip2_naflex")
    argv = [str(tmp_path / "photos"), f"--weights={folder}", "--classes=cat,astronaut,coffee", "--json", "--top=3"]
    argv.append("--templates=simple_imagenet")
    assert zero_shot.main(argv) == 0
    rows = {
        os.path.basename(r["image"]): {t["name"]: t["score"] for t in r["top"]}
        for r in json.loads(capsys.readouterr().out)
    }
    classifier = keras_vit.ZeroShotClassifier(
        model, model.text_preprocessor(), ["cat", "astronaut", "coffee"], "simple_imagenet"
    )
    photos = [ref[f"photo_{i}"].astype("float32") for i in range(3)]
    naflex = classifier.predict(keras_vit.naflex_batch(photos, **model.naflex), top=3)
    square = classifier.predict(
        np.concatenate([keras.ops.convert_to_numpy(model.image_model.preprocessor()(p)) for p in photos]), top=3
    )
    for i in range(3):
        assert rows[f"{i}.png"] == pytest.approx(dict(naflex[i]), abs=1e-6)
    assert any(rows[f"{i}.png"] != pytest.approx(dict(square[i]), abs=1e-4) for i in range(2))  # the two non-square


def test_batch_inference_gives_a_naflex_model_each_photo_at_its_aspect_ratio(tmp_path):
    """`run_inference(..., features="embedding")` with a SigLIP 2 NaFlex model cuts each photo at its own aspect
    ratio with the repository's settings (recorded in the manifest): its embeddings are transformers' (within the
    8-bit rounding of its processor) and each photo's NaFlex batch's, batches padded or not; the photos squashed
    to the fixed-size tower's square give other embeddings."""
    from PIL import Image

    from keras_vit.analysis import shards
    from keras_vit.analysis.inference import run_inference

    model, ref, _ = _naflex()
    (tmp_path / "photos").mkdir()
    for i in range(3):
        Image.fromarray(ref[f"photo_{i}"]).save(tmp_path / "photos" / f"{i}.png")
    manifest = run_inference(
        model,
        str(tmp_path / "photos"),
        str(tmp_path / "out"),
        features="embedding",
        fmt="npy",
        batch_size=2,
        l2_normalize=True,
        progress=False,
    )
    assert manifest["settings"]["naflex"] == dict(
        patch_size=4, max_patches=16, mean=[0.5] * 3, std=[0.5] * 3, interpolation="bilinear"
    )
    out = shards.read_output(str(tmp_path / "out"))
    rows = {os.path.basename(str(f)): e for f, e in zip(out["file"], out["embedding"])}
    ours = np.stack([rows[f"{i}.png"] for i in range(3)])
    np.testing.assert_allclose(ours, ref["image_embeds"], atol=2e-2, rtol=0)
    np_ = keras.ops.convert_to_numpy
    for i in range(3):
        alone = np_(model.encode_image(keras_vit.naflex_batch([ref[f"photo_{i}"]], **model.naflex)))[0]
        np.testing.assert_allclose(ours[i], alone, atol=1e-5, rtol=0)
    squashed = np_(
        model.encode_image(
            np.concatenate(
                [np_(model.image_model.preprocessor()(ref[f"photo_{i}"].astype("float32"))) for i in range(3)]
            )
        )
    )
    assert np.abs(squashed - ref["image_embeds"]).max() > 5e-2
