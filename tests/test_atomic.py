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


def test_write_with_copies_whole_files_and_leaves_nothing_on_failure(tmp_path):
    path = str(tmp_path / "model.keras")
    atomic.write_with(path, lambda local: open(local, "wb").write(b"v1"), suffix=".keras")
    assert open(path, "rb").read() == b"v1"

    def crash(local):
        open(local, "wb").write(b"half")
        raise RuntimeError("killed mid-save")

    with pytest.raises(RuntimeError, match="killed mid-save"):
        atomic.write_with(path, crash, suffix=".keras")
    assert open(path, "rb").read() == b"v1" and sorted(p.name for p in tmp_path.iterdir()) == ["model.keras"]


def test_keras_vit_atomic_files_and_directories(tmp_path):
    from keras_vit.utils import atomic as local

    path = tmp_path / "sub" / "w.npz"
    local.write_file(path, b"old")
    with pytest.raises(RuntimeError):
        local.write_file(path, lambda tmp: (open(tmp, "wb").write(b"half"), (_ for _ in ()).throw(RuntimeError())))
    assert path.read_bytes() == b"old" and [p.name for p in path.parent.iterdir()] == ["w.npz"]
    out = tmp_path / "module"
    local.write_directory(out, lambda d: open(f"{d}/a.txt", "w").write("1"))
    with pytest.raises(FileExistsError, match="pass overwrite=True"):
        local.write_directory(out, lambda d: None)
    local.write_directory(out, lambda d: open(f"{d}/b.txt", "w").write("2"), overwrite=True)
    assert sorted(p.name for p in out.iterdir()) == [local.MANIFEST, "b.txt"]  # the writer's own list
    with pytest.raises(FileExistsError, match="not an earlier output of ours"):
        local.write_directory(out, lambda d: None, overwrite=True, replaceable=lambda p: False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["module", "sub"]  # no .tmp-/.old- entries left


@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_written_files_and_directories_follow_the_umask(tmp_path, umask):
    """Exports read by a serving process of another user: the modes any other tool's files get (0644 / 0755 under
    umask 022), not the temporaries' 0600 / 0700."""
    import os
    import stat

    from keras_vit.utils import atomic as library_atomic

    before = os.umask(umask)
    try:
        file = library_atomic.write_file(tmp_path / "card.md", "x")
        folder = library_atomic.write_directory(
            tmp_path / "export", lambda d: open(os.path.join(d, "model.onnx"), "w").write("m")
        )
        recipes_file = atomic.write_json(str(tmp_path / "summary.json"), {})
    finally:
        os.umask(before)
    assert stat.S_IMODE(os.stat(file).st_mode) == 0o666 & ~umask
    assert stat.S_IMODE(os.stat(folder).st_mode) == 0o777 & ~umask
    assert stat.S_IMODE(os.stat(os.path.join(folder, "model.onnx")).st_mode) == 0o666 & ~umask
    assert stat.S_IMODE(os.stat(recipes_file).st_mode) == 0o666 & ~umask
