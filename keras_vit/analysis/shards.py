"""The output of a batch-inference run: shards of a fixed number of images, each written whole, and a manifest
that is the run's record.

Shard k holds the results of images k·S .. (k+1)·S − 1 of the listing (S = `shard_size`), the unreadable ones
left out and named in the manifest with their error. Each shard is written to a temporary name and renamed,
then the manifest (rewritten the same way) records it with the size and SHA-256 of its files: a run killed at
any moment leaves every recorded shard whole, a resumed run starts at the first unrecorded one, so nothing is
written twice, and a recorded shard deleted or changed since is redone by a resumed run and refused by
`read_output`, naming it. The manifest is a `keras_vit.utils.records` record (kind `keras_vit.inference`).

Formats (results of `--features` are one vector, or one per patch, per image; of top-k, k class ids, names
and scores; of `--texts`, one vector per text, whose rows are keyed by a `text` column instead of `file`):
- `parquet`: `part-00000.parquet`, columns `file` and `embedding` (fixed-size lists), or `file`,
  `class_index`, `class_id`, `class_name`, `score` (lists of k; the id is the label set's, e.g. a WordNet
  id). Needs pyarrow.
- `npy`: `part-00000.npy`, (images, D) or (images, patches, D), and `part-00000.files.txt`; features only.
- `csv`: `part-00000.csv`, `file` then `f0..f{D-1}`, or `class_index_1, class_id_1, class_name_1, score_1, ...`; pooled
  features or top-k only.
"""

from __future__ import annotations

import csv
import hashlib
import io
import os
import warnings
from typing import Dict, List, Optional

import numpy as np

from keras_vit.utils import records
from keras_vit.utils.atomic import write_file

FORMATS = ("parquet", "npy", "csv")
DTYPES = ("float32", "float16")
MANIFEST = "manifest.json"
KIND, SCHEMA = "keras_vit.inference", 1
_FIELDS = {"settings": dict, "shards": list, "complete": bool}
SUFFIX = {"parquet": ".parquet", "npy": ".npy", "csv": ".csv"}
TOP_COLUMNS = ("class_index", "class_id", "class_name", "score")
_TEXT = ("file", "text", "class_id", "class_name")
KEYS = {"text": "text"}  # a task's row-key column; `file` for the others


def row_key(task: str) -> str:
    """The column that names each row of a run of `task`: the image's file, or the text itself."""
    return KEYS.get(task, "file")


