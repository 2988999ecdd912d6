"""Reading a `.safetensors` file as numpy arrays without copying it first.

The `safetensors` package checks the file (its header, dtypes and offsets) and names its tensors; the data are
then numpy views of the file mapped into memory. A timm ViT-B/16 is 344 MB: copying it into fresh arrays
before the layout conversion copied it again was 0.2 s of every cold start (docs/benchmarks-history.md, "Cold start").

The format (safetensors' own specification): an 8-byte little-endian header length, a JSON header with each
tensor's dtype, shape and `data_offsets` (relative to the end of the header), then the data, little-endian.
A bfloat16 value is the upper half of the float32 with the same bits; numpy has no bfloat16, so those tensors
are upcast exactly to float32.
"""

from __future__ import annotations

import contextlib
import json
import mmap
from typing import Callable, Dict, Iterator, Tuple

import numpy as np

# safetensors dtype names -> little-endian numpy dtypes (BF16 is upcast; other names are read by safetensors)
_NUMPY = {
    "F64": "<f8",
    "F32": "<f4",
    "F16": "<f2",
    "I64": "<i8",
    "I32": "<i4",
    "I16": "<i2",
    "I8": "i1",
    "U8": "u1",
    "BOOL": "?",
}


def _header(path: str) -> Tuple[int, dict]:
    """(bytes before the data, the JSON header) of a file `safetensors` has already accepted."""
    with open(path, "rb") as f:
        size = int.from_bytes(f.read(8), "little")
        return 8 + size, json.loads(f.read(size))


@contextlib.contextmanager
def mapped_tensors(path: str) -> Iterator[Tuple[Dict[str, np.ndarray], np.ndarray]]:
    """({name: read-only array}, the whole mapped file as bytes) of the `.safetensors` file `path`.

    The arrays are views of the mapping (bfloat16 ones, and dtypes numpy cannot view, are copies): use them
    within the block and keep copies of what must outlive it (`owned`). A file `safetensors` refuses raises a
    ValueError naming it."""
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(path, framework="np") as f:
            dtypes = {k: f.get_slice(k).get_dtype() for k in f.keys()}
            copied = {k: np.asarray(f.get_tensor(k)) for k, d in dtypes.items() if d not in _NUMPY and d != "BF16"}
        start, header = _header(path)
        with open(path, "rb") as f:
            mapping = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if start < _file_size(f) else None
    except (SafetensorError, OSError, ValueError, TypeError) as e:
        raise ValueError(f"{path!r} is not a readable .safetensors file: {e}") from e
    whole = np.frombuffer(mapping, dtype=np.uint8) if mapping is not None else np.zeros(0, np.uint8)
    tensors = dict(copied)
    for name, dtype in dtypes.items():
        if name in copied:
            continue
        begin, end = (start + o for o in header[name]["data_offsets"])
        raw = whole[begin:end]
        if dtype == "BF16":  # exact: the float32 whose upper 16 bits these are
            tensors[name] = (raw.view("<u2").astype("<u4") << 16).view("<f4").reshape(header[name]["shape"])
        else:
            tensors[name] = raw.view(_NUMPY[dtype]).reshape(header[name]["shape"])
    yield tensors, whole


def _file_size(f) -> int:
    f.seek(0, 2)
    return f.tell()


def owned(params: Dict[str, np.ndarray], whole: np.ndarray) -> Dict[str, np.ndarray]:
    """`params` with every array that is still a view of the mapped file `whole` copied out (a bounds check:
    arrays a conversion made are left as they are)."""
    return {k: np.array(v) if np.may_share_memory(v, whole) else v for k, v in params.items()}


def read_converted(
    path: str, convert: Callable[[Dict[str, np.ndarray]], Dict[str, np.ndarray]]
) -> Dict[str, np.ndarray]:
    """`convert({name: array})` of the `.safetensors` file `path`, read through a mapping; arrays of the
    result that are still views of the file are copied out (the mapping closes when the last view goes)."""
    with mapped_tensors(path) as (tensors, whole):
        return owned(convert(tensors), whole)


def read_sharded_converted(
    index_path: str, convert: Callable[[Dict[str, np.ndarray]], Dict[str, np.ndarray]]
) -> Dict[str, np.ndarray]:
    """`read_converted` of a sharded checkpoint: the `model.safetensors.index.json` at `index_path` (its
    `weight_map`: tensor name -> shard file beside it) read as one state dict. Every shard must hold exactly
    the tensors the index gives it: a tensor missing from its shard, or one the index does not list, is refused
    by name (a checkpoint whose shards disagree with its index is not read in part)."""
    import os

    try:
        with open(index_path) as f:
            weight_map = json.load(f)["weight_map"]
        if not isinstance(weight_map, dict) or not weight_map:
            raise ValueError("its weight_map is empty or not an object")
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ValueError(f"{index_path!r} is not a readable safetensors index: {e}") from e
    folder = os.path.dirname(index_path)
    shards: Dict[str, set] = {}
    for name, shard in weight_map.items():
        if not isinstance(shard, str) or os.path.basename(shard) != shard:
            raise ValueError(f"{index_path!r}: tensor {name!r} is mapped to {shard!r}, not a file beside the index.")
        shards.setdefault(shard, set()).add(name)
    with contextlib.ExitStack() as stack:
        tensors: Dict[str, np.ndarray] = {}
        wholes = []
        for shard, names in sorted(shards.items()):
            held, whole = stack.enter_context(mapped_tensors(os.path.join(folder, shard)))
            if set(held) != names:
                odd = sorted(set(held) ^ names)
                raise ValueError(
                    f"{index_path!r}: shard {shard!r} does not hold what the index says (e.g. "
                    f"{odd[0]!r}); nothing was read."
                )
            tensors.update(held)
            wholes.append(whole)
        params = convert(tensors)
        for whole in wholes:
            params = owned(params, whole)
        return params
