"""What builds the engine, the build's target and the parsed network's typing are declared models (issue 28, "typed
seams"): `core.build_records.BuildEnvironment`, `BuildTarget` and `NetworkTyping` on the wire (`environment`,
`build_started.environment`, `.target`, `.network`), in the state and in the supervisor's readers. A known key typed
wrong is refused at the supervisor's edge with its field; a key no model declares survives into summary.json as
sent; what the worker writes reads back and writes back byte for byte (its keys, their order, its nulls; `{}` and
`null` where it sent none); and the readers take attributes."""

from __future__ import annotations

import json
import subprocess
import sys
import typing
from pathlib import Path

import pytest

from tests.builds.helpers import external_worker_build
from trtls.builds.supervisor.orphans import recover_orphans
from trtls.builds.supervisor.similar_builds import model_facts
from trtls.core.build_records import (
    BuildEnvironment,
    BuildTarget,
    BuildTargetRecord,
    NetworkTyping,
    NetworkTypingRecord,
)
from trtls.core.build_state import BuildState
from trtls.core.build_target import build_target
from trtls.core.events import BuildStarted, EnvironmentCaptured, ProtocolError, parse_event
from trtls.core.summary_record import Summary

TRACE = Path(__file__).resolve().parents[1] / "data" / "trt-rtx-traces" / "large_events.jsonl"
# what the worker writes (core.build_target.build_target, builds.build_facts.network_types): keys, order, nulls
TARGET = {
    "computeCapabilities": ["SM89", "SM120"],
    "hardwareCompatibilityLevel": "builder default",
    "device": None,
    "deviceComputeCapability": None,
}
NETWORK = {"stronglyTyped": None, "inputs": {"images": "HALF"}, "outputs": {"logits": "FLOAT"}, "layers": 42}
ENVIRONMENT = {  # builds.worker.adapter.environment_record on a machine without a GPU
    "module": "tensorrt_rtx", "version": "1.7.1.116", "is_rtx": True, "onnx_parser_version": 200, "python": "3.11.7",
    "python_implementation": "CPython", "platform": "Linux-6.18-x86_64-with-glibc2.36", "machine": "x86_64",
    "executable": "/usr/bin/python3", "cuda_runtime": "13.0", "cuda_driver": None, "device_name": None,
    "compute_capability": None,
}  # fmt: skip
# an older or an external worker's keys, beside the declared ones
TRACED = {"serviceTrace": {"id": 7, "hops": ["a", "b"]}}


def _started(**fields: object) -> str:
    return json.dumps(
        {"v": 1, "type": "build_started", "t_ns": 1, "build_id": "b", "engine": "m", "pid": 1, "environment": {},
         "build_config_hash": "f" * 64, **fields}
    )  # fmt: skip


@pytest.mark.parametrize(
    ("fields", "located"),
    [
        ({"target": {**TARGET, "deviceComputeCapability": 8.9}}, "build_started.target.deviceComputeCapability"),
        ({"target": {**TARGET, "computeCapabilities": [89]}}, "build_started.target.computeCapabilities"),
        ({"target": {**TARGET, "device": 0}}, "build_started.target.device"),
        ({"target": "SM89"}, "build_started.target"),  # not a record at all
        ({"network": {**NETWORK, "inputs": ["images"]}}, "build_started.network.inputs"),  # a list, not name → dtype
        ({"network": {**NETWORK, "outputs": {"logits": 1}}}, "build_started.network.outputs.logits"),
        ({"network": {**NETWORK, "layers": "42"}}, "build_started.network.layers"),  # a number as a string
        ({"network": {**NETWORK, "stronglyTyped": "yes"}}, "build_started.network.stronglyTyped"),
        ({"environment": {**ENVIRONMENT, "is_rtx": "yes"}}, "build_started.environment.is_rtx"),
        ({"environment": {**ENVIRONMENT, "compute_capability": 8.9}}, "build_started.environment.compute_capability"),
        ({"environment": {**ENVIRONMENT, "onnx_parser_version": "200"}}, "build_started.environment.onnx_parser"),
        ({"environment": ["tensorrt_rtx"]}, "build_started.environment"),
    ],
)
def test_a_known_key_typed_wrong_is_refused_at_the_edge_with_its_field(fields: dict, located: str) -> None:
    with pytest.raises(ProtocolError) as refused:
        parse_event(_started(**fields))
    assert located in str(refused.value), str(refused.value)


