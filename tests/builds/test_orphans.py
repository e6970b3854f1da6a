"""Orphan recovery kills a recorded worker's process group only when it is provably that worker: its start id and
the run nonce its supervisor put in its environment (issue 27, item 8).

Real processes throughout: a live process in its own session stands where a worker's PID was recorded;
the supervisor's PID is one of a process that has exited."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.builds.helpers import sleeper_with_nonce
from trtls.builds.supervisor.orphans import process_alive, process_start_id, recover_orphans

NONCE = "5" * 32


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def _running(ws: Path, worker: subprocess.Popen, worker_start: str | None, nonce: str | None = None) -> Path:
    run = ws / ".trtls" / "runs" / "demo-x"
    run.mkdir(parents=True)
    state = {
        "buildId": "demo-x",
        "engine": "demo",
        "output": str(ws / "build" / "demo.engine"),
        "supervisorPid": _dead_pid(),
        "workerPid": worker.pid,
        "job": {"output": str(ws / "build" / "demo.engine")},
    }
    if worker_start is not None:
        state["workerStart"] = worker_start
    if nonce is not None:
        state["workerNonce"] = nonce
    (run / "running.json").write_text(json.dumps(state))
    return run


@pytest.fixture
def stand_in(tmp_path: Path):
    """A live process group leader that is NOT a trtls worker (what a reused PID would point at); it carries the
    nonce NONCE, as a worker of a record naming that nonce would."""
    with sleeper_with_nonce(NONCE) as proc:
        yield proc


def test_start_id_names_one_process(stand_in: subprocess.Popen) -> None:
    sid = process_start_id(stand_in.pid)
    assert sid and sid == process_start_id(stand_in.pid)
    assert sid != process_start_id(_dead_pid() or 1)


def test_a_reused_pid_is_never_killed(tmp_path: Path, stand_in: subprocess.Popen) -> None:
    # recorded: the same PID but a process that started at another time (PID reuse, e.g. after a reboot)
    boot, ticks = process_start_id(stand_in.pid).rsplit(":", 1)
    run = _running(tmp_path, stand_in, f"{boot}:{int(ticks) - 1000}", NONCE)
    recovered = recover_orphans(tmp_path / ".trtls")
    time.sleep(0.2)
    assert process_alive(stand_in.pid), "an unrelated process group was killed"
    assert "left alone" in recovered[0].message
    summary = json.loads((run / "summary.json").read_text())
    assert summary["outcome"] == "killed" and "left alone" in summary["notes"][0]


def test_an_unverifiable_record_is_never_killed(tmp_path: Path, stand_in: subprocess.Popen) -> None:
    """A running.json from before start ids were recorded: the PID alone proves nothing."""
    _running(tmp_path, stand_in, None)
    recover_orphans(tmp_path / ".trtls")
    time.sleep(0.2)
    assert process_alive(stand_in.pid)


def test_the_recorded_worker_is_killed(tmp_path: Path, stand_in: subprocess.Popen) -> None:
    _running(tmp_path, stand_in, process_start_id(stand_in.pid), NONCE)
    recovered = recover_orphans(tmp_path / ".trtls")
    assert stand_in.wait(timeout=10) == -9
    assert "was killed" in recovered[0].message


def test_an_older_record_says_what_it_cannot_know(tmp_path: Path, stand_in: subprocess.Popen) -> None:
    """A running.json from before owners and output states were recorded: the summary does not guess the cause or
    whether the output was replaced; it says so."""
    engine = tmp_path / "build" / "demo.engine"
    engine.parent.mkdir()
    engine.write_bytes(b"an engine")
    run = _running(tmp_path, stand_in, None)
    recover_orphans(tmp_path / ".trtls")
    s = json.loads((run / "summary.json").read_text())
    assert "does not say whether it was a CLI or a server" in s["error"]
    assert s["renamed"] is None and s["engineArtifact"] is None and s["previousEngineIntact"] is None
    assert s["engineOnDisk"]["exists"] is True and len(s["engineOnDisk"]["sha256"]) == 64
    assert any("whether the output was replaced" in u for u in s["unknown"])
