"""Before the worker gets its job, the output probe runs on a thread while running.json is written (issue 31: both are
fsynced writes on the way to the job, and fsyncs issued together are committed together), and the evidence is what it
was when they ran one after the other: a built engine, or a probe that fails (TRT405) while an early worker waits,
which then gets no job and is reaped.

Real builds and a real early worker; the probe is the real one, wrapped to note the thread it runs on and the
running.json it finds once the loop's thread has written it."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from trtls.builds.supervisor import supervisor as supervisor_module
from trtls.builds.supervisor.spawn import spawn_worker
from trtls.builds.supervisor.supervisor import Supervisor

from .helpers import loaded, process_gone


def watch_probe(monkeypatch: pytest.MonkeyPatch, ws: Path) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    real = supervisor_module.output_problem

    def probe(output: Path, build_id: str, within: Path | None = None) -> Any:
        seen["on_loop_thread"] = threading.current_thread() is threading.main_thread()
        running = ws / ".trtls" / "runs" / build_id / "running.json"
        if not seen["on_loop_thread"]:  # the loop's thread writes it meanwhile (on it, nothing else could)
            deadline = time.monotonic() + 120
            while not running.exists() and time.monotonic() < deadline:
                time.sleep(0.002)
        seen["running"] = json.loads(running.read_text()) if running.exists() else None
        return real(output, build_id, within)

    monkeypatch.setattr(supervisor_module, "output_problem", probe)
    return seen


async def test_the_probe_runs_beside_the_running_record_of_an_early_worker(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = watch_probe(monkeypatch, workspace)
    early = await spawn_worker(preload="auto")
    build = Supervisor().start(loaded(workspace), "demo", worker=early)
    summary = await build.wait()
    assert seen["on_loop_thread"] is False, "the probe ran on the event loop's thread, before running.json"
    assert seen["running"] is not None and seen["running"]["workerPid"] == early.pid
    assert summary.outcome == "built" and summary.workerPid == early.pid
    assert summary.outputCheck["writable"] is True
    assert not (build.evidence_dir / "running.json").exists()
    assert process_gone(early.pid)


async def test_a_failed_probe_beside_an_early_worker_leaves_the_same_evidence_and_no_process(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (workspace / "build").write_text("a file where the output folder should be")  # not writable, even for root
    seen = watch_probe(monkeypatch, workspace)
    early = await spawn_worker(preload="auto")
    build = Supervisor().start(loaded(workspace), "demo", worker=early)
    s = await build.wait()
    assert seen["on_loop_thread"] is False
    assert s.outcome == "failed" and s.error.startswith("TRT405") and s.phaseTree == []
    assert s.outputCheck["writable"] is False and s.workerPid is None
    assert sorted(p.name for p in build.evidence_dir.iterdir()) == ["environment.json", "summary.json", "tree.json"]
    assert early.returncode is not None and process_gone(early.pid)  # it got no job, exited and was reaped