def test_the_environment_line_is_refused_with_its_field_too() -> None:
    line = {"v": 1, "type": "environment", "t_ns": 1, "environment": {**ENVIRONMENT, "version": 10}}
    with pytest.raises(ProtocolError, match=r"environment\.environment\.version"):
        parse_event(json.dumps(line))
    ev = parse_event(json.dumps({**line, "environment": {**ENVIRONMENT, **TRACED}}))
    assert isinstance(ev, EnvironmentCaptured) and isinstance(ev.environment, BuildEnvironment)
    assert ev.environment.module == "tensorrt_rtx" and ev.environment.is_rtx and ev.environment.device_name is None
    assert ev.environment.extra == TRACED and ev.environment.language == "python"  # not sent: the trtls worker's
    assert json.dumps(ev.environment.record()) == json.dumps({**ENVIRONMENT, **TRACED})  # no `language` added


def test_the_wire_carries_the_models_and_gives_back_what_was_sent() -> None:
    ev = parse_event(_started(target={**TARGET, **TRACED}, network={**NETWORK, "precision": "mixed"}))
    assert isinstance(ev, BuildStarted)
    assert isinstance(ev.target, BuildTarget) and isinstance(ev.network, NetworkTyping)
    assert ev.target.computeCapabilities == ["SM89", "SM120"] and ev.target.device is None
    assert ev.network.inputs == {"images": "HALF"} and ev.network.layers == 42 and ev.network.stronglyTyped is None
    assert ev.target.extra == TRACED and ev.network.extra == {"precision": "mixed"}
    # dumped (the --json stream, a matrix's lines): the keys sent, in their order, with their nulls, no more
    dumped = json.loads(ev.model_dump_json())
    assert json.dumps(dumped["target"]) == json.dumps({**TARGET, **TRACED})
    assert json.dumps(ev.model_dump(mode="json")["network"]) == json.dumps({**NETWORK, "precision": "mixed"})
    # a worker that sends neither (an external one): `{}` on the wire, as before, not a record of nulls
    bare = parse_event(_started())
    assert isinstance(bare, BuildStarted) and bare.target.record() == {} and bare.network.record() == {}
    assert json.loads(bare.model_dump_json())["target"] == {} and bare.network.layers is None
    # some keys only: those keys, no null for the rest
    some = parse_event(_started(network={"layers": 3}))
    assert isinstance(some, BuildStarted) and json.dumps(some.network.record()) == '{"layers": 3}'


def test_a_recorded_trace_reads_back_byte_for_byte() -> None:
    """A real TensorRT-RTX worker's build_started (a recorded trace) validates and dumps as it was written."""
    line = next(x for x in TRACE.read_text().splitlines() if '"build_started"' in x)
    sent = json.loads(line)
    ev = parse_event(line)
    assert isinstance(ev, BuildStarted) and ev.network.layers == sent["network"]["layers"] > 0
    assert json.dumps(ev.target.record()) == json.dumps(sent["target"])
    assert json.dumps(ev.network.record()) == json.dumps(sent["network"])
    assert json.dumps(ev.environment.record()) == json.dumps(sent["environment"])
    # `malloc_arena_max` came after the trace was recorded; today's worker's keys are held to
    # the model's in tests/builds/test_builder_thread.py
    later = ("language", "malloc_arena_max", "driver_unanswered")  # the last: only when the driver did not answer
    assert list(sent["environment"]) == [k for k in BuildEnvironment.model_fields if k not in later]


