"""big_vision's SigLIP checkpoints (`.npz` with `img/`, `txt/`, the temperature `t` and the bias `b`, also under a
train state's `params/`) -> an `ImageTextModel`, through open_clip's layout.

A big_vision file holds tensors only. Its architecture is open_clip's config of the model it was released as
(`model="ViT-B-16-SigLIP"`), as open_clip's `create_model(name, pretrained="....npz")` takes it, or such a config
itself. Each tensor is renamed and laid out as open_clip's converter (`open_clip.convert.load_big_vision_weights`)
copies it into open_clip's model (kernels transposed, the per-head query / key / value kernels joined), for blocks
stored one per key or stacked on a depth axis (big_vision's `scan=True`); `open_clip.from_state` then maps every
renamed tensor or refuses naming it. A key of the file this reader does not rename is refused by name (open_clip's
converter would skip it).

What the file does not state:
- the image preprocessing: open_clip's SigLIP defaults (mean and std 0.5, bicubic, the image squashed to the
  square; `open_clip.pretrained._slpcfg`) unless `preprocess_cfg` (open_clip's keys) says otherwise;
- the tokenizer: big_vision names its vocabulary in its training config, not in the file. `tokenizer` is a folder
  holding `tokenizer.json` (applied as open_clip's `HFTokenizer` applies it, with the config's cleaning) or a
  SentencePiece `spiece.model` (`keras_vit.SentencePieceTokenizer`), or a tokenizer object; without one the model
  loads without a tokenizer and takes token ids.

The model keeps open_clip's config it was built from, so `keras_vit.save_open_clip` writes it as an open_clip
folder (`open_clip_config.json` with the preprocessing used, `open_clip_model.safetensors`): the state dict open_clip's
converter makes of the file.
"""

from __future__ import annotations

import os
from typing import Callable, Dict, Optional, Union

import numpy as np

SIGLIP_PREPROCESS = {"mean": [0.5] * 3, "std": [0.5] * 3, "interpolation": "bicubic", "resize_mode": "squash"}
_ROOT = "params/"


def load_big_vision_siglip(
    path: Union[str, os.PathLike],
    model: Union[str, dict],
    *,
    tokenizer=None,
    preprocess_cfg: Optional[dict] = None,
) -> "keras.Model":  # noqa: F821
    """An `ImageTextModel` from a big_vision SigLIP `.npz` (module docstring).

    Args:
      path: the `.npz` file.
      model: open_clip's name of the model the file holds ("ViT-B-16-SigLIP", "ViT-SO400M-14-SigLIP-384"; a
        ":tag" is ignored), or open_clip's `model_cfg` of it.
      tokenizer: a folder with `tokenizer.json` or `spiece.model`, a tokenizer object, or None.
      preprocess_cfg: open_clip's `preprocess_cfg` for the image tower (default: open_clip's SigLIP defaults).
    """
    from keras_vit.weights import open_clip, open_clip_names, open_clip_text

    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"big_vision checkpoint {path!r} does not exist.")
    cfg = _model_config(model, open_clip_names)
    source = f"{path} (as open_clip's {model if isinstance(model, str) else 'given config'})"
    tower = open_clip_text.text_tower(cfg, source)  # refusals before the file is read
    try:
        with np.load(path, allow_pickle=False) as archive:
            w = {k: archive[k] for k in archive.files}
    except (OSError, ValueError) as e:
        raise ValueError(f"{path!r} is not a readable .npz file: {e}") from e
    sd = to_open_clip(w, cfg, path)
    config = {"model_cfg": cfg, "preprocess_cfg": dict(preprocess_cfg or SIGLIP_PREPROCESS)}
    return open_clip.from_state(
        config,
        sd,
        os.path.dirname(os.path.abspath(path)),
        source,
        path,
        tokenizer=_tokenizer(tokenizer, tower, cfg.get("text_cfg") or {}),
        no_tokenizer="a big_vision file names no vocabulary: pass tokenizer=<folder with tokenizer.json or spiece.model>",
    )  # the config is open_clip's own: keras_vit.save_open_clip writes the model as an open_clip folder


def _model_config(model, open_clip_names) -> dict:
    if isinstance(model, dict):
        return dict(model)
    name = str(model).split(":", 1)[0]
    cfg = open_clip_names._table()["models"].get(name)
    if cfg is None:
        close = ", ".join(open_clip_names.close_names(name)) or "none"
        raise ValueError(f"model={model!r} is not one of open_clip's pretrained models (close names: {close}).")
    why = open_clip_names.why_not_built(name)
    if why:
        raise ValueError(f"model={model!r}: {why}")
    return dict(cfg)


