"""The acceptance run makes its hostile states through the door: scratch copies by `fs.copy_tree` (the user's folder
only read, a symlink copied as a link, a FIFO skipped instead of hanging or failing the copy), deletes only in the
scratch folder the run made, and a SIGKILL only to a worker this process started."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from trtls.accept import runner
from trtls.accept.stop_scenarios import _sigkill_worker
from trtls.core.paths import UnsafeWrite
from trtls.fs import scratch_dir


def _template(tmp_path: Path) -> tuple[Path, Path]:
    """A recipe folder with a model, a symlink to a file outside it and a FIFO; and that outside file."""
    outside = tmp_path / "outside.bin"
    outside.write_bytes(b"the user's other file")
    template = tmp_path / "template"
    (template / "models").mkdir(parents=True)
    (template / "trtls.toml").write_text('[engines.demo]\nonnx = "models/demo.onnx"\noutput = "build/demo.engine"\n')
    (template / "models" / "demo.onnx").write_bytes(b"model bytes")
    os.utime(template / "models" / "demo.onnx", ns=(1_000_000_000, 1_000_000_000))
    (template / "models" / "linked.bin").symlink_to(outside)
    os.mkfifo(template / "models" / "pipe")
    return template, outside


def test_a_scenario_copy_keeps_links_as_links_and_skips_a_fifo(tmp_path: Path) -> None:
    template, outside = _template(tmp_path)
    scratch = scratch_dir(prefix="accept-", parent=tmp_path)
    ctx = runner.Context(template / "trtls.toml", "demo", scratch, template)
    ws = runner.workspace(ctx, "one")
    assert (ws / "models" / "demo.onnx").read_bytes() == b"model bytes"
    assert (ws / "models" / "demo.onnx").stat().st_mtime_ns == 1_000_000_000, "a copy keeps its times"
    assert os.readlink(ws / "models" / "linked.bin") == str(outside), "a link is copied as a link, not followed"
    assert not (ws / "models" / "pipe").exists(), "a FIFO is left out (reading it would hang)"
    ws2 = runner.workspace(ctx, "one")  # again: the old copy is removed inside the run's scratch folder
    assert ws2 == ws and outside.read_bytes() == b"the user's other file"
    assert (template / "models" / "pipe").exists() and (template / "models" / "linked.bin").is_symlink()


def test_a_scenario_folder_is_removed_only_inside_a_scratch_folder_the_run_made(tmp_path: Path) -> None:
    template, _ = _template(tmp_path)
    not_ours = tmp_path / "not-ours"
    (not_ours / "one").mkdir(parents=True)
    (not_ours / "one" / "keep.txt").write_text("a user's file")
    ctx = runner.Context(template / "trtls.toml", "demo", not_ours, template)
    with pytest.raises(UnsafeWrite, match="not made by trtls"):
        runner.workspace(ctx, "one")
    assert (not_ours / "one" / "keep.txt").read_text() == "a user's file"


def test_a_worker_sigkill_reaches_only_a_process_this_one_started(tmp_path: Path) -> None:
    """A pid that is not a descendant (here a daemon re-parented away from us) is refused, and lives on."""
    code = (
        "import os, sys, time\n"
        "if os.fork(): sys.exit(0)\n"
        "os.setsid()\n"
        "print(os.getpid(), flush=True)\n"
        "os.close(1); os.close(2)\n"  # the output ends here: run() returns once the first parent has exited
        "time.sleep(120)\n"
    )
    pid = int(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, timeout=60).stdout)
    try:
        with pytest.raises(RuntimeError, match="not a worker this process started"):
            _sigkill_worker(SimpleNamespace(state=SimpleNamespace(pid=pid)), None, None)  # type: ignore[arg-type]
        assert runner.process_alive(pid)
    finally:
        os.kill(pid, signal.SIGKILL)


def test_a_copy_into_its_own_source_is_refused_before_anything_is_made(tmp_path: Path) -> None:
    """The door's rule for every copy: `copy_tree(folder, folder/…)` copied its own copy at every level (266 levels
    of the user's models) until a name was too long."""
    from trtls.fs.copy_tree import copy_tree

    template, _ = _template(tmp_path)
    with pytest.raises(UnsafeWrite, match="never a copy into itself"):
        copy_tree(template, template / "scratch" / "template", within=template)
    assert not (template / "scratch").exists()


def _accept(recipe_folder: Path, scratch: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "trtls", "accept", str(recipe_folder), "--engine", "demo", "--scratch", scratch]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


def test_accept_refuses_a_scratch_folder_it_cannot_use_with_one_line_and_writes_nothing(
    quickstart_models: Path, tmp_path: Path
) -> None:
    """`--scratch .` inside the recipe's folder (the copy would go into itself), a folder that does not exist, a FIFO:
    exit 2, one located line, no traceback, nothing made in the recipe's folder."""
    import shutil

    ws = tmp_path / "ws"
    shutil.copytree(quickstart_models.parent, ws, ignore=shutil.ignore_patterns(".trtls", "build"))
    before = sorted(p.relative_to(ws) for p in ws.rglob("*"))
    os.mkfifo(tmp_path / "pipe")
    for scratch, said in (
        (str(ws), "is inside the recipe folder"),
        (str(ws / "models"), "is inside the recipe folder"),
        (str(tmp_path / "missing"), "No such file or directory"),
        (str(tmp_path / "pipe"), "Not a directory"),
    ):
        done = _accept(ws, scratch)
        assert done.returncode == 2, done.stdout + done.stderr
        assert "Traceback" not in done.stderr and said in done.stderr, done.stderr
        assert sorted(p.relative_to(ws) for p in ws.rglob("*")) == before
