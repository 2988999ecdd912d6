"""The official `.npz` keys every source is brought to, and what the readers and writers of PyTorch layouts share.

Everything keras_vit reads is first brought to the official keys, so one architecture reader and one all-or-nothing
loader serve every source. PyTorch's Linear weights are (out, in) and its convolutions (O, I, kh, kw); timm fuses
q, k, v into one `qkv` Linear, `transformers` keeps `query` / `key` / `value`. `_Reader` takes a state dict key by
key and refuses what is left unmapped, naming it.
"""

from __future__ import annotations

import os
import re
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Dict, Optional, Sequence, Tuple

import numpy as np

from keras_vit.utils.assign import aligned_empty
from keras_vit.vit import table


Params = Dict[str, np.ndarray]


POSEMB_KEY = "Transformer/posembed_input/pos_embedding"


def detect(keys) -> str:
    """ "timm", "transformers" or "official", from a state dict's key names."""
    keys = list(keys)
    if any(k.startswith(("patch_embed.", "embeds.proj.")) for k in keys):  # embeds: timm's NaFlexVit
        return "timm"
    if any(k.startswith(("vit.embeddings.", "embeddings.patch_embeddings.")) for k in keys):
        return "transformers"
    return "official"


def _linear_in(weight: np.ndarray) -> np.ndarray:  # torch (out, in) -> Flax (in, out)
    return transposed(weight)


def transposed(matrix: np.ndarray, rows: int = 128) -> np.ndarray:
    """`matrix.T` as a contiguous, 64-byte-aligned array, copied `rows` source rows at a time: each band stays
    in cache, so a large matrix is copied faster than by `np.ascontiguousarray(matrix.T)` (a checkpoint's every
    linear layer passes through here; docs/benchmarks-history.md, "Cold start")."""
    out = aligned_empty(matrix.shape[::-1], matrix.dtype)
    for start in range(0, matrix.shape[0], rows):
        out[:, start : start + rows] = matrix[start : start + rows].T
    return out


def _conv_in(weight: np.ndarray) -> np.ndarray:  # (O, I, kh, kw) -> (kh, kw, I, O)
    return np.ascontiguousarray(weight.transpose(2, 3, 1, 0))


def _attention_in(q, k, v, out_w, biases, num_heads: int, prefix: str) -> Params:
    """Separate (D, D) torch projections -> the official (D, H, D/H) / (H, D/H, D) kernels (biases: q, k, v, out;
    None for an absent one)."""
    d = q.shape[1]
    if num_heads < 1 or d % num_heads or q.shape[0] != d:
        raise ValueError(
            f"{prefix}: {num_heads} heads do not divide the width {d} of the weights (query "
            f"{tuple(q.shape)}); the config names heads of another model than these weights."
        )
    head = d // num_heads
    p = {}
    for name, w, b in (("query", q, biases[0]), ("key", k, biases[1]), ("value", v, biases[2])):
        heads = w.shape[0] // head  # key and value: fewer heads under grouped-query attention (Sapiens2)
        p[f"{prefix}{name}/kernel"] = _linear_in(w).reshape(d, heads, head)
        if b is not None:  # None: a model without query/key/value biases
            p[f"{prefix}{name}/bias"] = b.reshape(heads, head)
    p[f"{prefix}out/kernel"] = _linear_in(out_w).reshape(num_heads, head, d)
    if biases[3] is not None:  # None: an output projection without bias (AIMv2)
        p[f"{prefix}out/bias"] = biases[3]
    return p


def _blocks(sd: Params, pattern) -> list:
    return sorted({int(m.group(1)) for m in map(pattern.match, sd) if m})


def _need(sd: Params, key: str, source: str) -> np.ndarray:
    if key not in sd:
        raise ValueError(f"{source} lacks {key!r}: not a ViT state dict keras_vit can read.")
    return np.asarray(sd[key], dtype="float32")