def _tokenizer(tokenizer, tower, text_cfg: dict):
    if tokenizer is None or not isinstance(tokenizer, (str, os.PathLike)):
        return tokenizer
    from keras_vit.vit.tokenizer_files import FILES, tokenizer_in

    folder = os.fspath(tokenizer)
    clean = (text_cfg.get("tokenizer_kwargs") or {}).get("clean") or "whitespace"  # open_clip's HFTokenizer's
    found = tokenizer_in(folder, tower.context_length, clean=clean)
    if found is None:
        raise ValueError(f"tokenizer={folder!r} holds neither {' nor '.join(FILES)}.")
    return found


class _Taker:
    """The file's tensors, each handed out once, by key (and depth index for stacked blocks)."""

    def __init__(self, w: Dict[str, np.ndarray], path: str):
        self.w, self.path, self.used = w, path, set()

    def __contains__(self, key: str) -> bool:
        return key in self.w

    def __call__(self, key: str, index: Optional[int] = None) -> np.ndarray:
        if key not in self.w:
            raise ValueError(
                f"{self.path!r}: no tensor {key!r} (a big_vision SigLIP file of this architecture has one)."
            )
        self.used.add(key)
        value = np.asarray(self.w[key], dtype="float32")
        return value if index is None else value[index]


def _blocks(take: _Taker, prefix: str) -> list:
    """[(block prefix, depth index or None)] of an encoder's blocks under `prefix`: stacked, or one per key."""
    stacked = f"{prefix}encoderblock/"
    if f"{stacked}LayerNorm_0/scale" in take:
        return [(stacked, i) for i in range(take.w[f"{stacked}LayerNorm_0/scale"].shape[0])]
    out = []
    while f"{prefix}encoderblock_{len(out)}/LayerNorm_0/scale" in take:
        out.append((f"{prefix}encoderblock_{len(out)}/", None))
    return out


def _heads_in(kernel: np.ndarray) -> np.ndarray:
    """A (width, heads, head width) query / key / value kernel -> (heads * head width, width), torch's Linear."""
    return kernel.reshape(kernel.shape[0], -1).T


def _heads_out(kernel: np.ndarray) -> np.ndarray:
    """The (heads, head width, width) output kernel -> (width, heads * head width)."""
    return kernel.transpose(2, 0, 1).reshape(kernel.shape[2], -1)


def _attention(take: _Taker, p: str, i, names: Callable[[str], str], out: dict, parts=("query", "key", "value")):
    out[names("qkv.weight")] = np.concatenate([_heads_in(take(f"{p}{n}/kernel", i)) for n in parts])
    out[names("qkv.bias")] = np.concatenate([take(f"{p}{n}/bias", i).reshape(-1) for n in parts])
    out[names("out.weight")] = _heads_out(take(f"{p}out/kernel", i))
    out[names("out.bias")] = take(f"{p}out/bias", i)


def _mlp(take: _Taker, p: str, i, fc1: str, fc2: str, out: dict) -> None:
    for r, name in enumerate((fc1, fc2)):
        out[f"{name}.weight"] = take(f"{p}MlpBlock_0/Dense_{r}/kernel", i).T
        out[f"{name}.bias"] = take(f"{p}MlpBlock_0/Dense_{r}/bias", i)


def _norm(take: _Taker, p: str, i, name: str, out: dict) -> None:
    out[f"{name}.weight"] = take(f"{p}scale", i)
    out[f"{name}.bias"] = take(f"{p}bias", i)


# a block's parts under open_clip's names: a timm trunk's (the image tower) and open_clip's own (the text tower)
_TIMM_BLOCK = {
    "norm1": "norm1",
    "norm2": "norm2",
    "qkv.weight": "attn.qkv.weight",
    "qkv.bias": "attn.qkv.bias",
    "out.weight": "attn.proj.weight",
    "out.bias": "attn.proj.bias",
    "fc1": "mlp.fc1",
    "fc2": "mlp.fc2",
}
_TEXT_BLOCK = {
    "norm1": "ln_1",
    "norm2": "ln_2",
    "qkv.weight": "attn.in_proj_weight",
    "qkv.bias": "attn.in_proj_bias",
    "out.weight": "attn.out_proj.weight",
    "out.bias": "attn.out_proj.bias",
    "fc1": "mlp.c_fc",
    "fc2": "mlp.c_proj",
}


