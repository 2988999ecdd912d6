"""recipes.atomic: whole files or nothing."""

import json

import pytest

from recipes import atomic


def test_text_bytes_and_json_round_trip(tmp_path):
    atomic.write_atomic(str(tmp_path / "a.txt"), "héllo\n")
    atomic.write_atomic(str(tmp_path / "b.bin"), b"\x00\x01\xff")
    atomic.write_json(str(tmp_path / "c.json"), {"b": 1, "a": [1.5, None]})
    assert (tmp_path / "a.txt").read_text(encoding="utf-8") == "héllo\n"
    assert (tmp_path / "b.bin").read_bytes() == b"\x00\x01\xff"
    assert json.loads((tmp_path / "c.json").read_text()) == {"a": [1.5, None], "b": 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "b.bin", "c.json"]  # no temp files left


def test_failed_write_keeps_the_previous_file(tmp_path):
    path = str(tmp_path / "summary.json")
    atomic.write_json(path, {"step": 1})
    with pytest.raises(TypeError):
        atomic.write_json(path, {"step": object()})  # not serialisable: fails before anything is written
    assert json.loads(open(path).read()) == {"step": 1}
