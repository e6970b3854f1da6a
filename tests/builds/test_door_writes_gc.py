"""`trtls gc` deletes only run folders trtls made in this recipe's folder (issue 27, item 5): never through a
symlinked `.trtls` or `.trtls/runs` (another project's runs were removed under this project's bounds), never a
folder whose name is not a build id trtls makes, and never through a `runs` swapped for a symlink between the scan
and the removal. Real folders, real symlinks, the real `trtls gc` process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from trtls.builds.supervisor import retention

DAY = 86400.0


def _gc(folder: Path, *args: str) -> tuple[int, dict, str]:
    done = subprocess.run(
        [sys.executable, "-m", "trtls", "gc", str(folder), "--json", "--keep-runs", "1", *args],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, json.loads(done.stdout), done.stderr


def _runs(trtls_dir: Path, n: int, age_days: float = 90) -> list[Path]:
    """`n` finished run folders as trtls writes them (a build id, a summary with its date), all past the bounds."""
    made = []
    for i in range(n):
        run = trtls_dir / "runs" / f"demo-20260101-{i:06d}-{i:06x}"
        run.mkdir(parents=True)
        summary = {
            "buildId": run.name,
            "engine": "demo",
            "outcome": "failed",
            "startedAt": time.time() - age_days * DAY,
        }
        (run / "summary.json").write_text(json.dumps(summary))
        (run / "events.jsonl").write_text("{}\n" * 100)
        made.append(run)
    return made


def _project(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / "trtls.toml").write_text("")
    return root


@pytest.mark.parametrize("linked", [".trtls", ".trtls/runs"])
def test_gc_never_follows_a_symlinked_state_folder_into_another_project(tmp_path: Path, linked: str) -> None:
    other = _project(tmp_path / "other")
    theirs = _runs(other / ".trtls", 5)
    here = _project(tmp_path / "here")
    (here / linked).parent.mkdir(parents=True, exist_ok=True)
    (here / linked).symlink_to(other / linked)
    code, result, _ = _gc(here)
    assert all(run.is_dir() for run in theirs), "gc deleted another project's runs through a symlink"
    assert result["removed"] == []
    refused = result["refused"]
    assert refused["code"] == "TRT118" and refused["path"].endswith(linked), refused
    assert "symlink" in refused["message"] and str(other / linked) in refused["message"]


def test_gc_removes_only_folders_named_as_trtls_names_its_runs(tmp_path: Path) -> None:
    here = _project(tmp_path / "here")
    ours = _runs(here / ".trtls", 4)
    notes = here / ".trtls" / "runs" / "my notes"  # the user's own folder, as old as the runs around it
    notes.mkdir()
    (notes / "keep.txt").write_text("mine")
    old = time.time() - 100 * DAY
    os.utime(notes, (old, old))  # older than every run: the first to go, were it a run
    code, result, _ = _gc(here)
    assert code == 0
    removed = {r["buildId"] for r in result["removed"]}
    assert len(removed) == 3 and removed < {r.name for r in ours}, result
    assert (notes / "keep.txt").read_text() == "mine", "gc removed a folder trtls did not make"


def test_a_runs_folder_swapped_for_a_symlink_after_the_scan_is_refused_at_the_removal(tmp_path: Path) -> None:
    other = _project(tmp_path / "other")
    theirs = _runs(other / ".trtls", 3)
    here = _project(tmp_path / "here")
    _runs(here / ".trtls", 3)
    runs_dir = here / ".trtls" / "runs"
    scanned = retention.scan_runs(runs_dir)
    runs_dir.rename(here / ".trtls" / "runs-was")
    runs_dir.symlink_to(other / ".trtls" / "runs")  # between the scan and the removal: the same names, elsewhere
    errors = [retention._remove(run, runs_dir) for run in scanned]
    assert all(errors), errors
    assert all(run.is_dir() and (run / "summary.json").is_file() for run in theirs), "removed through the swap"
