"""Will the engine load there (issue 33 C): after a build the worker asks TensorRT-RTX's
`IRuntime.get_engine_validity` when a CUDA GPU is present, and records the answer with what TensorRT logged
(`engineValidity`). Here (no GPU) a real build says `not_checked` with the reason and TensorRT is never asked; the
wording of an INVALID answer is parsed from what the lent H200 recorded (tests/data/engine_validity/h200.json)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from trtls.builds.supervisor.outcome_findings import build_findings
from trtls.builds.worker.engine_validity import NO_GPU, parse_validity_message, validity_record
from trtls.core.summary_record import Summary

from .helpers import run_build

RECORDED = json.loads((Path(__file__).parents[1] / "data" / "engine_validity" / "h200.json").read_text())
CASES = RECORDED["cases"]


@pytest.mark.parametrize(
    ("case", "supported"),
    [
        ("default", ["8.0", "8.6", "8.9", "12.0", "12.1", ">12.0"]),
        ("SM89", ["8.9"]),
        ("SM80+SM120", ["8.0", "12.0"]),
        ("ampere_plus", ["8.0", "8.6", "8.9", "12.0", "12.1", ">12.0"]),  # the hardware level: no wider on TRT-RTX
    ],
)
def test_the_h200_s_words_parse_into_compute_capabilities(case: str, supported: list[str]) -> None:
    ((_, message),) = CASES[case]["logged"]
    assert parse_validity_message(message) == {"gpu_cc": "9.0", "supported": supported, "rebuildable": False}


def test_words_that_are_not_that_sentence_parse_to_nothing() -> None:
    ((_, fatal),) = RECORDED["noGpu"]["logged"]
    assert parse_validity_message(fatal) is None
    assert parse_validity_message("Engine deserialized in 12 ms") is None


def test_an_invalid_answer_is_recorded_and_becomes_an_engine_portability_finding() -> None:
    status, code = CASES["default"]["returned"]
    record = validity_record(status.lower(), code, [tuple(x) for x in CASES["default"]["logged"]])
    assert record["status"] == "invalid" and record["diagnosticsNames"] == ["UNSUPPORTED_CC"]
    assert record["gpuComputeCapability"] == "9.0" and record["supportedComputeCapabilities"][-1] == ">12.0"
    assert record["reason"].startswith("The engine cannot run on this GPU")
    assert record["diagnostics"] == [{"severity": "INFO", "msg": CASES["default"]["logged"][0][1]}]
    summary = {"engine": "demo", "outcome": "built", "buildId": "b1", "engineValidity": record}
    (finding,) = [f for f in build_findings(Summary.written(summary)) if f.code == "TRT208"]
    assert finding.path == ("engines", "demo") and "compute capability 9.0" in finding.message
    assert (
        "8.0 8.6 8.9 12.0 12.1 >12.0" in finding.message
        and "cannot build for this compute capability" in finding.message
    )
    valid = {**summary, "engineValidity": validity_record("valid", 0, [])}
    assert [f for f in build_findings(Summary.written(valid)) if f.code == "TRT208"] == []


async def test_a_real_build_here_is_not_checked_with_the_reason_and_no_fatal_log(workspace: Path) -> None:
    _, build = await run_build(workspace, "demo")
    s = await build.wait()
    assert s.outcome == "built"
    assert s.engineValidity == {"status": "not_checked", "reason": NO_GPU, "diagnostics": []}
    assert not any("CUDA driver version is insufficient" in entry["msg"] for entry in s.logs)
    assert [f for f in build_findings(s) if f.code == "TRT208"] == []
    # the lead's command for the H200, run here: the same answer as JSON, exit 2 (not checked)
    engine = workspace / "build" / "demo.engine"
    done = subprocess.run(
        [sys.executable, "-m", "trtls.builds.worker.engine_validity", str(engine)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    printed = json.loads(done.stdout)
    assert printed["status"] == "not_checked" and printed["reason"] == NO_GPU and printed["engine"] == str(engine)
    assert "CUDA driver version is insufficient" not in done.stdout + done.stderr


def test_an_engine_that_is_not_there_is_named_without_a_traceback(tmp_path: Path) -> None:
    missing = tmp_path / "none.engine"
    done = subprocess.run(
        [sys.executable, "-m", "trtls.builds.worker.engine_validity", str(missing)], capture_output=True, text=True
    )
    assert done.returncode == 2 and str(missing) in done.stderr and "Traceback" not in done.stderr
