"""The engine's write is judged again when it happens (issue 22, item 2): the recipe is checked when it loads, but the
output's folder can be swapped for a symlink leading out while TensorRT builds. The job carries its `write_root`
(the recipe's real folder) and the worker's atomic write refuses a real folder outside it. A real `trtls build`,
its worker held before TensorRT builds (TRTLS_TEST_PAUSE) while build/ becomes a symlink to a folder outside."""

from __future__ import annotations

import json
from pathlib import Path

from .cli_procs import CliBuild, pause_env, wait_for_bound, wait_for_file


def test_a_folder_swapped_for_a_symlink_during_the_build_is_refused_at_the_write(
    workspace: Path, tmp_path: Path
) -> None:
    out = workspace / "build" / "demo.engine"
    out.parent.mkdir(parents=True, exist_ok=True)
    pause = tmp_path / "pause"
    cli = CliBuild(workspace, "demo", env=pause_env(pause, "before_build"))
    marker = wait_for_file(pause, ".before_build")
    build_id = marker.name.removesuffix(".before_build")
    wait_for_bound(workspace, "demo", build_id)  # a job may reach the worker before its build is the supervisor's
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out.parent.rename(workspace / "build-was")
    out.parent.symlink_to(elsewhere)  # after the recipe's check, before the engine's write
    (pause / f"{build_id}.go").touch()
    assert cli.finish() == 1
    summary = json.loads((workspace / ".trtls" / "runs" / build_id / "summary.json").read_text())
    assert summary["outcome"] == "failed" and "outside" in summary["error"], summary["error"]
    assert list(elsewhere.iterdir()) == [], "the engine was written through the symlinked folder"
    assert summary["engineArtifact"] is None