def _block(take: _Taker, b: str, i, q: str, names: dict, out: dict) -> None:
    """One encoder block (big_vision prefix `b`, depth index `i` when stacked) under `q` + `names`."""
    _norm(take, f"{b}LayerNorm_0/", i, q + names["norm1"], out)
    _attention(take, f"{b}MultiHeadDotProductAttention_0/", i, lambda n: q + names[n], out)
    _norm(take, f"{b}LayerNorm_1/", i, q + names["norm2"], out)
    _mlp(take, b, i, q + names["fc1"], q + names["fc2"], out)


def _image(take: _Taker, p: str, out: dict) -> None:
    t = "visual.trunk."
    out[f"{t}patch_embed.proj.weight"] = take(f"{p}embedding/kernel").transpose(3, 2, 0, 1)
    out[f"{t}patch_embed.proj.bias"] = take(f"{p}embedding/bias")
    if f"{p}cls" in take:
        out[f"{t}cls_token"] = take(f"{p}cls")
    out[f"{t}pos_embed"] = take(f"{p}pos_embedding")
    for k, (b, i) in enumerate(_blocks(take, f"{p}Transformer/")):
        _block(take, b, i, f"{t}blocks.{k}.", _TIMM_BLOCK, out)
    _norm(take, f"{p}Transformer/encoder_norm/", None, f"{t}norm", out)
    head = f"{p}MAPHead_0/"
    if f"{head}probe" in take:
        a = f"{t}attn_pool."
        out[f"{a}latent"] = take(f"{head}probe")
        m = f"{head}MultiHeadDotProductAttention_0/"
        out[f"{a}q.weight"] = _heads_in(take(f"{m}query/kernel"))
        out[f"{a}q.bias"] = take(f"{m}query/bias").reshape(-1)
        kv = {"qkv.weight": f"{a}kv.weight", "qkv.bias": f"{a}kv.bias", "out.weight": f"{a}proj.weight"}
        kv["out.bias"] = f"{a}proj.bias"
        _attention(take, m, None, kv.__getitem__, out, parts=("key", "value"))
        _norm(take, f"{head}LayerNorm_0/", None, f"{a}norm", out)
        _mlp(take, head, None, f"{a}mlp.fc1", f"{a}mlp.fc2", out)


def _text(take: _Taker, p: str, cfg: dict, out: dict) -> None:
    t = "text."
    out[f"{t}token_embedding.weight"] = take(f"{p}Embed_0/embedding")
    position = take(f"{p}pos_embedding")
    out[f"{t}positional_embedding"] = position[0] if position.ndim == 3 else position
    for k, (b, i) in enumerate(_blocks(take, f"{p}Encoder_0/")):
        _block(take, b, i, f"{t}transformer.resblocks.{k}.", _TEXT_BLOCK, out)
    _norm(take, f"{p}Encoder_0/encoder_norm/", None, f"{t}ln_final", out)
    if f"{p}head/kernel" in take:
        if not (cfg.get("text_cfg") or {}).get("proj_bias"):
            raise ValueError(
                f"{take.path!r} has a text head ({p}head/), which open_clip reads only into a projection with a bias "
                "(text_cfg.proj_bias): this config has none."
            )
        out[f"{t}text_projection.weight"] = take(f"{p}head/kernel").T
        out[f"{t}text_projection.bias"] = take(f"{p}head/bias")


def to_open_clip(w: Dict[str, np.ndarray], cfg: dict, path: str) -> Dict[str, np.ndarray]:
    """{open_clip name: array} of a big_vision SigLIP file's tensors `w` (every one renamed, or refused)."""
    root = _ROOT if f"{_ROOT}b" in w else ""
    take = _Taker(w, path)
    out: Dict[str, np.ndarray] = {}
    if f"{root}img/embedding/kernel" not in take or f"{root}txt/Embed_0/embedding" not in take:
        raise ValueError(
            f"{path!r} is not a big_vision image-text checkpoint: no {root}img/embedding/kernel and "
            f"{root}txt/Embed_0/embedding."
        )
    _image(take, f"{root}img/", out)
    _text(take, f"{root}txt/", cfg, out)
    out["logit_scale"] = take(f"{root}t").reshape(())
    out["logit_bias"] = take(f"{root}b").reshape(())
    left = sorted(set(w) - take.used)
    if left:
        raise ValueError(
            f"{path!r}: {len(left)} tensor(s) keras_vit does not map from big_vision's SigLIP layout: "
            + ", ".join(left[:5])
            + (" ..." if len(left) > 5 else "")
        )
    return out
