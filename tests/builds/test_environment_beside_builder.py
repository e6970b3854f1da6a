"""TensorRT's builder starts before the environment record is made (builds/worker/build.py `_announce_beside`, issue
31): the record's device half is the CUDA driver's first answer (a cuInit, ~0.2 s on a GPU host), which the builder
does not need. Real processes and real TensorRT-RTX builds; the driver that has not answered is a test pause in the
thread that makes the record (TRTLS_TEST_PAUSE=device_probe), which goes on only once the builder has returned — so
a builder that waited for the record would never return, and the test would time out.

The stream still says `environment` and `build_started` before any phase, and a stop in that moment ends as a stop
does, with the record."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.builds.cli_procs import wait_for_bound


def _cli(workspace: Path, engine: str, pause: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "TRTLS_TEST_PAUSE": f"device_probe:{pause}", "TRTLS_STORE": "off"}
    return subprocess.Popen(
        [sys.executable, "-m", "trtls", "build", str(workspace), "--engine", engine, "--no-store"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # the test's SIGINT reaches the CLI only, as a terminal's Ctrl-C reaches its group
    )


def _events(workspace: Path, engine: str) -> list[dict]:
    (run,) = sorted((workspace / ".trtls" / "runs").glob(f"{engine}-*"))
    return [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines() if line.strip()]


def _opening(events: list[dict]) -> list[str]:
    return [e["type"] for e in events if e["type"] in ("environment", "build_started", "phase_start")][:3]


def test_the_builder_runs_before_the_driver_answers_and_the_record_still_comes_first(
    workspace: Path, tmp_path: Path
) -> None:
    proc = _cli(workspace, "demo", tmp_path)
    out, err = proc.communicate(timeout=180)
    assert proc.returncode == 0, err[-3000:]
    assert list(tmp_path.glob("*.device_probe")), "the record was not made beside the builder"
    events = _events(workspace, "demo")
    assert _opening(events) == ["environment", "build_started", "phase_start"]
    by_type = {e["type"]: e for e in reversed(events)}
    # stamped when TensorRT was ready and when the builder started, though sent once it had returned
    assert by_type["environment"]["t_ns"] <= by_type["build_started"]["t_ns"] <= by_type["phase_start"]["t_ns"]
    assert by_type["build_started"]["environment"] == by_type["environment"]["environment"]
    assert by_type["build_started"]["build_config_hash"]
    summary = json.loads(next((workspace / ".trtls" / "runs").glob("demo-*/summary.json")).read_text())
    assert summary["outcome"] == "built" and summary["environment"]["module"] == "tensorrt_rtx"
    assert (workspace / "build" / "demo.engine").is_file()


def test_a_stop_while_the_driver_has_not_answered_ends_as_a_stop_with_the_record(
    workspace: Path, tmp_path: Path
) -> None:
    proc = _cli(workspace, "large", tmp_path)
    deadline = time.monotonic() + 120
    while not list(tmp_path.glob("*.device_probe")):  # the record's thread is waiting: the builder is starting
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"the record was not made beside the builder: {proc.communicate()[1][-3000:]}")
        time.sleep(0.02)
    wait_for_bound(workspace, "large")  # the checked job may reach the worker before the build is bound
    os.kill(proc.pid, signal.SIGINT)  # the person's Ctrl-C, while the builder runs without the record
    out, err = proc.communicate(timeout=180)
    assert proc.returncode == 130, (proc.returncode, err[-3000:])
    events = _events(workspace, "large")
    assert _opening(events)[:2] == ["environment", "build_started"]
    summary = json.loads(next((workspace / ".trtls" / "runs").glob("large-*/summary.json")).read_text())
    assert summary["outcome"] == "cancelled" and summary["environment"]["module"] == "tensorrt_rtx", summary
    assert not (workspace / "build" / "large.engine").exists()
