"""`running.json` read through one typed reader (issue 28, "typed seams"): builds/supervisor/running_state.py.

Before, the record a live build leaves was a `dict[str, Any]` read with `.get` wherever recovery needed a field: a
`startedAt` that is a string read as an older record, a `job` that is a list as no job, and a record that does not
hold together was still trusted for the kill. Now every field is checked for the type the writer gives it; a damaged
record is a `RunningProblem` naming its path and field, recovery's row and the rebuilt summary say so, and no process
it names is signalled — even one that carries the record's start id and nonce (the old code killed it).

Real processes: a live process in its own session, with the nonce in its environment, stands where the worker was."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.builds.helpers import sleeper_with_nonce
from trtls.builds.supervisor.orphans import RecoveredBuild, process_alive, process_start_id, recover_orphans
from trtls.builds.supervisor.running_record import note_previous_sha, output_state, process_owner, running_json
from trtls.builds.supervisor.running_state import (
    OutputState,
    RunningProblem,
    RunningState,
    read_running_state,
    running_state_of,
)

NONCE = "7" * 32
BUILD = "svc-20260101-000000-abcdef"


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def _written(tmp_path: Path) -> tuple[Path, Any]:
    """A running.json as the supervisor writes it (running_json), for a build whose worker is this process's
    child; the output existed before the build."""
    ws = tmp_path / "ws"
    output = ws / "build" / "svc.engine"
    output.parent.mkdir(parents=True)
    output.write_bytes(b"the previous engine")
    evidence = ws / ".trtls" / "runs" / BUILD
    evidence.mkdir(parents=True)
    job = {"v": 1, "type": "job", "onnx": str(ws / "m.onnx"), "output": str(output), "keep_evidence": False,
           "timing_cache": {"path": str(ws / "t.cache"), "mode": "rw"}, "settings": {"fp16": True}}  # fmt: skip
    build = SimpleNamespace(id=BUILD, engine="svc", output=output, job=job, started_at=time.time(),
                            evidence_dir=evidence, previous_engine_sha=None)  # fmt: skip
    guard = SimpleNamespace(owner=process_owner("language server"), before=output_state(output))
    running_json(build, os.getpid(), guard, nonce=NONCE)  # type: ignore[arg-type]
    return evidence / "running.json", build


def test_a_record_the_supervisor_writes_reads_as_every_field_and_round_trips(tmp_path: Path) -> None:
    path, build = _written(tmp_path)
    written = json.loads(path.read_text())
    state = read_running_state(path)
    assert isinstance(state, RunningState), state
    assert state.build_id == BUILD and state.engine == "svc" and state.output_path == build.output
    assert state.worker_pid == os.getpid() and state.worker_start == process_start_id(os.getpid())
    assert state.worker_nonce == NONCE and state.supervisor_pid == os.getpid()
    assert state.started_at == build.started_at and state.previous_sha256 is None
    assert state.owner is not None and state.owner.kind == "language server" and state.owner.pid == os.getpid()
    assert state.output_before == OutputState.now(build.output) and state.output_before.exists is True
    assert state.job is not None and state.job.onnx == build.job["onnx"] and state.job.keep_evidence is False
    assert state.job.timing_cache and state.job.timing_cache_path == build.job["timing_cache"]["path"]
    assert state.record() == written  # every key, the job as written
    assert list(state.record()) == list(written)


def test_the_previous_sha_is_noted_through_the_model_and_nothing_else_changes(tmp_path: Path) -> None:
    path, build = _written(tmp_path)
    before = json.loads(path.read_text())
    done: asyncio.Future[str] = asyncio.new_event_loop().create_future()
    done.set_result("ab" * 32)
    note_previous_sha(build, done)  # type: ignore[arg-type]
    assert json.loads(path.read_text()) == {**before, "previousSha256": "ab" * 32}
    assert os.stat(path).st_mode & 0o777 == 0o600


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"startedAt": "yesterday"}, "startedAt"),
        ({"startedAt": float("nan")}, "startedAt"),
        ({"job": ["m.onnx"]}, "job"),
        ({"job": {"onnx": 5}}, "job.onnx"),
        ({"job": {"timing_cache": {"path": ["x"]}}}, "job.timing_cache.path"),
        ({"workerPid": True}, "workerPid"),
        ({"workerNonce": 7}, "workerNonce"),
        ({"supervisorPid": "12"}, "supervisorPid"),
        ({"supervisorStart": 5}, "supervisorStart"),
        ({"owner": "a CLI"}, "owner"),
        ({"owner": {"kind": "trtls build (CLI)", "pid": False}}, "owner.pid"),
        ({"outputBefore": {"exists": True, "dev": 1, "mtimeNs": 2}}, "outputBefore.inode"),
        ({"outputBefore": {"exists": "yes"}}, "outputBefore.exists"),
        ({"previousSha256": 1}, "previousSha256"),
    ],
)
def test_a_damaged_field_is_a_located_problem(change: dict[str, Any], field: str) -> None:
    record = {"buildId": BUILD, "engine": "svc", "output": "/x/svc.engine", "supervisorPid": 1, **change}
    found = running_state_of(json.loads(json.dumps(record, allow_nan=True)), Path("/r") / BUILD / "running.json")
    assert isinstance(found, RunningProblem), found
    assert found.fields == (field,) and f"{field} is " in found.message
    assert str(found).startswith(f"/r/{BUILD}/running.json: the record does not hold together: {field} is ")
    partial = found.partial  # the rest of the record, without the wrong field
    assert partial is not None and partial.build_id == BUILD and partial.engine == "svc"
    top = field.split(".")[0]
    assert top not in partial.record() and partial.record()["output"] == "/x/svc.engine"


def test_an_older_record_is_no_problem() -> None:
    """A field the record does not carry (an older trtls, no worker yet) is None, not damage."""
    state = running_state_of({"buildId": BUILD, "supervisorPid": 12, "job": {"output": "/o/e.engine"}})
    assert isinstance(state, RunningState)
    assert state.worker_pid is None and state.started_at is None and state.owner is None
    assert state.output_before is None and state.output_path == Path("/o/e.engine")
    assert state.record() == {"buildId": BUILD, "supervisorPid": 12, "job": {"output": "/o/e.engine"}}


def test_a_file_that_is_no_record_is_a_problem_with_nothing_to_recover(tmp_path: Path) -> None:
    cases = {"list": "[1]", "text": "not json", "nobuild": '{"supervisorPid": 1}', "badid": '{"buildId": 3}'}
    for name, text in cases.items():
        (tmp_path / name).write_text(text)
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "link").symlink_to(tmp_path / "nobuild")
    for name in [*cases, "fifo", "link"]:
        found = read_running_state(tmp_path / name)
        assert isinstance(found, RunningProblem) and found.partial is None, name
        assert found.path == tmp_path / name
    badid = read_running_state(tmp_path / "badid")
    assert isinstance(badid, RunningProblem) and "buildId is 3, not a string" in badid.message


@pytest.fixture
def provable(tmp_path: Path):
    """A live process group leader carrying NONCE, recorded with its true start id: a record that holds together
    naming it is proof enough to kill it (test_orphans.test_the_recorded_worker_is_killed)."""
    with sleeper_with_nonce(NONCE) as proc:
        yield proc


@pytest.mark.parametrize(
    ("change", "field"),
    [({"startedAt": "yesterday"}, "startedAt"), ({"job": ["m.onnx"]}, "job"), ({"owner": 3}, "owner")],
)
def test_recovery_of_a_damaged_record_says_which_field_and_signals_nothing(
    tmp_path: Path, provable: subprocess.Popen, change: dict[str, Any], field: str
) -> None:
    """The worker the record names carries its start id and nonce: the old code, reading `startedAt` or `job` with a
    fallback, killed it. A record that does not hold together proves nothing: it is left alone, and both the row and
    the summary name the field."""
    ws = tmp_path / "ws"
    run = ws / ".trtls" / "runs" / BUILD
    run.mkdir(parents=True)
    record = {"buildId": BUILD, "engine": "svc", "output": str(ws / "build" / "svc.engine"),
              "workerPid": provable.pid, "workerStart": process_start_id(provable.pid), "workerNonce": NONCE,
              "supervisorPid": _dead_pid(), **change}  # fmt: skip
    (run / "running.json").write_text(json.dumps(record))
    (found,) = recover_orphans(ws / ".trtls")
    time.sleep(0.2)
    assert process_alive(provable.pid), "a process named by a damaged record was killed"
    assert isinstance(found, RecoveredBuild) and found.build_id == BUILD
    assert f"the record does not hold together: {field} is " in found.message
    assert "so no process it names was signalled" in found.message
    summary = json.loads((run / "summary.json").read_text())
    assert summary["outcome"] == "killed" and f"{field} is " in summary["notes"][0]
    assert not (run / "running.json").exists()


def test_a_pid_that_is_a_bool_names_no_worker(tmp_path: Path) -> None:
    """`true` is pid 1 to Python: the record's `workerPid: true` is damage, said with its field; nothing signalled."""
    ws = tmp_path / "ws"
    run = ws / ".trtls" / "runs" / BUILD
    run.mkdir(parents=True)
    record = {"buildId": BUILD, "engine": "svc", "workerPid": True, "supervisorPid": _dead_pid()}
    (run / "running.json").write_text(json.dumps(record))
    (found,) = recover_orphans(ws / ".trtls")
    assert "workerPid is true, not an integer" in found.message and "no process it names was signalled" in found.message


