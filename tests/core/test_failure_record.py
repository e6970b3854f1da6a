"""The classified failure is one declared model (issue 28, "typed seams"): `core.failure_record.Failure` on the wire
(`build_finished.failure`), in the state and in summary.json. A known key spelled or typed wrong is refused at the
supervisor's edge with its field; a key no model declares survives into summary.json as sent; a record written
before the model (the producers' keys, their order, their nulls) reads back and writes back byte for byte; and the
readers take attributes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.builds.helpers import external_worker_build
from trtls.builds.supervisor.outcome_findings import build_findings
from trtls.core.builder_errors import LESS_MEMORY_KEYS, classify_failure, memory_exhaustion, setting_failure
from trtls.core.events import BuildFinished, ProtocolError, parse_event
from trtls.core.evidence import retry_advice
from trtls.core.failure_record import Failure
from trtls.core.summary_record import Summary, read_summary, summary_of
from trtls.triage.signature import failure_signature, same_failure

CHECK = (
    "Error Code 1: Myelin ([myelin_graph.h:1126: attachExceptionMsgToGraph] MyelinCheckException: "
    "kernel_gen_utils.hpp:1032: CHECK_GE(smem_limit, kMinSharedMemory - 1024) failed.  In compileGraph at "
    "optimizer/myelin/codeGenerator.cpp:1297)"
)
# what the code before the model wrote for CHECK (its keys, their order and its nulls): the records on disk
OLD_INTERNAL = {
    "kind": "internal_error",
    "errorCode": 1,
    "message": CHECK,
    "assertion": "CHECK_GE(smem_limit, kMinSharedMemory - 1024)",
    "source": "kernel_gen_utils.hpp:1032",
    "layer": None,
    "function": "compileGraph",
}
OLD_SETTING = {"kind": "setting", "code": "TRT141", "key": "legacy_flags"}
OLD_PRECISION = {"kind": "precision", "code": "TRT147", "key": "convert", "reason": "missing_modelopt"}
# an older or an external worker's keys, beside the declared ones
EXTRA = {"kind": "plugin", "code": "TRT149", "key": "plugins.libraries", "serviceTrace": {"id": 7, "hops": ["a", "b"]}}


def _finished(failure: object) -> str:
    return json.dumps({"v": 1, "type": "build_finished", "t_ns": 1, "outcome": "failed", "failure": failure})


@pytest.mark.parametrize(
    ("failure", "located"),
    [
        ({**OLD_SETTING, "kind": "settings"}, "build_finished.failure.kind"),  # misspelled kind
        ({"knd": "setting", "code": "TRT141"}, "build_finished.failure.kind: Field required"),  # misspelled key
        ({**OLD_INTERNAL, "errorCode": "1"}, "build_finished.failure.errorCode"),  # a number as a string
        ({"kind": "out_of_memory", "keys": "builder.max_aux_streams"}, "build_finished.failure.keys"),
        ({"kind": "out_of_memory", "oomKill": "yes"}, "build_finished.failure.oomKill"),
        ({"kind": "out_of_memory", "resource": "vram"}, "build_finished.failure.resource"),
        ("TRT141", "build_finished.failure"),  # not a record at all
    ],
)
def test_a_known_key_spelled_or_typed_wrong_is_refused_at_the_edge_with_its_field(
    failure: object, located: str
) -> None:
    with pytest.raises(ProtocolError) as refused:
        parse_event(_finished(failure))
    assert located in str(refused.value), str(refused.value)


def test_the_wire_carries_a_failure_and_gives_back_what_was_sent() -> None:
    ev = parse_event(_finished(EXTRA))
    assert isinstance(ev, BuildFinished) and isinstance(ev.failure, Failure)
    assert ev.failure.kind == "plugin" and ev.failure.code == "TRT149" and ev.failure.key == "plugins.libraries"
    assert ev.failure.extra == {"serviceTrace": {"id": 7, "hops": ["a", "b"]}}
    # dumped (the --json stream, a recorded build): the keys sent, no null for the ones it never had
    assert json.dumps(ev.model_dump(mode="json")["failure"]) == json.dumps(EXTRA)
    assert json.loads(ev.model_dump_json())["failure"] == EXTRA


@pytest.mark.parametrize("record", [OLD_INTERNAL, OLD_SETTING, OLD_PRECISION, EXTRA])
def test_a_summary_with_a_failure_round_trips_to_identical_json(tmp_path: Path, record: dict) -> None:
    written = {"buildId": "b1", "engine": "m", "outcome": "failed", "error": "x", "failure": record, "notes": []}
    text = json.dumps(written, indent=2)
    (tmp_path / "summary.json").write_text(text)
    on_disk = read_summary(tmp_path / "summary.json")
    assert isinstance(on_disk, Summary) and isinstance(on_disk.failure, Failure), on_disk
    assert json.dumps(on_disk.record(), indent=2) == text
    assert json.dumps(Summary.written(written).record(), indent=2) == text  # the record as this process wrote it
    assert on_disk.failure.kind == record["kind"] and on_disk.failure.code == record.get("code")


def test_a_damaged_failure_in_a_summary_is_said_with_its_field() -> None:
    problem = summary_of({"outcome": "failed", "failure": {**OLD_INTERNAL, "errorCode": "one"}})
    assert not isinstance(problem, Summary) and "failure.errorCode" in str(problem), problem


def test_the_classified_records_are_written_as_before() -> None:
    """The producers' records, dumped: the same keys in the same order with the same nulls as the dicts they were."""
    internal = classify_failure("failed", None, [("ERROR", CHECK)])
    assert internal is not None and json.dumps(internal.record()) == json.dumps(OLD_INTERNAL)
    lean = setting_failure([("ERROR", "Error Code 6: API Usage Error (Unable to load library: libnvinfer_lean.so.1)")])
    assert lean is not None and list(lean.record()) == ["kind", "code", "key", "hint"]
    memory = memory_exhaustion([("ERROR", "Unexpected exception std::bad_alloc")], resources={"how": "getrusage"})
    assert memory is not None and json.dumps(memory.record()) == json.dumps(
        {
            "kind": "out_of_memory",
            "resource": "host_memory",
            "evidence": ["Unexpected exception std::bad_alloc"],
            "requestedBytes": None,
            "peakRssBytes": None,
            "peakRssHow": "getrusage",
            "oomKill": None,
            "keys": list(LESS_MEMORY_KEYS),
            "advice": memory.advice,
        }
    )
    # a worker's own record passes through the classifier as it came, extras included
    sent = Failure.model_validate(EXTRA)
    assert classify_failure("failed", sent, [("ERROR", CHECK)]) is sent


