"""The editor closing (shutdown, exit) or a SIGTERM while a reduction runs: its trials' builds are the reduction's
own, not the supervisor's that shutdown stops, so the reduction was dropped mid-search — no result.json, nothing for
`--resume`, and "Task was destroyed but it is pending!" on stderr. It is stopped as any stop now
(`service_shutdown`), its record written before the process ends, and `trtls reduce --resume` continues it."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from ..triage.reduce_models import failing_demo
from .raw_stdio import RawServer


def _reduction_under_way(s: RawServer, ws: Path) -> str:
    s.initialize(ws)
    arg = {"uri": (ws / "trtls.toml").as_uri(), "engine": "demo"}
    reply = s.request("workspace/executeCommand", {"command": "trtls.reduceEngine", "arguments": [arg]})
    rid: str = reply["result"]["reductionId"]
    end = time.monotonic() + 120
    while time.monotonic() < end:  # a trial or two in: the search is under way
        rows = s.request("workspace/executeCommand", {"command": "trtls.listBuilds", "arguments": [{}]})
        if sum(r["buildId"].startswith(rid + ".t") for r in rows["result"]["builds"]) >= 2:
            break
        time.sleep(0.05)
    return rid


def _record(ws: Path, rid: str) -> dict:
    path = ws / ".trtls" / "reduce" / rid / "result.json"
    assert path.is_file(), "the reduction's record is written before the server exits"
    record: dict = json.loads(path.read_text())
    assert record["outcome"] == "cancelled" and record["stoppedBy"] == "service_shutdown", record["outcome"]
    return record


def test_a_reduction_the_editors_exit_ends_keeps_its_record(tmp_path: Path) -> None:
    ws = failing_demo(tmp_path)
    s = RawServer(cwd=ws)
    rid = _reduction_under_way(s, ws)
    assert s.close() == 0
    _record(ws, rid)
    assert b"Task was destroyed but it is pending" not in s.stderr, s.stderr[-1500:]
    cmd = [sys.executable, "-m", "trtls", "reduce", str(ws), "--engine", "demo", "--resume", "--max-trials", "1"]
    resumed = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert f"--resume: continuing {rid}" in resumed.stderr, resumed.stderr[-1500:]


def test_a_reduction_a_sigterm_ends_keeps_its_record(tmp_path: Path) -> None:
    ws = failing_demo(tmp_path)
    s = RawServer(cwd=ws)
    rid = _reduction_under_way(s, ws)
    s.proc.send_signal(signal.SIGTERM)
    assert s.proc.wait(60) == 143
    _record(ws, rid)