def check_format(fmt: str, task: str, per_patch: bool) -> None:
    """A ValueError for a format that cannot hold the task's results."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown output format {fmt!r}; expected one of {', '.join(FORMATS)}.")
    if fmt == "npy" and task == "top":
        raise ValueError("format 'npy' holds feature arrays only: write top-k classes as parquet or csv.")
    if fmt == "csv" and per_patch:
        raise ValueError("format 'csv' holds one vector per image: write per-patch features as npy or parquet.")
    if fmt == "parquet":
        _pyarrow()


def _pyarrow():
    try:
        import pyarrow
        import pyarrow.parquet  # noqa: F401
    except ImportError:
        raise ImportError(
            "Parquet output needs pyarrow: pip install 'keras-vision-transformer[inference]' (or "
            "write --format=npy or csv)."
        ) from None
    return pyarrow


def shard_name(index: int, fmt: str) -> str:
    return f"part-{index:05d}{SUFFIX[fmt]}"


def _parquet_bytes(files: List[str], values: Dict[str, np.ndarray], key: str) -> bytes:
    pa = _pyarrow()
    columns = {key: pa.array(files, pa.string())}
    for key, array in values.items():
        if array.dtype.kind in "OU":
            column = pa.array([list(row) for row in array], pa.list_(pa.string()))
        else:
            column = pa.array(array.reshape(-1))
            for width in reversed(array.shape[1:]):
                column = pa.FixedSizeListArray.from_arrays(column, width)
        columns[key] = column
    buffer = io.BytesIO()
    pa.parquet.write_table(pa.table(columns), buffer)
    return buffer.getvalue()


def _csv_text(files: List[str], values: Dict[str, np.ndarray], key: str) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    if "embedding" in values:
        array = values["embedding"]
        writer.writerow([key, *(f"f{i}" for i in range(array.shape[1]))])
        for name, row in zip(files, array):
            writer.writerow([name, *(repr(float(v)) for v in row)])
        return out.getvalue()
    k = values["class_id"].shape[1]
    writer.writerow(["file", *(f"{c}_{r}" for r in range(1, k + 1) for c in TOP_COLUMNS)])
    for i, name in enumerate(files):
        cells = [name]
        for r in range(k):
            cells += [
                int(values["class_index"][i, r]),
                values["class_id"][i, r],
                values["class_name"][i, r],
                repr(float(values["score"][i, r])),
            ]
        writer.writerow(cells)
    return out.getvalue()


def shard_files(name: str, fmt: str) -> List[str]:
    """The files of the shard `name`: the shard, and for npy the list of its images."""
    return [name, name[: -len(".npy")] + ".files.txt"] if fmt == "npy" else [name]


def write_shard(
    directory: str, index: int, fmt: str, files: List[str], values: Dict[str, np.ndarray], key: str = "file"
) -> str:
    """Writes shard `index` whole (temporary name, then rename); returns its file name. `files`: each row's name
    (an image's file, or a text: `key` says which column holds them; no name may hold a line break)."""
    name = shard_name(index, fmt)
    path = os.path.join(directory, name)
    if fmt == "parquet":
        write_file(path, _parquet_bytes(files, values, key))
    elif fmt == "csv":
        write_file(path, _csv_text(files, values, key).encode("utf-8"))
    else:
        buffer = io.BytesIO()
        np.save(buffer, values["embedding"], allow_pickle=False)
        write_file(path[: -len(".npy")] + ".files.txt", "".join(f + "\n" for f in files).encode("utf-8"))
        write_file(path, buffer.getvalue())
    return name


def read_manifest(directory: str) -> Optional[dict]:
    """The run's manifest, checked (`keras_vit.utils.records.read_record`: kind, schema, fields, each shard's
    entry), or None where the folder has none."""
    path = os.path.join(directory, MANIFEST)
    manifest = records.read_record(path, KIND, SCHEMA, _FIELDS)
    if manifest is None:
        return None
    for i, shard in enumerate(manifest["shards"]):
        ok = isinstance(shard, dict) and all(
            isinstance(shard.get(k), t) for k, t in (("file", str), ("rows", int), ("bad", list), ("files", dict))
        )
        if not ok:
            raise ValueError(f"{path!r}: shard entry {i} lacks file, rows, bad or files, or has them mistyped.")
    return manifest


def write_manifest(directory: str, manifest: dict) -> None:
    body = {k: v for k, v in manifest.items() if k not in ("kind", "schema")}
    records.write_record(os.path.join(directory, MANIFEST), KIND, SCHEMA, body)


def add_shard(
    output: str,
    manifest: dict,
    fmt: str,
    first: int,
    inputs: Dict[str, int],
    names: List[str],
    values: Optional[Dict[str, np.ndarray]],
    bad: Optional[List[dict]] = None,
    key: str = "file",
) -> None:
    """Writes the shard of the inputs from `first` (`inputs`: {"images" or "texts": how many}; `names` and
    `values`: its rows, none when every input failed) and records it, with the files vouched for and the failed
    inputs (`bad`), in the manifest, which is rewritten: a killed run resumes after it."""
    index = len(manifest["shards"])
    name = write_shard(output, index, fmt, names, values, key) if values else ""
    manifest["shards"].append(
        dict(
            file=name,
            first=first,
            **inputs,
            rows=len(names),
            bad=list(bad or []),
            files=records.vouch(output, shard_files(name, fmt)) if name else {},
        )
    )
    write_manifest(output, manifest)


def complete(output: str, manifest: dict) -> dict:
    """Marks the output finished (its manifest rewritten) and returns the manifest."""
    manifest["complete"] = True
    write_manifest(output, manifest)
    return manifest


def _read_shard(name: str, fmt: str, data: Dict[str, bytes], key: str) -> Dict[str, np.ndarray]:
    """The shard `name`'s arrays, parsed from `data` ({file name: bytes}, as checked against the manifest)."""
    if fmt == "npy":  # one name per "\n" (not str.splitlines, which also breaks at \r, \x1c, \u2028, ...)
        files = data[name[: -len(".npy")] + ".files.txt"].decode("utf-8").split("\n")[:-1]
        embedding = np.load(io.BytesIO(data[name]), allow_pickle=False)
        return {key: np.asarray(files, dtype=object), "embedding": embedding}
    if fmt == "parquet":
        pa = _pyarrow()
        table = pa.parquet.read_table(pa.BufferReader(data[name]))
        out = {}
        for key in table.column_names:
            column = table.column(key).combine_chunks()
            out[key] = np.asarray(column.to_pylist(), dtype=object if key in _TEXT else None)
        return out
    rows = list(csv.reader(io.StringIO(data[name].decode("utf-8"), newline="")))
    header, body = rows[0], rows[1:]
    files = np.asarray([r[0] for r in body], dtype=object)
    if header[1] == "f0":
        return {key: files, "embedding": np.asarray([[float(v) for v in r[1:]] for r in body], "float32")}
    k, n = (len(header) - 1) // len(TOP_COLUMNS), len(TOP_COLUMNS)
    cell = lambda j: [[r[1 + n * i + j] for i in range(k)] for r in body]  # noqa: E731
    return {
        "file": files,
        "class_index": np.asarray(cell(0), "int64").reshape(-1, k),
        "class_id": np.asarray(cell(1), object).reshape(-1, k),
        "class_name": np.asarray(cell(2), object).reshape(-1, k),
        "score": np.asarray(cell(3), "float32").reshape(-1, k),
    }


def read_output(directory: str) -> Dict[str, np.ndarray]:
    """A run's results, every recorded shard in order, as arrays: `file` and `embedding`, or `file`,
    `class_id`, `class_name`, `score` (a text run: `text` and `embedding`); plus `bad`: the images that could not
    be read, with their errors."""
    manifest = read_manifest(directory)
    if manifest is None:
        raise ValueError(f"{directory!r} holds no {MANIFEST}: not a keras_vit inference output.")
    key = row_key(manifest["settings"].get("task", ""))
    parts = []
    for s in manifest["shards"]:
        reason, data = records.read_vouched(directory, s["files"])
        if reason:
            raise ValueError(f"{directory!r}: {reason}; rerun the inference command to redo it.")
        if s["file"]:
            fmt = manifest["settings"]["format"]
            unvouched = [name for name in shard_files(s["file"], fmt) if name not in data]
            if unvouched:
                raise ValueError(f"{directory!r}: {MANIFEST} records {unvouched[0]} without its hash.")
            part = _read_shard(s["file"], fmt, data, key)
            if len(part[key]) != s["rows"]:
                raise ValueError(
                    f"{directory!r}: {s['file']} holds {len(part[key])} rows, its manifest entry {s['rows']}."
                )
            parts.append(part)
    out = {key: np.concatenate([p[key] for p in parts]) for key in parts[0]} if parts else {}
    out["bad"] = [dict(b) for s in manifest["shards"] for b in s["bad"]]
    return out


def check_settings(dtype: str, batch_size: int, shard_size: Optional[int], top: int = 1) -> None:
    """A ValueError naming the first of a run's common settings out of range."""
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}; got {dtype!r}.")
    for name, value in (("top", top), ("batch_size", batch_size), ("shard_size", shard_size)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ValueError(f"{name} must be an integer >= 1; got {value!r}.")


def embedding_columns(outputs: np.ndarray, dtype: str, l2: bool) -> Dict[str, np.ndarray]:
    """One shard's `embedding` column, scaled to unit length when `l2`."""
    if l2:
        outputs = outputs / np.maximum(np.linalg.norm(outputs, axis=-1, keepdims=True), 1e-12)
    return {"embedding": outputs.astype(dtype)}


def weights_digest(model) -> str:
    """sha256 of every weight's bytes: which model made an output (a resumed run must be the same one)."""
    digest = hashlib.sha256()
    for weight in model.weights:
        digest.update(weight.path.encode())
        digest.update(np.ascontiguousarray(np.asarray(weight.numpy())).tobytes())
    return digest.hexdigest()


def run_settings(task: str, fmt: str, dtype: str, l2: bool, shard_size: int, weights, model) -> dict:
    """The settings every output records, whatever it embeds: its task, format, dtype, normalisation, shard size,
    the weights it was given and the digest of `model`'s (a resume under any other is refused by name)."""
    return dict(
        task=task,
        format=fmt,
        dtype=dtype,
        l2_normalize=bool(l2),
        shard_size=shard_size,
        weights=weights,
        weights_sha256=weights_digest(model),
    )


def open_output(output: str, settings: dict) -> dict:
    """The manifest to continue: a new one for a new or empty folder, the recorded one when it was made with
    the same settings; a folder of other files, or of another run, is refused naming the difference."""
    manifest = read_manifest(output) if os.path.isdir(output) else None
    if manifest is None:
        if os.path.isdir(output) and os.listdir(output):
            raise ValueError(
                f"--output={output!r} holds other files and no {MANIFEST}: use a new or empty "
                "folder (nothing there was changed)."
            )
        os.makedirs(output, exist_ok=True)
        return dict(settings=settings, shards=[], complete=False)
    records.check_same(os.path.join(output, MANIFEST), "run", manifest["settings"], settings)
    for i, shard in enumerate(manifest["shards"]):  # recorded shards deleted or changed since: redone from there
        reason = records.changed(output, shard["files"])
        if reason:
            warnings.warn(f"--output={output!r}: {reason}; redoing shard {i} and those after it.", stacklevel=3)
            manifest["shards"], manifest["complete"] = manifest["shards"][:i], False
            break
    return manifest
