"""The evidence record's model (issue 28 item 5): an old record missing the fields a later trtls added still loads, a
damaged record is a located problem and never a traceback, and the packages that read records through the model do
not go back to reading a dict by string. Every record kind trtls writes is validated against the model by
tests/store/test_record_kinds.py, on records of real runs."""

from __future__ import annotations

import ast
import json
import os
from pathlib import Path

import pytest

from trtls.core.summary_record import RECORD_LIMIT, Summary, SummaryProblem, read_summary, summary_of

SERVER = Path(__file__).resolve().parents[2] / "server" / "trtls"

# a record as trtls 0.x wrote it before the runbook fields, the capability, the store and the resources existed
OLD_RECORD = {
    "buildId": "20250101-000000-abcd",
    "engine": "demo",
    "recipe": "/ws/trtls.toml",
    "outcome": "built",
    "error": None,
    "tensorrtVersion": "1.0.0",
    "buildConfigHash": "a" * 64,
    "startedAt": 1735689600,
    "durationS": 12,
    "artifacts": [{"kind": "engine", "action": "written", "path": "/ws/build/demo.engine"}],
    "phaseTree": [{"id": "1", "name": "Build", "status": "done"}],
    "aFieldNoLongerWritten": {"kept": True},
}


def _write(tmp_path: Path, data: bytes) -> Path:
    path = tmp_path / "summary.json"
    path.write_bytes(data)
    return path


def test_an_old_record_missing_later_fields_loads_and_keeps_what_it_had(tmp_path: Path) -> None:
    got = read_summary(_write(tmp_path, json.dumps(OLD_RECORD).encode()))
    assert isinstance(got, Summary), got
    assert got.outcome == "built" and got.buildId == OLD_RECORD["buildId"] and got.durationS == 12
    # absent fields read as an absent key read before: None, or nothing
    assert got.cancelSource is None and got.capability is None and got.store is None and got.warnings == []
    assert got.missing_runbook_fields() == ["framework", "language", "gpuSku", "timingCacheMode", "cancelSource",
                                            "cancelLatencyMs", "cleanupStatus", "retryPolicy", "validationStatus",
                                            "builderModule", "cleanupLatencyMs", "retryRule"]  # fmt: skip
    assert got.record() == OLD_RECORD  # an undeclared field is kept, no declared one is invented


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (b"{not json", "not valid JSON"),
        (b"\xff\xfe{}", "not valid JSON"),
        (b"[1, 2]", "not a build summary"),
        (json.dumps({**OLD_RECORD, "outcome": "exploded"}).encode(), 'not a build summary: outcome is "exploded"'),
        (json.dumps({**OLD_RECORD, "cancelSource": "the cat"}).encode(), 'cancelSource is "the cat"'),
        (json.dumps({**OLD_RECORD, "phaseTree": "not a list"}).encode(), 'phaseTree is "not a list"'),
        (json.dumps({**OLD_RECORD, "environment": {"is_rtx": "yes"}}).encode(), "environment.is_rtx"),
        (json.dumps({**OLD_RECORD, "target": {"deviceComputeCapability": 8.9}}).encode(), "target.deviceComputeCap"),
        (json.dumps({**OLD_RECORD, "network": {"inputs": ["x"]}}).encode(), "network.inputs"),
    ],
)
def test_a_damaged_record_is_a_problem_that_names_the_file_and_the_field(
    tmp_path: Path, data: bytes, words: str
) -> None:
    path = _write(tmp_path, data)
    got = read_summary(path)
    assert isinstance(got, SummaryProblem), got
    assert str(got).startswith(f"{path}: ") and words in str(got), str(got)


def test_a_fifo_is_refused_before_a_byte_is_read(tmp_path: Path) -> None:
    path = tmp_path / "summary.json"
    os.mkfifo(path)  # a read would block forever: nobody writes it
    got = read_summary(path)
    assert isinstance(got, SummaryProblem) and "not a regular file" in str(got) and str(path) in str(got), got


def test_a_100_mb_record_is_refused_before_it_is_read(tmp_path: Path) -> None:
    path = tmp_path / "summary.json"
    with path.open("wb") as fh:
        fh.truncate(100 << 20)  # sparse: 100 MB to stat, nothing on disk
    got = read_summary(path)
    assert isinstance(got, SummaryProblem) and f"more than the {RECORD_LIMIT}" in str(got), got


def test_a_symlinked_or_missing_record_is_a_problem(tmp_path: Path) -> None:
    target = _write(tmp_path, json.dumps(OLD_RECORD).encode())
    link = tmp_path / "link" / "summary.json"
    link.parent.mkdir()
    link.symlink_to(target)
    assert "symlink" in str(read_summary(link))
    assert "cannot read" in str(read_summary(tmp_path / "gone" / "summary.json"))
    assert isinstance(summary_of(None), SummaryProblem)