def test_what_the_worker_builds_is_what_the_models_declare() -> None:
    """The worker's plain dicts (typed for mypy as the TypedDicts) have the models' keys, in the models' order, and
    validate into them unchanged: a renamed key on either side fails here."""
    for model, typed in ((BuildTarget, BuildTargetRecord), (NetworkTyping, NetworkTypingRecord)):
        assert list(typing.get_type_hints(typed)) == list(model.model_fields), model.__name__
    env = {"module": "tensorrt", "version": "10.9", "device_name": "NVIDIA H200", "compute_capability": "9.0"}
    for effective in ({}, {"compute_capabilities": ["SM89"], "hardware_compatibility_level": "ampere_plus"}):
        made = build_target(env, effective)
        assert list(made) == list(BuildTarget.model_fields)
        assert json.dumps(BuildTarget.model_validate(made).record()) == json.dumps(made)
    assert build_target(env, {})["deviceComputeCapability"] == "9.0"


WORKER = """
import json, os, sys, time
job = json.loads(sys.stdin.readline())
def emit(t, **f):
    sys.stdout.write(json.dumps({"v": 1, "type": t, "t_ns": time.monotonic_ns(), **f}) + "\\n")
    sys.stdout.flush()
sent = {"environment": {"module": "cpp-service", "version": "10.9.0", "language": "cpp"},
        **json.loads(os.environ["SENT_RECORDS"])}
emit("build_started", build_id=job["build_id"], engine=job["engine"], pid=os.getpid(), build_config_hash="f" * 64,
     **sent)
emit("build_finished", outcome="failed", error="the service stopped here", cleanup_status="not_needed")
sys.exit(1)
"""


async def _external_build(tmp_path: Path, records: dict, monkeypatch: pytest.MonkeyPatch) -> tuple[Summary, dict, str]:
    """A build by a worker written from docs/protocol.md that sends `records` in its build_started: its summary,
    summary.json as parsed, and summary.json's text."""
    monkeypatch.setenv("SENT_RECORDS", json.dumps(records))
    build, s, text = await external_worker_build(tmp_path, WORKER)
    assert isinstance(build.state.target, BuildTarget) and isinstance(build.state.network, NetworkTyping)
    return s, json.loads(text), text


async def test_an_undeclared_key_survives_into_summary_json_unchanged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target, network = {**TARGET, **TRACED}, {**NETWORK, "precision": "mixed"}
    s, on_disk, text = await _external_build(tmp_path, {"target": target, "network": network}, monkeypatch)
    assert on_disk["target"] == target and on_disk["network"] == network, (on_disk["target"], on_disk["network"])
    # the same keys, in the order sent, no nulls added: summary.json's text holds them as json.dumps wrote them
    assert json.dumps(target, indent=2).replace("\n", "\n  ") in text
    assert json.dumps(on_disk["network"]) == json.dumps(network)
    assert s.network is not None and s.network.record() == network  # read back typed, written back as sent
    # what built it: as sent, in summary.json and environment.json, and read by the summary's own fields
    env = {"module": "cpp-service", "version": "10.9.0", "language": "cpp", **TRACED}
    _, on_disk, text = await _external_build(tmp_path / "env", {"environment": env}, monkeypatch)
    assert json.dumps(env, indent=2).replace("\n", "\n  ") in text and on_disk["environment"] == env
    (run,) = (tmp_path / "env" / ".trtls" / "runs").glob("*/environment.json")
    assert run.read_text() == json.dumps(env, indent=2)
    assert on_disk["language"] == "cpp" and on_disk["builderModule"] == "cpp-service"
    assert on_disk["tensorrtVersion"] == "10.9.0" and on_disk["gpuSku"] == "no device"