WORKER = """
import json, os, sys, time
job = json.loads(sys.stdin.readline())
def emit(t, **f):
    sys.stdout.write(json.dumps({"v": 1, "type": t, "t_ns": time.monotonic_ns(), **f}) + "\\n")
    sys.stdout.flush()
emit("build_started", build_id=job["build_id"], engine=job["engine"], pid=os.getpid(),
     environment={"module": "cpp-service", "version": "10.9.0", "language": "cpp"}, build_config_hash="f" * 64)
emit("build_finished", outcome="failed", error="the service refused legacy_flags", cleanup_status="not_needed",
     failure=json.loads(os.environ["SENT_FAILURE"]))
sys.exit(1)
"""


async def _external_build(tmp_path: Path, failure: dict, monkeypatch: pytest.MonkeyPatch) -> tuple[Summary, dict]:
    """A build by a worker written from docs/protocol.md that fails with `failure`: its summary and summary.json."""
    monkeypatch.setenv("SENT_FAILURE", json.dumps(failure))
    _, s, text = await external_worker_build(tmp_path, WORKER)
    return s, json.loads(text)


async def test_an_undeclared_key_survives_into_summary_json_unchanged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sent = {**OLD_SETTING, "serviceTrace": {"id": 7, "hops": ["a", "b"]}, "retryable": False}
    summary, on_disk = await _external_build(tmp_path, sent, monkeypatch)
    assert summary.outcome == "failed" and on_disk["failure"] == sent, on_disk["failure"]
    assert json.dumps(on_disk["failure"]) == json.dumps(sent)  # the same keys, in the order sent, no nulls added
    # the readers take it typed: the finding lands on the key the worker named, the advice reads its kind
    assert isinstance(summary.failure, Failure) and summary.failure.key == "legacy_flags"
    (finding,) = [f for f in build_findings(summary) if f.code == "TRT141"]
    assert finding.path[-1] == "legacy_flags"
    assert summary.retryPolicy == "investigate" and "(setting)" in str(summary.retryRule)


async def test_a_failure_typed_wrong_by_a_worker_is_refused_and_said_in_the_evidence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s, on_disk = await _external_build(tmp_path, {**OLD_SETTING, "code": 141}, monkeypatch)
    (note,) = [n for n in on_disk["notes"] if "broke trtls.events/1" in n]
    assert "build_finished.failure.code" in note, note
    assert on_disk["failure"] is None or on_disk["failure"].get("code") != 141


def test_the_readers_take_attributes() -> None:
    internal = Failure.model_validate({**OLD_INTERNAL, "layer": "/head/MatMul"})
    summary = Summary.written({"engine": "m", "buildId": "b", "outcome": "failed", "failure": internal.record()})
    assert summary.failure == internal
    signature = failure_signature(summary)
    assert signature is not None and signature.record() == {
        "kind": "internal_error",
        "errorCode": 1,
        "assertion": "CHECK_GE(smem_limit, kMinSharedMemory - 1024)",
        "sourceFile": "kernel_gen_utils.hpp",
        "layer": "/head/MatMul",
    }
    assert same_failure(signature, summary)
    (finding,) = [f for f in build_findings(summary) if f.code == "TRT206"]
    assert finding.data["layer"] == "/head/MatMul" and "CHECK_GE(smem_limit" in finding.message
    advice = retry_advice("failed", "cold", True, None, summary.failure)
    assert advice.policy == "investigate" and "at layer /head/MatMul" in advice.rule
    oom = memory_exhaustion([], resources={"peakRssBytes": 5 << 30, "how": "h", "oom": {"oomKill": True, "how": "x"}})
    assert oom is not None and oom.resource == "host_memory" and oom.peakRssBytes == 5 << 30
    memory = Summary.written({"engine": "m", "outcome": "killed", "failure": oom.record()})
    (finding,) = [f for f in build_findings(memory) if f.code == "TRT207"]
    assert finding.data["keys"] == list(LESS_MEMORY_KEYS) and finding.data["peakRssBytes"] == 5 << 30