# Where a build's evidence record is read, it is read through the model: a `summary[...]` or `summary.get(...)` on a
# dict is what item 5 of issue 28 removed. A gates run's route record (`.trtls/routes/<route>/summary.json`) is another
# record, and the engine store's writers build their record as a dict: those files are named with why.
MIGRATED: tuple[str, ...] = (
    "report",
    "lsp",
    "store",
    "builds/avoidance",
    "gates",
    "builds/supervisor",
    "triage",
    "route",
    "accept",
    "core/display.py",
    "core/capability.py",
    "core/build_state.py",
    "core/build_view.py",
    "cli/terminal_view.py",
    "cli/matrix_view.py",
    "cli/store_why_sides.py",
)
NOT_A_BUILD_RECORD = {
    "lsp/triage_command.py": "owned by the triage work (a reduction's record)",
    "lsp/gates_command.py": "a gates run's row, built in memory (decision, outcome), not a build's record",
    "builds/avoidance/lookup.py": "writes the build's record (the store's fields added before it is written)",
    "builds/avoidance/cells.py": "reads the message of the reuse record its follower's restore just wrote",
    "builds/avoidance/reuse.py": "writes the reuse's record",
    "builds/avoidance/rollback.py": "writes the rollback's record",
    "builds/supervisor/build_end.py": "writes the build's record (and adds the evidence error to it)",
    "builds/supervisor/orphans.py": "builds the recovered record (its engineOnDisk and renamed are working fields)",
    "builds/supervisor/orphan_output.py": "builds the recovered record's engineOnDisk and renamed (working fields)",
    "builds/supervisor/matrix.py": "owned by the farm work: reads back the matrix record it built in memory",
}


def raw_summary_reads(source: str) -> list[int]:
    """Lines where a dict named `summary` (a name or an attribute) is read by key: `summary[...]` in a load, or
    `summary.get(...)`."""

    def is_summary(node: ast.AST) -> bool:
        return (isinstance(node, ast.Name) and node.id == "summary") or (
            isinstance(node, ast.Attribute) and node.attr == "summary"
        )

    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and is_summary(node.value):
            lines.append(node.lineno)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and is_summary(node.func.value)
        ):
            lines.append(node.lineno)
    return lines


def test_the_source_check_finds_a_raw_read() -> None:
    assert raw_summary_reads("x = summary['outcome']\ny = build.summary.get('buildId')\nsummary['a'] = 1\n") == [1, 2]


def test_the_migrated_packages_read_build_records_through_the_model() -> None:
    found = {}
    for package in MIGRATED:
        where = SERVER / package
        for path in [where] if where.is_file() else sorted(where.rglob("*.py")):
            rel = path.relative_to(SERVER).as_posix()
            if rel in NOT_A_BUILD_RECORD:
                continue
            lines = raw_summary_reads(path.read_text())
            if lines:
                found[rel] = lines
    assert found == {}, f"raw reads of a summary dict (read it with trtls.core.summary_record): {found}"


def test_gate_2_links_the_newest_good_record_past_damaged_ones(tmp_path: Path) -> None:
    """A damaged record beside good ones (a FIFO, a wrong word, a newer one that is not JSON) is no record to the
    gates: gate 2 links the newest one that holds together, as a Summary, and never hangs or raises."""
    from trtls.gates.environment_evidence import latest_successful_build

    runs = tmp_path / ".trtls" / "runs"
    for name, data in (
        ("old", {**OLD_RECORD, "engine": "demo", "startedAt": 1}),
        ("good", {**OLD_RECORD, "engine": "demo", "startedAt": 2, "buildId": "good"}),
        ("other-engine", {**OLD_RECORD, "engine": "large", "startedAt": 9}),
        ("wrong-word", {**OLD_RECORD, "engine": "demo", "startedAt": 9, "outcome": "exploded"}),
    ):
        (runs / name).mkdir(parents=True)
        (runs / name / "summary.json").write_text(json.dumps(data))
    (runs / "fifo").mkdir()
    os.mkfifo(runs / "fifo" / "summary.json")
    (runs / "cut").mkdir()
    (runs / "cut" / "summary.json").write_text('{"engine": "demo", "outcome": "built", "startedAt": 9')
    linked = latest_successful_build(tmp_path, "demo")
    assert linked is not None and linked[0] == runs / "good" / "summary.json"
    assert isinstance(linked[1], Summary) and linked[1].buildId == "good"


def test_a_record_built_in_this_process_is_taken_as_written() -> None:
    record = {**OLD_RECORD, "outcome": "reused", "message": "up to date", "reusedFrom": {"buildId": "x"}}
    model = Summary.written(record)
    assert model.outcome == "reused" and model.message == "up to date" and model.record() == record