async def test_a_worker_that_sends_neither_still_writes_null(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    s, on_disk, _ = await _external_build(tmp_path, {"environment": {"module": "svc"}}, monkeypatch)
    assert on_disk["target"] is None and on_disk["network"] is None  # as before the models: `{} or None`
    assert on_disk["environment"] == {"module": "svc"} and on_disk["language"] == "python"  # unsaid: python
    assert on_disk["tensorrtVersion"] == "unknown" and on_disk["computeCapability"] is None


async def test_a_target_typed_wrong_by_a_worker_is_refused_and_said_in_the_evidence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sent = {"target": {**TARGET, "deviceComputeCapability": 8.9}, "network": NETWORK}
    _, on_disk, _ = await _external_build(tmp_path, sent, monkeypatch)
    (note,) = [n for n in on_disk["notes"] if "broke trtls.events/1" in n]
    assert "build_started.target.deviceComputeCapability" in note, note
    assert on_disk["target"] is None  # nothing of the refused line was taken


def test_the_readers_take_attributes(tmp_path: Path) -> None:
    """The state holds the models the edge validated (no copy); the similar-builds reader takes `network.layers`."""
    ev = parse_event(_started(environment={"module": "tensorrt", "version": "10.9"}, target=TARGET, network=NETWORK))
    state = BuildState("b", "m", tmp_path, 5.0)
    assert state.target.record() == {} and state.network.layers is None  # before build_started: given nothing
    state.fold(ev)
    assert isinstance(ev, BuildStarted) and state.target is ev.target and state.network is ev.network
    assert state.network.layers == 42 and state.target.computeCapabilities == ["SM89", "SM120"]

    class Facts:  # what model_facts reads of a supervisor's Build: its state's fields, and its job
        environment, network, optimization_profiles, job = state.environment, state.network, [{}], {"onnx": None}

    facts = model_facts(Facts())
    assert facts is not None and facts["layers"] == 42 and facts["profiles"] == 1
    Facts.network = NetworkTyping()  # no build_started yet: no facts
    assert model_facts(Facts()) is None


def test_a_recovered_orphan_writes_the_records_as_the_worker_sent_them(tmp_path: Path) -> None:
    """Orphan recovery rebuilds summary.json from events.jsonl: the target and network as sent, extras included."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    run = tmp_path / ".trtls" / "runs" / "demo-x"
    run.mkdir(parents=True)
    output = str(tmp_path / "demo.engine")
    state = {"buildId": "demo-x", "engine": "demo", "output": output, "supervisorPid": dead.pid,
             "workerPid": dead.pid, "job": {"output": output}}  # fmt: skip
    (run / "running.json").write_text(json.dumps(state))
    target, network = {**TARGET, **TRACED}, {**NETWORK, "precision": "mixed"}
    (run / "events.jsonl").write_text(_started(target=target, network=network) + "\n")
    recover_orphans(tmp_path / ".trtls")
    on_disk = json.loads((run / "summary.json").read_text())
    assert json.dumps(on_disk["target"]) == json.dumps(target)
    assert json.dumps(on_disk["network"]) == json.dumps(network)


async def test_the_probed_environment_is_validated_as_a_workers_line_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A build whose worker never ran records the environment `worker --probe` says (build_end.probe_environment):
    the real worker's probe validates, its `capabilities` kept as sent; a probe typed wrong is no environment."""
    from trtls.builds.supervisor import build_end
    from trtls.builds.supervisor.build import Build

    job = {"output": str(tmp_path / "m.engine")}
    build = Build("m-1", "m", tmp_path / "trtls.toml", job, 5.0, [sys.executable, "-m", "trtls.builds.worker"])
    probed = await build_end.probe_environment(build)
    assert isinstance(probed, BuildEnvironment) and probed.module and probed.version, probed
    assert "capabilities" in probed.extra and list(probed.record())[-1] == "capabilities"

    async def typed_wrong(build: Build) -> dict:
        return {**ENVIRONMENT, "is_rtx": "yes"}

    monkeypatch.setattr(build_end, "_probe", typed_wrong)
    assert (await build_end.probe_environment(build)).record() == {}
