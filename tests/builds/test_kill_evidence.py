"""Truthful evidence after any kill (issue 22, item 7): a real `trtls build` SIGKILLed at exact moments of the engine's
commit (the worker's TRTLS_TEST_PAUSE hook holds it there; no sleeps), then orphan recovery — by the next
`trtls build`, as the language server does on opening a folder.

Before: the worker renamed a new engine over the old one after its CLI was gone; no summary was written until a server
opened the folder, and then it said `killed`, "nothing it did is trusted", no engineArtifact, "no temp files were
left", and blamed "a server crash"."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

from trtls.builds.supervisor.orphans import process_alive, recover_orphans

from .cli_procs import CliBuild, pause_env, sha256_of, wait_for_file
from .helpers import leftovers


def _good_engine(ws: Path) -> str:
    first = CliBuild(ws, "demo")
    assert first.finish() == 0
    return sha256_of(ws / "build" / "demo.engine")


def _wait_gone(pid: int) -> None:
    deadline = time.monotonic() + 60
    while process_alive(pid):
        assert time.monotonic() < deadline, f"pid {pid} still alive"
        time.sleep(0.02)


def _paused(ws: Path, tmp_path: Path, point: str) -> tuple[CliBuild, str, int]:
    """A CLI build whose worker is paused at `point`: (the CLI, the build id, the worker pid)."""
    pause = tmp_path / "pause"
    cli = CliBuild(ws, "demo", env=pause_env(pause, point))
    marker = wait_for_file(pause, f".{point}")
    return cli, marker.name.removesuffix(f".{point}"), int(marker.read_text())


def test_a_cli_killed_before_the_rename_leaves_the_old_engine_and_the_next_build_records_it(
    workspace: Path, tmp_path: Path
) -> None:
    good = _good_engine(workspace)
    inode = (workspace / "build" / "demo.engine").stat().st_ino  # a rename brings a new inode, even for equal bytes
    cli, build_id, worker = _paused(workspace, tmp_path, "before_rename")
    run = workspace / ".trtls" / "runs" / build_id
    assert json.loads((run / "running.json").read_text())["owner"]["kind"] == "trtls build (CLI)"
    cli.proc.send_signal(signal.SIGKILL)  # the CLI dies while the new engine is complete in its temp file
    cli.proc.wait()
    _wait_gone(worker)  # the worker saw its stdin close and stopped by itself (nobody killed it)
    assert (workspace / "build" / "demo.engine").stat().st_ino == inode, "an engine was renamed after the CLI died"
    assert sha256_of(workspace / "build" / "demo.engine") == good
    assert not leftovers(workspace), "the worker left its temp file"
    assert (run / "running.json").exists() and not (run / "summary.json").exists()

    nxt = CliBuild(workspace, "demo")
    assert nxt.finish() == 0
    recovered = [json.loads(ln) for ln in nxt.stderr_text().splitlines() if ln.startswith("{")]
    assert [r["buildId"] for r in recovered if r.get("type") == "orphan_recovered"] == [build_id]
    s = json.loads((run / "summary.json").read_text())
    assert s["outcome"] == "killed" and "trtls build (CLI)" in s["error"] and s["supervisor"]["kind"]
    assert "server" not in s["error"] and "server crash" not in s["retryRule"]
    assert s["renamed"] is False and s["engineArtifact"] is None
    assert s["engineOnDisk"]["sha256"] == good and s["previousEngineIntact"] is True
    assert any("not replaced" in k for k in s["known"]) and s["unknown"]


def test_a_kill_after_the_rename_is_recorded_with_the_engine_on_disk(workspace: Path, tmp_path: Path) -> None:
    good = _good_engine(workspace)
    cli, build_id, worker = _paused(workspace, tmp_path, "after_rename")
    reported = cli.wait_for(lambda ln: ln.get("type") == "artifact" and ln.get("kind") == "engine")
    # the CLI printed the event after writing it to events.jsonl: it is on disk for recovery
    os.killpg(worker, signal.SIGKILL)  # the worker and then its CLI: nothing ends cleanly
    cli.proc.send_signal(signal.SIGKILL)
    cli.proc.wait()
    _wait_gone(worker)
    on_disk = sha256_of(workspace / "build" / "demo.engine")
    assert on_disk == reported["sha256"]

    found = recover_orphans(workspace / ".trtls")
    assert [r.build_id for r in found] == [build_id]
    s = json.loads((workspace / ".trtls" / "runs" / build_id / "summary.json").read_text())
    assert s["renamed"] is True
    assert s["engineArtifact"]["sha256"] == on_disk and s["engineArtifact"]["reportedSha256"] == reported["sha256"]
    assert s["engineOnDisk"]["sha256"] == on_disk
    assert s["previousEngineIntact"] is (on_disk == good)  # the recorded previous sha against what is there now
    assert "new engine is on disk" in found[0].message


def test_temp_files_a_killed_worker_left_are_removed_and_said(workspace: Path, tmp_path: Path) -> None:
    good = _good_engine(workspace)
    cli, build_id, worker = _paused(workspace, tmp_path, "before_rename")
    os.killpg(worker, signal.SIGKILL)  # both die with the complete temp file beside the output
    cli.proc.send_signal(signal.SIGKILL)
    cli.proc.wait()
    _wait_gone(worker)
    assert leftovers(workspace), "the kill should have left the temp file"

    found = recover_orphans(workspace / ".trtls")
    s = json.loads((workspace / ".trtls" / "runs" / build_id / "summary.json").read_text())
    assert not leftovers(workspace)
    removed = [a for a in s["artifacts"] if a["kind"] == "temp" and a["action"] == "removed"]
    assert len(removed) == 1 and "removed 1 orphaned temp file" in found[0].message
    assert s["renamed"] is False and s["previousEngineIntact"] is True and s["engineOnDisk"]["sha256"] == good
    assert any("temp file" in k for k in s["known"])
