"""An engine's `output` replaces only an engine or an empty file (a red-team find: `output = "notes.md"` passed
`trtls check` and `trtls build` replaced the user's notes with the engine, exit 0).

One rule (`fs.kinds.engine_replace_refusal`: empty, or the first bytes of a serialized TensorRT plan, b"vtrt" for
TensorRT-RTX, b"ftrt" for full TensorRT), said in two places: the door refuses the rename of every engine write
(a build, a restore, a rollback) through the folder descriptor it holds, and the recipe check says it first, TRT123
on the engine's `output` key. Real `trtls` processes and a real TensorRT-RTX build for the CLI half.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.builds.helpers import leftovers, run_build
from tests.lsp.lsp_helpers import write_static_onnx
from trtls.builds.artifacts import write_engine
from trtls.core.paths import UnsafeWrite
from trtls.fs import Kind, atomic_write_bytes, atomic_writer, rename
from trtls.fs.kinds import engine_replace_refusal

RECIPE = """\
[engines.demo]
onnx = "models/demo.onnx"
output = "{output}"
"""
NOTES = b"my\n\x1b[31m\x00\xff notes, and more of them"


def trtls(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "trtls", *args], cwd=cwd, capture_output=True, text=True, timeout=300)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "models").mkdir(parents=True)
    write_static_onnx(root / "models" / "demo.onnx")
    return root


def test_the_rule_accepts_an_engine_or_an_empty_file_and_shows_anything_else_escaped() -> None:
    for head in (b"", b"vtrt\0\0\0\0\x02", b"ftrt\0\0\0\0"):
        assert engine_replace_refusal(head) is None
    why = engine_replace_refusal(NOTES)
    assert why is not None and "not a TensorRT engine" in why and "move the file or name another output" in why
    assert "starts with 'my\\n\\x1b[31m\\x00\\xff notes'" in why  # its first 16 bytes, escaped
    assert why.isprintable()
    assert "cannot be read" in (engine_replace_refusal(None) or "")
    assert engine_replace_refusal(b"vt") is not None  # a short file is no plan


def test_the_door_refuses_an_engine_write_over_a_users_file(tmp_path: Path) -> None:
    notes = tmp_path / "notes.md"
    notes.write_bytes(NOTES)
    with pytest.raises(UnsafeWrite) as exc:
        write_engine(notes, "b1", memoryview(b"vtrt a new engine"), within=tmp_path)
    assert exc.value.filename == str(notes) and "not a TensorRT engine" in (exc.value.strerror or "")
    with pytest.raises(UnsafeWrite):  # a restore or a rollback writes through the same door
        atomic_write_bytes(notes, b"vtrt restored", kind=Kind.engine_output, within=tmp_path)
    assert notes.read_bytes() == NOTES
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.md"]  # no temp left behind


def test_the_door_judges_the_target_again_right_before_the_rename(tmp_path: Path) -> None:
    out = tmp_path / "demo.engine"
    with pytest.raises(UnsafeWrite), atomic_writer(out, kind=Kind.engine_output, within=tmp_path) as fh:
        fh.write(b"vtrt the engine")
        out.write_bytes(NOTES)  # the user saved a file there while the engine was written
    assert out.read_bytes() == NOTES
    assert sorted(p.name for p in tmp_path.iterdir()) == ["demo.engine"]


def test_the_door_replaces_an_engine_or_an_empty_file(tmp_path: Path) -> None:
    for name, old in (("a.engine", b"vtrt\0\0\0\0old"), ("b.engine", b"ftrt\0\0\0\0old"), ("c.engine", b"")):
        out = tmp_path / name
        out.write_bytes(old)
        write_engine(out, "b1", memoryview(b"vtrt new"), within=tmp_path)
        assert out.read_bytes() == b"vtrt new"


def test_a_rename_of_an_engine_output_obeys_the_same_rule(tmp_path: Path) -> None:
    src = tmp_path / "demo.engine.trtls-tmp-b1"
    src.write_bytes(b"vtrt new")
    notes = tmp_path / "notes.md"
    notes.write_bytes(NOTES)
    with pytest.raises(UnsafeWrite):
        rename(src, notes, kind=Kind.engine_output, within=tmp_path)
    assert notes.read_bytes() == NOTES and src.exists()


def test_check_and_build_refuse_an_output_over_a_users_file_on_the_output_key(ws: Path) -> None:
    (ws / "trtls.toml").write_text(RECIPE.format(output="notes.md"))
    (ws / "notes.md").write_bytes(NOTES)
    for args in (("check",), ("build", "--no-store"), ("build",)):
        r = trtls(*args, cwd=ws)
        assert r.returncode == 2, r.stdout + r.stderr
        said = r.stdout + r.stderr
        line = next(x for x in said.splitlines() if "TRT123" in x)
        assert line.startswith(f"{ws / 'trtls.toml'}:3:10: TRT123 error: the output of engine 'demo'"), line
        assert f"{ws / 'notes.md'}" in line and "\\x1b[31m" in line and "\x1b" not in said
        assert (ws / "notes.md").read_bytes() == NOTES
    assert not (ws / ".trtls" / "runs").exists() or not any((ws / ".trtls" / "runs").iterdir())


def test_a_build_replaces_its_own_engine_and_an_empty_file(ws: Path) -> None:
    (ws / "trtls.toml").write_text(RECIPE.format(output="build/demo.engine"))
    engine = ws / "build" / "demo.engine"
    for _ in range(2):  # the normal case: the second build replaces the first's engine
        r = trtls("build", "--no-store", cwd=ws)
        assert r.returncode == 0, r.stdout + r.stderr
        assert engine.read_bytes()[:4] in (b"vtrt", b"ftrt")
    engine.write_bytes(b"")
    r = trtls("build", "--no-store", cwd=ws)
    assert r.returncode == 0, r.stdout + r.stderr
    assert engine.read_bytes()[:4] in (b"vtrt", b"ftrt")
    assert trtls("check", cwd=ws).returncode == 0


async def test_a_file_saved_at_the_output_during_the_build_fails_it_located_and_is_kept(workspace: Path) -> None:
    """The check passed (no file there); the user saves one before the worker's commit: the door refuses the rename,
    the build fails saying why, and the user's file is untouched."""
    engine = workspace / "build" / "demo.engine"

    def save(build: object, ev: object) -> None:
        if ev is not None and getattr(ev, "type", None) == "builder_returned":
            engine.parent.mkdir(parents=True, exist_ok=True)
            engine.write_bytes(NOTES)

    sup, build = await run_build(workspace, faults={"commit_delay_s": 1.0})
    build.listeners.append(save)
    s = await build.wait()
    assert s.outcome == "failed" and "cannot write engine" in s.error and "not a TensorRT engine" in s.error
    assert str(engine) in s.error and "\\x1b[31m" in s.error
    assert engine.read_bytes() == NOTES and leftovers(workspace) == []
