"""A record trtls refuses to read or lock is said as what it is, where it is (issue 27 item 19, tried again): a
checkout whose `.trtls/` carries a symlinked known-good record made `trtls engines` answer "no successful build
recorded yet" (exit 0, `[]` with --json) though `trtls rollback` said the record was not read; and `trtls gc` run in
the recipe's folder named a refused `.trtls/history.json.lock` as `.trtls/.trtls/history.json.lock`. Real `trtls`
processes, real symlinks."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def trtls(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "trtls", *args], capture_output=True, text=True, timeout=300, cwd=cwd)


def test_engines_says_the_known_good_record_was_not_read(workspace: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text('{"format": "trtls.known-good/1", "builds": []}')
    (workspace / ".trtls" / "engines").mkdir(parents=True)
    (workspace / ".trtls" / "engines" / "demo.json").symlink_to(elsewhere)
    for extra in ([], ["--json"]):
        done = trtls("engines", "demo", *extra, cwd=workspace)
        assert done.returncode == 1, done.stdout + done.stderr
        assert "no successful build recorded yet" not in done.stdout
        assert "was not read" in done.stderr and "demo.json: is a symlink" in done.stderr, done.stderr
        assert "Traceback" not in done.stderr


def test_gc_names_a_refused_lock_by_its_own_path(workspace: Path, tmp_path: Path) -> None:
    (workspace / ".trtls" / "runs").mkdir(parents=True)
    (workspace / ".trtls" / "history.json").write_text("{}")  # a history to prune: gc locks it first
    victim = tmp_path / "victim"
    victim.write_text("precious")
    (workspace / ".trtls" / "history.json.lock").symlink_to(victim)
    done = trtls("gc", cwd=workspace)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.startswith(".trtls/history.json.lock: TRT413 .trtls/history.json.lock: is a symlink"), (
        done.stderr
    )
    assert ".trtls/.trtls" not in done.stderr and victim.read_text() == "precious"
