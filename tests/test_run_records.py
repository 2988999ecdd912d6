"""The recipes' workdir records (`run_config.json`, `dataset.json`, `decode_check.json`) are
`keras_vit.utils.records` records: stamped with their kind and schema, and refused naming the file and the field
when truncated, foreign, of an earlier build or edited to another type; a refusal changes no file."""

import json
import types

import pytest

from recipes import folder
from recipes.configs import demo
from recipes.trainer import dataset_record, run_record


def _split(tmp_path) -> folder.FolderSplit:
    return folder.FolderSplit(str(tmp_path / "images"), ("a", "b"), ["a/1.png", "b/2.png"], [0, 1], [10, 20], [1, 2])


def _broken(record: dict) -> dict:
    """{case: file text} of what a record can be instead of itself, with the refusal each gets."""
    return {
        "truncated": (json.dumps(record)[:25], "truncated or not JSON"),
        "a list": (json.dumps([record]), "holds a JSON list"),
        "an earlier build's": (json.dumps({k: v for k, v in record.items() if k not in ("kind", "schema")}), "earlier"),
        "another tool's": (json.dumps(dict(record, kind="something.else")), "another tool"),
    }


def test_the_run_record_is_stamped_and_checked(tmp_path):
    config = demo.get_config("pretrain")
    run_record.after_restore(config, str(tmp_path), "tensorflow", 10, None)  # a fresh run writes its record
    path = tmp_path / run_record.RUN_CONFIG
    record = json.loads(path.read_text())
    assert (record["kind"], record["schema"], record["engine"], record["steps_total"]) == (
        "keras_vit.run",
        1,
        "tensorflow",
        10,
    )
    run_record.prepare(config, str(tmp_path), "tensorflow")  # the same command resumes
    for case, (text, says) in _broken(record).items():
        path.write_text(text)
        with pytest.raises(ValueError, match=says) as caught:
            run_record.prepare(config, str(tmp_path), "tensorflow")
        assert run_record.RUN_CONFIG in str(caught.value) and "--config.restart=True" in str(caught.value), case
        assert path.read_text() == text, case  # refused, not rewritten
    path.write_text(json.dumps(dict(record, steps_total="ten")))
    with pytest.raises(ValueError, match="field 'steps_total' of the keras_vit.run record is a str"):
        run_record.prepare(config, str(tmp_path), "tensorflow")


def test_the_dataset_and_decode_check_records_are_stamped_and_checked(tmp_path):
    split = _split(tmp_path)
    source = types.SimpleNamespace(
        fingerprint=split.fingerprint(),
        class_names=split.class_names,
        num_examples=2,
        skipped=[],
        check=folder.check_record(split, ["b/2.png"]),
    )
    config = demo.get_config("pretrain")
    config.dataset.name = f"folder:{split.directory}"
    dataset_record.record_folder(config, source, str(tmp_path))
    dataset = json.loads((tmp_path / dataset_record.DATASET_RECORD).read_text())
    check = json.loads((tmp_path / folder.CHECK_RECORD).read_text())
    assert (dataset["kind"], check["kind"]) == ("keras_vit.dataset", "keras_vit.decode_check")
    assert folder.read_check_record(str(tmp_path), split) == ["b/2.png"]
    touched = folder.FolderSplit(split.directory, split.class_names, split.files, split.labels, split.sizes, [1, 3])
    assert folder.read_check_record(str(tmp_path), touched) is None  # a file rewritten since: decoded again
    dataset_record.record_folder(config, source, str(tmp_path))  # the same folder again: accepted
    for name, record, read in (
        (dataset_record.DATASET_RECORD, dataset, lambda: dataset_record.record_folder(config, source, str(tmp_path))),
        (folder.CHECK_RECORD, check, lambda: folder.read_check_record(str(tmp_path), split)),
    ):
        path = tmp_path / name
        for case, (text, says) in _broken(record).items():
            path.write_text(text)
            with pytest.raises(ValueError, match=says) as caught:
                read()
            assert name in str(caught.value), (name, case)
            assert path.read_text() == text, (name, case)
        path.write_text(json.dumps(record))
    (tmp_path / folder.CHECK_RECORD).write_text(json.dumps(dict(check, undecodable="b/2.png")))
    with pytest.raises(ValueError, match="field 'undecodable' of the keras_vit.decode_check record is a str"):
        folder.read_check_record(str(tmp_path), split)
    (tmp_path / dataset_record.DATASET_RECORD).write_text(json.dumps(dict(dataset, fingerprint=None)))
    with pytest.raises(ValueError, match="field 'fingerprint' of the keras_vit.dataset record is a NoneType"):
        dataset_record.record_folder(config, source, str(tmp_path))