def test_report_and_trace_say_a_damaged_record_and_draw_an_old_one(tmp_path: Path) -> None:
    """The faces: `trtls report` and `trtls trace` on a record with a word trtls never wrote exit 2 with the file and
    the field (before: the page was drawn from whatever the dict held); an old record without the later fields is
    drawn, exit 0."""
    import subprocess
    import sys

    (tmp_path / "trtls.toml").write_text('[engines.demo]\nonnx = "models/demo.onnx"\noutput = "build/demo.engine"\n')
    runs = tmp_path / ".trtls" / "runs"
    bad, old = runs / "20260101-000000-bad000", runs / "20260101-000000-old000"
    for run, data in ((bad, {**OLD_RECORD, "cancelSource": "the cat"}), (old, OLD_RECORD)):
        run.mkdir(parents=True)
        (run / "summary.json").write_text(json.dumps(data))

    def trtls(*args: str) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "trtls", *args]
        return subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300)

    for face in ("report", "trace"):
        r = trtls(face, bad.name, "-o", str(tmp_path / f"bad.{face}"))
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
        assert f'{bad.name}/summary.json: not a build summary: cancelSource is "the cat"' in r.stderr, r.stderr
        r = trtls(face, old.name, "-o", str(tmp_path / f"old.{face}"))
        assert r.returncode == 0, r.stderr
    assert "<h1>demo " in (tmp_path / "old.report").read_text()


# the worker's records as a TensorRT-RTX build wrote them (environment, build_started.target and .network), one key
# an external worker added
WORKER_RECORDS = {
    "environment": {"module": "tensorrt_rtx", "version": "1.7.1.116", "is_rtx": True, "onnx_parser_version": 200,
                    "python": "3.11.7", "device_name": None, "compute_capability": None, "cudaHome": "/opt/cuda"},
    "target": {"computeCapabilities": "builder default", "hardwareCompatibilityLevel": "builder default",
               "device": None, "deviceComputeCapability": None},
    "network": {"stronglyTyped": True, "inputs": {"input": "FLOAT"}, "outputs": {"output": "FLOAT"}, "layers": 7},
}  # fmt: skip


def test_the_worker_records_read_typed_and_write_back_as_they_were(tmp_path: Path) -> None:
    record = {**OLD_RECORD, **WORKER_RECORDS}
    text = json.dumps(record)
    got = read_summary(_write(tmp_path, text.encode()))
    assert isinstance(got, Summary), got
    assert got.environment is not None and got.environment.module == "tensorrt_rtx" and got.environment.is_rtx
    assert got.environment.extra == {"cudaHome": "/opt/cuda"}
    assert got.target is not None and got.target.computeCapabilities == "builder default"
    assert got.network is not None and got.network.inputs == {"input": "FLOAT"} and got.network.layers == 7
    assert json.dumps(got.record()) == text  # the same keys, values and order: nothing added, nothing dropped
    written = Summary.written(record)  # a record this process built: typed the same way, not validated again
    assert written.environment is not None and written.environment.version == "1.7.1.116"
    assert written.network is not None and written.network.stronglyTyped is True
    assert json.dumps(written.record()) == text


# a matrix run's record as builds.supervisor.matrix writes it: a cell that ran on a node, one never started
MATRIX_RECORD = {
    "buildId": "demo-20260101-000000-abc123", "kind": "matrix", "title": "demo", "recipe": "/ws/trtls.toml",
    "outcome": "cancelled", "cancelSource": "ide_stop", "startedAt": 1767225600.25, "durationS": 4.5,
    "cells": [
        {"cell": "demo/fp16", "engine": "demo", "buildId": "b-1", "outcome": "built", "output": "/ws/build/a.engine",
         "engineSha256": "ab" * 32, "node": {"nodeId": "n1", "queueWaitS": 0.5}, "evidence": "/ws/x/summary.json"},
        {"cell": "demo/int8", "engine": "demo", "buildId": None, "outcome": "not_started"},
    ],
    "cluster": {"how": "a local Ray cluster", "warm": False, "summaryS": 3.0},
}  # fmt: skip


def test_a_matrix_records_cells_read_typed_and_write_back_as_they_were(tmp_path: Path) -> None:
    """The cells of a matrix run's record are `MatrixCell`s (`summary.cells[0].outcome`, not `cell["outcome"]`), read
    from disk or built in this process, and write back key for key and in order (`MatrixBuild.summary`, --json)."""
    text = json.dumps(MATRIX_RECORD)
    got = read_summary(_write(tmp_path, text.encode()))
    assert isinstance(got, Summary), got
    for model in (got, Summary.written(MATRIX_RECORD)):
        assert model.kind == "matrix" and [c.outcome for c in model.cells] == ["built", "not_started"]
        assert model.cells[0].node == {"nodeId": "n1", "queueWaitS": 0.5} and model.cells[1].buildId is None
        assert json.dumps(model.record()) == text
    damaged = {**MATRIX_RECORD, "cells": [{"cell": "demo/x", "outcome": "exploded"}]}
    problem = read_summary(_write(tmp_path, json.dumps(damaged).encode()))
    assert isinstance(problem, SummaryProblem) and "cells.0.outcome" in str(problem)
