"""Where a caption dataset's webdataset shards come from (`recipes.captions`): a folder, one `.tar`, a brace pattern
as webdataset and img2dataset write them (`shards/{00000..00099}.tar`, expanded by `braceexpand`, webdataset's own
expander), or URLs (`https://host/laion/{00000..00099}.tar`, `gs://bucket/...`, `s3://...`).

Members are read by offset, in a shuffle over every pair, so a remote shard is first copied to the local disk:
into `<cache>/caption_shards/<digest of its folder's URL>/<its name>`, the cache being `config.dataset.data_dir`
where set, else keras_vit's (`$KERAS_VIT_CACHE_DIR`, `$KERAS_HOME`, ~/.keras). fsspec reads the URL (its
HTTP file system needs aiohttp; `gs://` gcsfs, `s3://` s3fs: fsspec names the one missing). Beside each copy,
`<name>.source.json` records what the server said of the file (size, ETag or modification time): a copy is used
again only while the server still says the same, else it is fetched anew. A server that sends no ETag says only
the size and the modification time (HTTP's in whole seconds): a shard rewritten within the same second at the same
size (tar pads to 512-byte blocks) is not seen to change. A copy is written under a temporary name
and renamed into place, so a killed download leaves no partial shard.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from typing import List, Optional

from keras_vit.utils.cache_home import cache_home

SUFFIX = ".tar"
# what file systems say of a file that changes when it does: HTTP's headers, gcsfs', s3fs' and local fields
_VALIDATORS = (
    "size",
    "ETag",
    "Content-MD5",
    "Digest",
    "Last-Modified",
    "etag",
    "LastModified",
    "last_modified",
    "mtime",
    "md5Hash",
    "crc32c",
    "generation",
)


def is_url(path: str) -> bool:
    scheme, sep, _ = path.partition("://")
    return bool(sep) and scheme.isidentifier() and scheme != "file"


def expand(spec: str) -> List[str]:
    """The shard paths or URLs a spec names: a brace pattern's every expansion, in its order; else the spec."""
    if "{" not in spec:
        return [spec]
    try:
        from braceexpand import braceexpand
    except ImportError as e:
        raise ImportError(
            f"{spec!r} is a brace pattern: expanding it needs braceexpand (pip install braceexpand, or "
            "keras-vision-transformer[train])."
        ) from e
    shards = list(braceexpand(spec))
    if len(set(shards)) != len(shards):
        raise ValueError(f"caption shards {spec!r} name a shard twice.")
    return shards


def local_shards(spec: str, cache: Optional[str] = None) -> List[str]:
    """Absolute local paths of the `.tar` shards `spec` names (a brace pattern, or one path or URL; a folder is
    the caller's), remote ones copied into the cache first; a ValueError names a missing or non-`.tar` one."""
    shards = expand(spec)
    for shard in shards:
        if not shard.lower().endswith(SUFFIX):
            raise ValueError(f"caption shard {shard!r} (from {spec!r}) is not a .tar file.")
    remote = [s for s in shards if is_url(s)]
    if remote and len(remote) != len(shards):
        raise ValueError(f"caption shards {spec!r} mix URLs and local paths.")
    if not remote:
        missing = [s for s in shards if not os.path.isfile(s)]
        if missing:
            raise ValueError(
                f"caption shard {missing[0]!r} does not exist"
                + (
                    f" ({len(missing)} of the {len(shards)} shards of {spec!r} are missing)."
                    if len(shards) > 1
                    else "."
                )
            )
        return [os.path.abspath(s) for s in shards]
    return [_fetched(url, cache or cache_home()) for url in shards]


def _fetched(url: str, cache: str) -> str:
    import fsspec

    try:
        fs, path = fsspec.core.url_to_fs(url)
    except (ImportError, ValueError) as e:
        raise ValueError(f"caption shard {url!r} cannot be read: {e}") from e
    try:
        info = fs.info(path)
    except FileNotFoundError as e:
        raise ValueError(f"caption shard {url!r} does not exist.") from e
    except Exception as e:  # the file system's own errors (HTTP, credentials)
        raise ValueError(f"caption shard {url!r} cannot be read: {type(e).__name__}: {e}") from e
    said = {k: str(info[k]) for k in _VALIDATORS if info.get(k) is not None}
    folder_url, name = url.rsplit("/", 1)
    directory = os.path.join(cache, "caption_shards", hashlib.sha256(folder_url.encode()).hexdigest()[:16])
    local, record = os.path.join(directory, name), os.path.join(directory, name + ".source.json")
    if os.path.isfile(local) and _recorded(record) == {"url": url, **said}:
        return local
    os.makedirs(directory, exist_ok=True)
    handle, partial = tempfile.mkstemp(dir=directory, prefix=f".{name}.", suffix=".partial")
    os.close(handle)
    try:
        fs.get_file(path, partial)
        if "size" in said and os.path.getsize(partial) != int(info["size"]):
            raise ValueError(
                f"caption shard {url!r}: {os.path.getsize(partial)} bytes came, the server said {info['size']}."
            )
        os.replace(partial, local)
    except BaseException:
        if os.path.exists(partial):
            os.remove(partial)
        raise
    handle, partial = tempfile.mkstemp(dir=directory, prefix=f".{name}.source.", suffix=".partial")
    with os.fdopen(handle, "w") as f:
        json.dump({"url": url, **said}, f, indent=1)
    os.replace(partial, record)
    return local


def _recorded(record: str) -> Optional[dict]:
    try:
        with open(record) as f:
            value = json.load(f)
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None