def test_the_recovered_row_keeps_its_json(tmp_path: Path) -> None:
    """The row's JSON (`trtls build --json`'s `orphan_recovered` line) has the keys and values it always had: the
    supervisor as the record names it, or its pid when an older record has no owner."""
    ws = tmp_path / "ws"
    dead = _dead_pid()
    owner = {"kind": "trtls build (CLI)", "pid": dead, "command": "trtls build ."}
    for build_id, extra in ((BUILD, {"owner": owner}), ("svc-20260101-000000-000000", {})):
        run = ws / ".trtls" / "runs" / build_id
        run.mkdir(parents=True)
        record = {"buildId": build_id, "engine": "svc", "output": str(ws / "build" / "svc.engine"),
                  "supervisorPid": dead, **extra}  # fmt: skip
        (run / "running.json").write_text(json.dumps(record))
    rows = {r.build_id: r.record() for r in recover_orphans(ws / ".trtls")}
    for build_id, row in rows.items():
        assert list(row) == ["buildId", "engine", "message", "cleanupStatus", "artifacts", "supervisor"]
        assert row["buildId"] == build_id and row["engine"] == "svc" and row["artifacts"] == []
        summary = json.loads((ws / ".trtls" / "runs" / build_id / "summary.json").read_text())
        assert row["supervisor"] == summary["supervisor"] and row["cleanupStatus"] == summary["cleanupStatus"]
        assert row["message"] == summary["notes"][0].split(": ", 1)[1]
    assert rows[BUILD]["supervisor"] == owner
    assert rows["svc-20260101-000000-000000"]["supervisor"] == {"pid": dead, "kind": None}
