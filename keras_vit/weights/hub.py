"""Hugging Face hub handles: `hf-hub:timm/<name>` (timm's spelling) and `hf://<org>/<name>`, each with an
optional `@<revision>` (a branch, tag or commit).

Resolved through `huggingface_hub` itself, so its cache (`HF_HUB_CACHE`), its offline mode
(`HF_HUB_OFFLINE=1`) and its token apply. Only `config.json` and `model.safetensors` (or a sharded checkpoint's
index and shards) are fetched, into the hub's snapshot folder, which is then read as a local timm or `transformers` directory; a repository holding
only `pytorch_model.bin` is refused (keras_vit never unpickles).
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
from typing import Tuple

from keras_vit.weights.timm.repository import CONFIG, INDEX, WEIGHTS  # the same file names in both layouts

PREFIXES = ("hf-hub:", "hf://")


def is_handle(source) -> bool:
    """Whether `source` is spelled as a hub handle (checked by `parse` before anything is fetched)."""
    return isinstance(source, str) and source.startswith(PREFIXES)


def parse(handle: str) -> Tuple[str, str]:
    """(repo id, revision or "") of a handle; a clear error for one that names no `org/name`."""
    rest = handle.split(":", 1)[1].lstrip("/") if handle.startswith("hf-hub:") else handle[len("hf://") :]
    repo, _, revision = rest.partition("@")
    if repo.count("/") != 1 or not all(repo.split("/")):
        raise ValueError(
            f"weights={handle!r}: a hub handle is hf-hub:<org>/<name>[@revision] or hf://<org>/<name>[@revision]."
        )
    return repo, revision


def _download(repo: str, name: str, revision: str, handle: str) -> str:
    """The local path of file `name` of the handle's repository, fetched through the hub cache, or a ValueError
    in one line that names why (no revision, no repository, not cached offline, no such file)."""
    import huggingface_hub
    from huggingface_hub import constants, errors

    where = f"{repo}{'@' + revision if revision else ''}"
    try:
        return huggingface_hub.hf_hub_download(repo, name, revision=revision or None)
    except errors.RevisionNotFoundError:
        raise ValueError(f"{handle!r}: the hub has no revision {revision!r} of {repo}.") from None
    except errors.RepositoryNotFoundError:
        raise ValueError(
            f"{handle!r}: no hub repository {repo!r} (or it is private: log in with `hf auth login`)."
        ) from None
    except errors.LocalEntryNotFoundError:  # before EntryNotFoundError: a subclass of it
        offline = " (HF_HUB_OFFLINE is set)" if constants.HF_HUB_OFFLINE else " (no network?)"
        raise ValueError(
            f"{handle!r}: {name} of {where} is not in the hub cache {constants.HF_HUB_CACHE} and "
            f"cannot be downloaded{offline}."
        ) from None
    except errors.EntryNotFoundError:
        pickle = (
            " (it holds pytorch_model.bin, a pickle keras_vit never loads: convert it with timm's "
            "save_for_hf(..., safe_serialization=True))"
            if name == WEIGHTS
            else ""
        )
        raise ValueError(f"{handle!r}: {where} has no {name}{pickle}.") from None


@functools.lru_cache(maxsize=64)
def resolve(handle: str) -> str:
    """The local folder (the hub cache's snapshot) holding the handle's config.json and model.safetensors (or a
    sharded checkpoint: `model.safetensors.index.json` and every shard it names). Remembered per process (a
    failure is not), so the data config and the weights of one `weights=` do not ask the hub twice."""
    if importlib.util.find_spec("huggingface_hub") is None:
        raise ValueError(f"weights={handle!r} needs huggingface_hub: pip install 'keras-vision-transformer[hub]'.")
    repo, revision = parse(handle)
    config = _download(repo, CONFIG, revision, handle)
    try:
        _download(repo, WEIGHTS, revision, handle)
    except ValueError as missing:
        try:
            index = _download(repo, INDEX, revision, handle)
        except ValueError:
            raise missing from None
        with open(index) as f:
            shards = sorted(set(json.load(f).get("weight_map", {}).values()))
        for shard in shards:
            _download(repo, shard, revision, handle)
    return os.path.dirname(config)