# what an unmapped tensor most likely is, by the end of its name (timm's and transformers' vocabularies)
_UNMAPPED_HINTS = (
    (r"\.(ls[12]\.gamma|gamma_[12]|layer_scale\d?\.lambda1)$", "LayerScale"),
    (r"\.[qk]_norm\.", "qk-norm"),
    (r"(^|\.)norm_pre\.", "a LayerNorm after the embeddings (pre-norm)"),
    (r"(^|\.)fc_norm\.", "a LayerNorm after pooling (fc_norm)"),
    (r"(^|\.)(reg_token|register_tokens)$", "register tokens"),
    (r"(^|\.)(dist_token|head_dist\.)", "a distillation token"),
    (r"(^|\.)attn_pool\.", "an attention-pooling (MAP) head"),
)


class _Reader:
    """A state dict read key by key: remembers what was taken, so that anything left is refused by name (a
    tensor the reader does not map would otherwise be dropped without a word, giving other logits)."""

    def __init__(self, sd: Params, source: str):
        self.sd, self.source, self.used = sd, source, set()

    def __call__(self, key: str) -> np.ndarray:
        self.used.add(key)
        return _need(self.sd, key, self.source)

    def check_all_used(self) -> None:
        left = sorted(k for k in self.sd if k not in self.used)
        if not left:
            return
        what = next((hint for k in left for pattern, hint in _UNMAPPED_HINTS if re.search(pattern, k)), None)
        raise ValueError(
            f"{self.source} holds {len(left)} tensor(s) keras_vit's reader does not map, e.g. "
            f"{left[0]!r}{f' ({what}, not part of this ViT)' if what else ''}: loading without them "
            f"would give other logits, so nothing was loaded. Unmapped: {', '.join(left[:6])}"
            f"{' ...' if len(left) > 6 else ''}."
        )


def per_block(blocks: Sequence[int], convert: Callable[[int], Params]) -> Params:
    """`convert(i)` for every block `i`, one block per thread, merged in block order. numpy copies without the
    GIL, so the blocks' transposes and their first-touch page faults overlap (docs/benchmarks-history.md, "Cold
    start"). The first block to fail raises, and
    nothing is assigned before the whole conversion is done."""
    out: Params = {}
    with ThreadPoolExecutor(max(1, min(len(blocks), os.cpu_count() or 1))) as pool:
        for block in pool.map(convert, blocks):
            out.update(block)
    return out


def _attention_out(params: Params, prefix: str) -> Tuple[np.ndarray, ...]:
    """(q, k, v, out) torch (out, in) weights and their biases from the official kernels."""
    d = params[prefix + "query/kernel"].shape[0]
    ws = [np.ascontiguousarray(params[f"{prefix}{n}/kernel"].reshape(d, d).T) for n in ("query", "key", "value")]
    bs = [params[f"{prefix}{n}/bias"].reshape(d) for n in ("query", "key", "value")]
    out_w = np.ascontiguousarray(params[prefix + "out/kernel"].reshape(d, d).T)
    return ws, bs, out_w, params[prefix + "out/bias"]


def _common_out(params: Params, num_layers: int, names: dict) -> Params:
    sd: Params = {}
    for i in range(num_layers):
        o = f"Transformer/encoderblock_{i}/"
        ws, bs, out_w, out_b = _attention_out(params, o + "MultiHeadDotProductAttention_1/")
        sd.update(names["attention"](i, ws, bs, out_w, out_b))
        for ours, theirs in (("LayerNorm_0", names["ln0"]), ("LayerNorm_2", names["ln2"])):
            sd[names["block"](i) + theirs + ".weight"] = params[f"{o}{ours}/scale"]
            sd[names["block"](i) + theirs + ".bias"] = params[f"{o}{ours}/bias"]
        for ours, theirs in (("Dense_0", names["fc1"]), ("Dense_1", names["fc2"])):
            sd[names["block"](i) + theirs + ".weight"] = np.ascontiguousarray(params[f"{o}MlpBlock_3/{ours}/kernel"].T)
            sd[names["block"](i) + theirs + ".bias"] = params[f"{o}MlpBlock_3/{ours}/bias"]
    return sd


def _heads_for(width: int, source: str, num_heads: Optional[int]) -> int:
    if num_heads:
        return int(num_heads)
    rows = {c.num_heads for c in table.MODELS.values() if c.hidden_size == width}
    if len(rows) != 1:
        raise ValueError(
            f"{source}: a state dict does not say its number of heads and width {width} is not a "
            "table width; pass num_heads=."
        )
    return rows.pop()
