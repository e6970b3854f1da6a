"""The user's failed build a reduction reuses as its confirm trial is read from `.trtls/runs/<id>/summary.json`. A
run folder planted there as a symlink out of the project (to a folder anyone could write, holding a record of a
failed build with the engine's key) was followed, and its record taken as the measured failure: a read outside the
project, and a verdict nobody measured here. Such a folder is passed over now; a real failed build is reused."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from .reduce_models import failing_demo


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "trtls", *args], capture_output=True, text=True, timeout=600)


def _reduce(ws: Path) -> dict:
    done = _run("reduce", str(ws), "--engine", "demo", "--max-trials", "2", "--json")
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith('{"kind": "reduction"')]
    assert lines, done.stderr[-1500:]
    record: dict = json.loads(lines[-1])
    return record


def test_a_run_folder_linked_out_of_the_project_is_not_the_users_build(tmp_path: Path) -> None:
    ws = failing_demo(tmp_path)
    assert _run("build", str(ws), "--engine", "demo").returncode == 1, "the engine fails to build"
    (run,) = (ws / ".trtls" / "runs").iterdir()
    outside = tmp_path / "elsewhere" / "run"
    shutil.move(str(run), outside)
    planted = ws / ".trtls" / "runs" / run.name
    planted.symlink_to(outside, target_is_directory=True)
    record = _reduce(ws)
    assert record["reusedBuild"] is None, "no record read through a link out of the project"
    assert record["trials"][0]["buildId"].startswith(record["id"]), record["trials"][0]
    planted.unlink()
    shutil.move(str(outside), run)  # the same record, in the project: the user's build, reused
    assert _reduce(ws)["reusedBuild"] == run.name
