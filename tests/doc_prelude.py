"""Run before the docs' code blocks (tests/test_docs.py), in a fresh interpreter inside an empty directory: the
offline stand-ins the blocks find there instead of downloads. Visible on purpose: every difference between what a
reader runs and what the test runs is in this file.

- The model table keeps every row's patch size, heads and ResNet stem, with narrow tokens (D = 8 x heads, MLP 2 D)
  and two blocks, so `keras_vit.ViT_L16()` builds, trains and exports in seconds and keeps its patch grid and
  heads. The docs' code depends on no depth (the blocks it names are counted from the end).
- A local release mirror (`KERAS_VIT_BASE_URL=file://...`, set by the test before keras_vit is imported) holds a
  random checkpoint of that narrow model under each release's file name, with the release's head, written when a
  block first downloads it (`keras.utils.get_file` is wrapped here for that).
- The files the docs name (`ViT-B_16.npz`, `photo.jpg`, a timm `.safetensors`, a `transformers` directory, a
  timm repository, a big_vision SigLIP `.npz`, ...) are written here, an offline hub cache holds the repositories
  (timm's, open_clip's, transformers' CLIP and SigLIP 2 NaFlex), and the arrays the docs use (`images`, `x`,
  `names`, ...) are defined. open_clip's "ViT-B-16-SigLIP" config is narrowed to the tiny big_vision file's.
"""

import dataclasses
import json
import os
import shutil

import numpy as np
from PIL import Image
from skimage import data

from keras_vit.vit import table

for _name, _row in list(table.MODELS.items()):
    table.MODELS[_name] = dataclasses.replace(
        _row, hidden_size=8 * _row.num_heads, mlp_dim=16 * _row.num_heads, num_layers=min(_row.num_layers, 2)
    )
    table._BY_CANONICAL[table._canonical(_name)] = table.MODELS[_name]

import keras  # noqa: E402
import keras_vit  # noqa: E402  (after the table is narrowed)
from keras_vit.weights import releases  # noqa: E402

MIRROR = os.environ["KERAS_VIT_BASE_URL"][len("file://") :]
AUGREG_FILE = "B_16-i21k-300ep-lr_0.001-aug_medium1-wd_0.1-do_0.0-sd_0.0--imagenet2012-steps_20k-lr_0.03-res_384.npz"


def _mirror(release) -> None:
    path = os.path.join(MIRROR, release.url[len("file://") + len(MIRROR) + 1 :])
    if os.path.exists(path):
        return
    os.makedirs(os.path.dirname(path), exist_ok=True)
    model = keras_vit.create_model(
        release.model,
        input_shape=(release.resolution, release.resolution, 3),
        classes=release.classes or 10,
        representation_size=release.representation_size,
    )
    keras_vit.save_npz(model, path)


# the mirror holds ViT-B/16's and ViT-S/16's releases and one AugReg file, each written when first downloaded
_MIRRORED = {r.url: r for r in releases.available() if r.model in ("ViT-B/16", "ViT-S/16")}
_MIRRORED[releases.parse_augreg(AUGREG_FILE).url] = releases.parse_augreg(AUGREG_FILE)
_get_file = keras.utils.get_file


def _get_file_from_mirror(fname, origin=None, **kwargs):
    if origin in _MIRRORED:
        _mirror(_MIRRORED[origin])
    return _get_file(fname, origin=origin, **kwargs)


keras.utils.get_file = _get_file_from_mirror

# a timm repository (a small one timm wrote: tests/fixtures/timm_hub/plain), on disk and in an offline hub cache
_TIMM_REPO = "vit_base_patch16_224.augreg2_in21k_ft_in1k"
_FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
# and a small NaFlex repository timm wrote (tests/fixtures/backbones/naflex_siglip), in the cache only
for _repo, _fixture, _folders in (
    (_TIMM_REPO, os.path.join(_FIXTURES, "timm_hub", "plain"), (_TIMM_REPO,)),
    ("naflexvit_base_patch16_siglip.v2_webli", os.path.join(_FIXTURES, "backbones", "naflex_siglip"), ()),
):
    for _folder in _folders + (os.path.join("hub_cache", f"models--timm--{_repo}", "snapshots", "0" * 40),):
        os.makedirs(_folder)
        for _name in ("config.json", "model.safetensors"):
            shutil.copy(os.path.join(_fixture, _name), _folder)
    os.makedirs(os.path.join("hub_cache", f"models--timm--{_repo}", "refs"))
    with open(os.path.join("hub_cache", f"models--timm--{_repo}", "refs", "main"), "w") as _f:
        _f.write("0" * 40)
