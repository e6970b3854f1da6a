"""The worker → supervisor event stream and the supervisor → worker control messages (`trtls.events/1`).

This is a protocol boundary: a worker may be ours or a C++ service with its own IProgressMonitor
(docs/protocol.md), so every line is validated here, once, into a typed event. Every field a worker sends is
declared here (a field no model declares is refused with a message naming it): these models are the protocol, and
docs/protocol.md's tables, docs/protocol.schema.json and the extension's types are generated from them
(`python -m trtls.schema.protocol`). Times are
CLOCK_MONOTONIC nanoseconds, which on Linux are shared by parent and child processes, so the
supervisor can subtract a worker's timestamp from its own.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from trtls.core.build_records import BuildEnvironment, BuildTarget, NetworkTyping
from trtls.core.failure_record import Failure
from trtls.core.protocol import CANCEL_SOURCES, PROTOCOL, PROTOCOL_VERSION
from trtls.core.vocabulary import CacheDecision, CancelSource, CleanupStatus, Outcome, PhaseEnd, WorkerEnd

__all__ = ["CANCEL_SOURCES", "PROTOCOL", "PROTOCOL_VERSION", "CacheDecision", "CancelSource", "Outcome"]


class _Event(BaseModel):
    # A field the protocol does not declare is an error, not ignored: a worker's author learns at once that the
    # supervisor never reads it (a new field is a new protocol version, declared here).
    model_config = ConfigDict(extra="forbid")
    v: int = PROTOCOL_VERSION
    t_ns: int  # CLOCK_MONOTONIC


class BuildStarted(_Event):
    """Once, after the network is parsed and settings applied; `build_config_hash` covers the ONNX bytes, settings,
    profiles, builder module + version and the target. Where TensorRT's builder starts before the CUDA driver has
    answered the environment record (a GPU host's first cuInit; nothing before the builder reads the record), it is
    sent once the driver answers, stamped with the builder's start, and every event of the build comes after it."""

    type: Literal["build_started"]
    build_id: str
    engine: str
    pid: int
    # what builds it (builds.worker.adapter.environment_record): module, version, is_rtx, Python, CUDA and device 0
    # (core.build_records: docs/protocol.md's table)
    environment: BuildEnvironment
    build_config_hash: str
    effective_settings: dict[str, Any] = {}
    optimization_profiles: list[dict[str, Any]] = []  # as the builder config holds them: index, inputs{min,opt,max}
    # what the engine is built for (core.build_target.build_target): computeCapabilities, hardwareCompatibilityLevel,
    # device, deviceComputeCapability; part of build_config_hash (core.build_records: docs/protocol.md's table)
    target: BuildTarget = BuildTarget()
    # the parsed network's typing (builds.build_facts.network_types): stronglyTyped, inputs, outputs (name → dtype),
    # layers (core.build_records: docs/protocol.md's table)
    network: NetworkTyping = NetworkTyping()


class EnvironmentCaptured(_Event):
    """Optional; once, stamped when TensorRT was loaded (before the ONNX is parsed), so a build that fails on its input
    still records what would have built it (build_started repeats it). Sent ahead of every other event of the build:
    where the builder starts before the CUDA driver has answered, the events meanwhile wait for it (build_started)."""

    type: Literal["environment"]
    environment: BuildEnvironment  # the same record as build_started's (core.build_records)


class PhaseStart(_Event):
    """Never dropped. `phase_id` is the phase's position (dotted sibling indexes), never its name."""

    type: Literal["phase_start"]
    phase_id: str
    parent_id: str | None
    name: str
    num_steps: int
    tid: int = 0


class Step(_Event):
    """Coalesced: the latest step per phase at most every 50 ms; always flushed before that phase's finish."""

    type: Literal["step"]
    phase_id: str
    step: int


class PhaseFinish(_Event):
    """Never dropped; `cancelled` once step_complete has returned False; `step` is the phase's last step."""

    type: Literal["phase_finish"]
    phase_id: str
    status: PhaseEnd = "done"  # cancelled: finished while the builder unwound a cancel
    step: int | None = None  # the phase's last step (steps are coalesced; the finish is never dropped)


class Log(_Event):
    """TensorRT's logger: WARNING, ERROR and INTERNAL_ERROR (and the worker's own INFO lines)."""

    type: Literal["log"]
    severity: str  # INTERNAL_ERROR, ERROR, WARNING, INFO, VERBOSE
    msg: str


class CacheDecisionEvent(_Event):
    """The timing-cache decision: cold, reused, updated, discarded, quarantined or not_applicable."""

    type: Literal["cache_decision"]
    decision: CacheDecision
    reason: str
    path: str | None = None
    identity: dict[str, Any] = {}
    written_back: bool = False
    quarantined_to: str | None = None


class BuilderReturned(_Event):
    """`build_serialized_network` returned (engine or None): from here on there is nothing to escalate."""

    type: Literal["builder_returned"]
    ok: bool


class CancelAcknowledged(_Event):
    """`t_ns` = the builder's return; `t_seen_ns` = the callback that returned False."""

    type: Literal["cancel_acknowledged"]
    source: CancelSource
    t_request_ns: int | None = None  # when the cancel was requested (the requester's clock = CLOCK_MONOTONIC)
    t_seen_ns: int | None = None  # when a step_complete callback saw it and returned False
    after_complete: bool = False  # the engine was already complete: the cancel is applied after the commit


class Artifact(_Event):
    """The inventory: every file the build wrote, removed, quarantined or had to keep."""

    type: Literal["artifact"]
    action: Literal["written", "removed", "quarantined", "kept"]
    kind: Literal["engine", "timing_cache", "temp", "evidence"]
    path: str
    size: int | None = None
    sha256: str | None = None
    moved_to: str | None = None
    error: str | None = None  # why a file was kept (it could not be removed)
    node_path: str | None = None  # a farm cell's engine: where it was on the node before it was fetched


class PrecisionRecord(_Event):
    """The precision step's result (ModelOpt AutoCast), when `precision.convert` is set: what was converted, how,
    from which cache entry."""

    type: Literal["precision"]
    record: dict[str, Any]


class BuildFinished(_Event):
    """The last line. `failure` = `{kind: setting|plugin|precision, code, key}` when the worker knows why (a
    `core.failure_record.Failure`: its declared keys typed, any other key kept as sent)."""

    type: Literal["build_finished"]
    outcome: WorkerEnd
    error: str | None = None
    # why it failed, when the worker knows: {kind: setting|plugin, code, key (a flat setting key)} or {kind:
    # precision, code, key: convert, reason} (docs/protocol.md's Failure table); the supervisor also classifies
    # internal errors and memory exhaustion from the logs itself (core.builder_errors)
    failure: Failure | None = None
    cleanup_status: CleanupStatus = "not_needed"
    t_cleanup_ns: int | None = None
    engine_bytes: int | None = None
    engine_sha256: str | None = None
    notes: list[str] = []
    peak_rss_bytes: int | None = None  # the worker's own peak RSS (getrusage)
    # a built engine: can it run on this machine's GPU (builds.worker.engine_validity): {status:
    # valid|suboptimal|invalid|
    # not_checked, reason, diagnostics: [{severity, msg}], gpuComputeCapability?, supportedComputeCapabilities?}
    engine_validity: dict[str, Any] | None = None
    # what TensorRT said of the model, once the worker parsed it (builds.worker.capability): {parser: {supported,
    # subgraphs: [{supported, count, nodes?}], nodes: [{index, name, op, reason, where?, functions?}]}, builder?:
    # {status: supported|refused|not_checked, reason, errors, asked} (asked only after a failed build), trial?:
    # {status: supported|refused, reason, asked} (a failed build: did it fail before its first tactic timing)}; None
    # before the parse. The supervisor folds it into summary.json's `capability` (core.capability.build_capability)
    capability: dict[str, Any] | None = None


class Queued(_Event):
    """Farm only (added by the remote transport): submitted; the tree shows "waiting for a node" until `placed`."""

    type: Literal["queued"]
    cell: str | None = None
    labels: dict[str, str] = {}
    num_gpus: float = 0
    num_cpus: float = 1
    gpu_rule: str | None = None  # why it holds num_gpus (core.farm.gpu_choice), e.g. "auto → 0 GPUs: TensorRT-RTX …"


class Placed(_Event):
    """Farm only (added by the remote transport): a node holds the cell; these go to the evidence."""

    type: Literal["placed"]
    node_id: str
    hostname: str = ""
    labels: dict[str, str] = {}
    accelerator_type: str | None = None
    gpu_ids: list[str] = []
    queue_wait_s: float = 0.0
    # no Ray actor was started for this cell: its node's host had served a cell before or gave it a preloaded worker
    # (TensorRT imported), or, for a GPU cell, an actor kept from an earlier cell of its shape took it
    warm: bool = False
    num_gpus: float | None = None  # GPUs the cell holds there, and why (core.farm.gpu_choice)
    gpu_rule: str | None = None
    cuda_visible_devices: str | None = None  # as Ray set it for the node's actor (None: not set)
    actor_pid: int | None = None  # the process of the actor that ran the cell: its node's host, or a GPU cell's own


Event = Annotated[
    Queued
    | Placed
    | BuildStarted
    | EnvironmentCaptured
    | PhaseStart
    | Step
    | PhaseFinish
    | Log
    | CacheDecisionEvent
    | BuilderReturned
    | CancelAcknowledged
    | Artifact
    | PrecisionRecord
    | BuildFinished,
    Field(discriminator="type"),
]
EVENT_ADAPTER: TypeAdapter[Event] = TypeAdapter(Event)
# type → model, in the order docs/protocol.md lists them
EVENT_MODELS: dict[str, type[_Event]] = {
    m.model_fields["type"].annotation.__args__[0]: m  # type: ignore[union-attr]
    for m in (
        EnvironmentCaptured,
        BuildStarted,
        PhaseStart,
        Step,
        PhaseFinish,
        Log,
        CacheDecisionEvent,
        BuilderReturned,
        CancelAcknowledged,
        Artifact,
        PrecisionRecord,
        BuildFinished,
        Queued,
        Placed,
    )
}


class ProtocolError(ValueError):
    pass


def parse_event(line: bytes | str) -> Event:
    try:
        ev = EVENT_ADAPTER.validate_json(line)
    except ValidationError as exc:
        raw = _json_object(line)  # a line of another version is that, before it is anything else
        if raw is not None and raw.get("v", PROTOCOL_VERSION) != PROTOCOL_VERSION:
            raise ProtocolError(_version_mismatch(raw.get("v"), raw.get("type"))) from None
        raise ProtocolError(_explain(line, exc)) from None
    except ValueError as exc:  # not JSON at all
        raise ProtocolError(f"bad event line {_head(line)!r}: {exc}") from None
    if ev.v != PROTOCOL_VERSION:
        raise ProtocolError(_version_mismatch(ev.v, ev.type))
    return ev


def _version_mismatch(v: Any, event_type: Any) -> str:
    return (
        f"worker speaks protocol version {v}, supervisor speaks {PROTOCOL_VERSION} ({PROTOCOL}, docs/protocol.md) "
        f"in a {event_type} event"
    )


def _json_object(line: bytes | str) -> dict[str, Any] | None:
    try:
        raw = json.loads(line)
    except (ValueError, RecursionError):  # not JSON, or nested deeper than the parser reads: not an event
        return None
    return raw if isinstance(raw, dict) else None


def _head(line: bytes | str) -> str:
    return line[:200] if isinstance(line, str) else line[:200].decode(errors="replace")


def _explain(line: bytes | str, exc: ValidationError) -> str:
    """One sentence a worker's author can act on: the event, the field, what the protocol declares."""
    problems = []
    for e in exc.errors():
        loc = [str(x) for x in e["loc"]]
        event, field = (loc[0], ".".join(loc[1:])) if len(loc) > 1 else ("event", ".".join(loc))
        if e["type"] == "extra_forbidden":
            declared = ", ".join(EVENT_MODELS[event].model_fields) if event in EVENT_MODELS else "?"
            problems.append(f"{event} has the undeclared field '{field}' ({PROTOCOL} declares: {declared})")
        elif e["type"] == "union_tag_invalid":
            problems.append(f"unknown event type (known: {', '.join(EVENT_MODELS)})")
        else:
            problems.append(f"{event}.{field}: {e['msg']}" if field else f"{event}: {e['msg']}")
    return f"bad event line {_head(line)!r}: " + "; ".join(problems)


class CancelControl(BaseModel):
    """Supervisor → worker, on stdin. The first cancel wins; stdin closing is a cancel from `service_shutdown`."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["cancel"] = "cancel"
    v: int = PROTOCOL_VERSION
    source: CancelSource
    t_request_ns: int


class StartControl(BaseModel):
    """Supervisor → worker, on stdin: the first line of a worker started `--parked` (a `trtls build` that may still
    be a store hit starts it before it knows: builds/supervisor/worker_launch.py). The build is certain now: load the
    builder and wait for the job. A parked worker has loaded no builder and asked no driver; stdin closing, or a
    SIGKILL of its group, ends it having done nothing."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["start"] = "start"
    v: int = PROTOCOL_VERSION


class CommitControl(BaseModel):
    """Supervisor → worker, on stdin, only to a worker whose job said `hold_commit`: the job was sent before the
    supervisor had checked the recipe, and the job it checked is the same one, so the engine may now be written."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["commit"] = "commit"
    v: int = PROTOCOL_VERSION
