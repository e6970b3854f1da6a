"""The path primitives every writer shares (`trtls.core.paths`) and the atomic writer that never follows a symlink.

Real files and real symlinks in a temp folder; each test fails on the code before issue 22 (`Path.resolve()` followed
the final symlink; the writer opened its temp file with mkstemp in the symlink's target folder and renamed over it).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from trtls.builds.artifacts import output_unwritable, write_engine
from trtls.core.paths import MAX_NAME, is_safe_name, place, safe_name
from trtls.core.recipe import load_recipe
from trtls.fs import Kind, UnsafeWrite, atomic_write_bytes, atomic_write_text


@pytest.mark.parametrize(
    "name", ["../../tmp/x/PWNED", "..", ".", "", "a/b", "a\\b", "\0", "ü" * 300, "x" * 500, ".hidden", "a b"]
)
def test_safe_name_is_one_harmless_component(name: str) -> None:
    out = safe_name(name)
    assert out and "/" not in out and "\\" not in out and "\0" not in out
    assert out not in (".", "..") and not out.startswith(".")
    assert len(out) <= MAX_NAME
    assert not is_safe_name(name)


def test_safe_name_keeps_safe_names_and_long_names_stay_distinct() -> None:
    for name in ("demo", "SM89-o3", "fp16", "a.b_c-d"):
        assert safe_name(name) == name and is_safe_name(name)
    assert safe_name("x" * 200 + "1") != safe_name("x" * 200 + "2")


def test_place_keeps_a_final_symlink_and_resolves_folders(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "precious.bin").write_bytes(b"precious")
    folder = tmp_path / "recipe"
    (folder / "build").mkdir(parents=True)
    (folder / "build" / "demo.engine").symlink_to(elsewhere / "precious.bin")
    (folder / "linked").symlink_to(elsewhere)
    assert place(folder, "build/demo.engine") == folder / "build" / "demo.engine"
    assert place(folder, "linked/x.engine") == elsewhere / "x.engine"
    assert place(folder, "build/../build/demo.engine") == folder / "build" / "demo.engine"
    loaded = load_recipe(folder / "trtls.toml", "")
    assert loaded.resolve("build/demo.engine") == folder / "build" / "demo.engine"  # was precious.bin
    with pytest.raises(ValueError):
        place(folder, "a\0b")


def test_atomic_writer_refuses_a_symlinked_target_and_leaves_both_files(tmp_path: Path) -> None:
    precious = tmp_path / "precious.bin"
    precious.write_bytes(b"precious")
    link = tmp_path / "out.bin"
    link.symlink_to(precious)
    with pytest.raises(UnsafeWrite):
        atomic_write_bytes(link, b"new", kind=Kind.evidence, within=tmp_path)
    assert precious.read_bytes() == b"precious" and link.is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.bin", "precious.bin"]  # no temp left anywhere


def test_atomic_writer_stays_within_a_folder(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    folder = tmp_path / "recipe"
    folder.mkdir()
    (folder / "runs").symlink_to(outside)
    with pytest.raises(UnsafeWrite):
        atomic_write_text(folder / "runs" / "summary.json", "{}", kind=Kind.evidence, within=folder)
    assert list(outside.iterdir()) == []
    atomic_write_text(folder / "summary.json", "{}", kind=Kind.evidence, within=folder)
    assert (folder / "summary.json").read_text() == "{}"


def test_atomic_writer_never_opens_a_planted_temp_name(tmp_path: Path) -> None:
    precious = tmp_path / "precious.bin"
    precious.write_bytes(b"precious")
    out = tmp_path / "demo.engine"
    (tmp_path / "demo.engine.trtls-tmp-b1").symlink_to(precious)  # planted where the engine's temp file goes
    with pytest.raises(OSError):
        write_engine(out, "b1", b"engine")
    assert precious.read_bytes() == b"precious" and not out.exists()


def test_write_engine_replaces_within_the_real_folder(tmp_path: Path) -> None:
    real_build = tmp_path / "real-build"
    real_build.mkdir()
    (tmp_path / "build").symlink_to(real_build)
    size, sha = write_engine(tmp_path / "build" / "demo.engine", "b2", b"engine-bytes")
    assert size == 12 and (real_build / "demo.engine").read_bytes() == b"engine-bytes"
    assert oct((real_build / "demo.engine").stat().st_mode & 0o777) == oct(0o644)
    assert [p.name for p in real_build.iterdir()] == ["demo.engine"]


def test_write_probe_refuses_a_symlinked_output(tmp_path: Path) -> None:
    precious = tmp_path / "precious.bin"
    precious.write_bytes(b"precious")
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / "demo.engine").symlink_to(precious)
    why = output_unwritable(tmp_path / "build" / "demo.engine", "b3")
    assert why is not None and "symlink" in why
    assert precious.read_bytes() == b"precious"
    assert os.listdir(tmp_path / "build") == ["demo.engine"]


def test_matrix_cells_are_named_by_the_one_sanitiser() -> None:
    from trtls.core.farm import Matrix, expand

    m = Matrix(
        output="build/{engine}-{precision}.engine", precision={"../../../../x/PWNED": "m.onnx", "fp16": "n.onnx"}
    )
    cells = expand("demo", m, None)
    assert [c.name for c in cells] == [safe_name("../../../../x/PWNED"), "fp16"]
    assert all(is_safe_name(c.name) for c in cells) and all(".." not in Path(c.output).parts for c in cells)