# an open_clip repository: the tiny CLIP open_clip wrote (tests/fixtures/open_clip/clip_tiny), its token table
# grown to CLIP's whole vocabulary so that the shipped tokenizer serves it
_CLIP_REPO = os.path.join("hub_cache", "models--laion--CLIP-ViT-B-32-laion2B-s34B-b79K")
os.makedirs(os.path.join(_CLIP_REPO, "snapshots", "0" * 40))
os.makedirs(os.path.join(_CLIP_REPO, "refs"))
with open(os.path.join(_CLIP_REPO, "refs", "main"), "w") as _f:
    _f.write("0" * 40)
with open(os.path.join(_FIXTURES, "open_clip", "clip_tiny", "open_clip_config.json")) as _f:
    _config = json.load(_f)
_config["model_cfg"]["text_cfg"]["vocab_size"] = 49408
with open(os.path.join(_CLIP_REPO, "snapshots", "0" * 40, "open_clip_config.json"), "w") as _f:
    json.dump(_config, _f)
from safetensors.numpy import load_file as _load_file, save_file as _save_file  # noqa: E402

_sd = _load_file(os.path.join(_FIXTURES, "open_clip", "clip_tiny", "open_clip_model.safetensors"))
_sd["token_embedding.weight"] = np.random.default_rng(1).standard_normal((49408, 32)).astype("float32")
_save_file(_sd, os.path.join(_CLIP_REPO, "snapshots", "0" * 40, "open_clip_model.safetensors"))
# a transformers CLIP repository: the tiny CLIPModel transformers wrote (tests/fixtures/transformers_clip/clip_eos)
_HF_CLIP = os.path.join("hub_cache", "models--openai--clip-vit-base-patch32")
os.makedirs(os.path.join(_HF_CLIP, "refs"))
with open(os.path.join(_HF_CLIP, "refs", "main"), "w") as _f:
    _f.write("0" * 40)
shutil.copytree(os.path.join(_FIXTURES, "transformers_clip", "clip_eos"), os.path.join(_HF_CLIP, "snapshots", "0" * 40))
# a transformers SigLIP 2 NaFlex repository: the tiny Siglip2Model transformers wrote (transformers_clip/siglip2_naflex)
_HF_NAFLEX = os.path.join("hub_cache", "models--google--siglip2-base-patch16-naflex")
os.makedirs(os.path.join(_HF_NAFLEX, "refs"))
with open(os.path.join(_HF_NAFLEX, "refs", "main"), "w") as _f:
    _f.write("0" * 40)
shutil.copytree(
    os.path.join(_FIXTURES, "transformers_clip", "siglip2_naflex"), os.path.join(_HF_NAFLEX, "snapshots", "0" * 40)
)
os.environ.update(HF_HUB_CACHE=os.path.abspath("hub_cache"), HF_HUB_OFFLINE="1")
# a big_vision SigLIP file: the tiny one open_clip's converter read (open_clip/big_vision_siglip), with open_clip's
# "ViT-B-16-SigLIP" config narrowed to its architecture, and a SigLIP tokenizer folder
from keras_vit.weights import open_clip_names  # noqa: E402

shutil.copy(os.path.join(_FIXTURES, "open_clip", "big_vision_siglip", "plain.npz"), "webli_en_b16_224_63724782.npz")
with open(os.path.join(_FIXTURES, "open_clip", "siglip_tiny", "open_clip_config.json")) as _f:
    open_clip_names._table()["models"]["ViT-B-16-SigLIP"] = json.load(_f)["model_cfg"]
os.makedirs("siglip-tokenizer")
for _name in ("tokenizer.json", "tokenizer_config.json"):
    shutil.copy(os.path.join(_FIXTURES, "transformers_clip", "siglip", _name), "siglip-tokenizer")

_rng = np.random.default_rng(0)
keras_vit.save_npz(keras_vit.ViT_B16(classes=21843, representation_size=768), "ViT-B_16.npz")
keras_vit.save_safetensors(keras_vit.ViT_B16(), "vit_b16_timm.safetensors", layout="timm")
keras_vit.save_safetensors(keras_vit.ViT_B16(), "vit-base-patch16-224", layout="transformers")
Image.fromarray(data.chelsea()).save("photo.jpg")
Image.fromarray(data.chelsea()).save("cat.jpg")
for _i, (_label, _photo) in enumerate([("cat", data.chelsea()), ("coffee", data.coffee())] * 3):
    os.makedirs(os.path.join("photos", _label), exist_ok=True)
    Image.fromarray(_photo).save(os.path.join("photos", _label, f"{_i}.jpg"))
images_0_255 = _rng.uniform(0, 255, (2, 224, 224, 3)).astype("float32")
images = images_0_255 / 127.5 - 1.0
images_320x480 = _rng.uniform(-1, 1, (1, 320, 480, 3)).astype("float32")
x = images[:1]
names = [f"class {i}" for i in range(1000)]
posemb = _rng.standard_normal((1, 197, 768)).astype("float32")
train_features, test_features = _rng.standard_normal((100, 16)), _rng.standard_normal((50, 16))
train_labels, test_labels = np.arange(100) % 5, np.arange(50) % 5
