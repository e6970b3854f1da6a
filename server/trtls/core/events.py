"""The worker → supervisor event stream and the supervisor → worker control messages (`trtls.events/1`).

This is a protocol boundary: a worker may be ours or a C++ service with its own IProgressMonitor
(docs/protocol.md), so every line is validated here, once, into a typed event. Times are
CLOCK_MONOTONIC nanoseconds, which on Linux are shared by parent and child processes, so the
supervisor can subtract a worker's timestamp from its own.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from trtls.core.protocol import CANCEL_SOURCES, PROTOCOL, PROTOCOL_VERSION

__all__ = ["CANCEL_SOURCES", "PROTOCOL", "PROTOCOL_VERSION"]

CancelSource = Literal["ide_stop", "ctrl_c", "ci_timeout", "service_shutdown", "api", "event_loop"]
assert CancelSource.__args__ == CANCEL_SOURCES  # type: ignore[attr-defined]  # one list, two spellings
Outcome = Literal["built", "cancelled", "failed", "forced", "killed"]
CacheDecision = Literal["cold", "reused", "updated", "discarded", "quarantined", "not_applicable"]


class _Event(BaseModel):
    model_config = ConfigDict(extra="allow")  # newer workers may add fields; we ignore what we do not know
    v: int = PROTOCOL_VERSION
    t_ns: int  # CLOCK_MONOTONIC


class BuildStarted(_Event):
    type: Literal["build_started"]
    build_id: str
    engine: str
    pid: int
    environment: dict[str, Any]
    build_config_hash: str
    effective_settings: dict[str, Any] = {}
    optimization_profiles: list[dict[str, Any]] = []  # as the builder config holds them: index, inputs{min,opt,max}


class EnvironmentCaptured(_Event):
    """What would build the engine, measured before the input is parsed (optional: build_started repeats it)."""

    type: Literal["environment"]
    environment: dict[str, Any]


class PhaseStart(_Event):
    type: Literal["phase_start"]
    phase_id: str
    parent_id: str | None
    name: str
    num_steps: int
    tid: int = 0


class Step(_Event):
    type: Literal["step"]
    phase_id: str
    step: int


class PhaseFinish(_Event):
    type: Literal["phase_finish"]
    phase_id: str
    status: Literal["done", "cancelled"] = "done"  # cancelled: finished while the builder unwound a cancel
    step: int | None = None  # the phase's last step (steps are coalesced; the finish is never dropped)


class Log(_Event):
    type: Literal["log"]
    severity: str  # INTERNAL_ERROR, ERROR, WARNING, INFO, VERBOSE
    msg: str


class CacheDecisionEvent(_Event):
    type: Literal["cache_decision"]
    decision: CacheDecision
    reason: str
    path: str | None = None
    identity: dict[str, Any] = {}
    written_back: bool = False
    quarantined_to: str | None = None


class BuilderReturned(_Event):
    """The builder call returned (engine or None). After this there is nothing left to escalate."""

    type: Literal["builder_returned"]
    ok: bool


class CancelAcknowledged(_Event):
    type: Literal["cancel_acknowledged"]
    source: CancelSource
    t_request_ns: int | None = None  # when the cancel was requested (the requester's clock = CLOCK_MONOTONIC)
    t_seen_ns: int | None = None  # when a step_complete callback saw it and returned False
    after_complete: bool = False  # the engine was already complete: the cancel is applied after the commit


class Artifact(_Event):
    type: Literal["artifact"]
    action: Literal["written", "removed", "quarantined", "kept"]
    kind: Literal["engine", "timing_cache", "temp", "evidence"]
    path: str
    size: int | None = None
    sha256: str | None = None
    moved_to: str | None = None


class PrecisionRecord(_Event):
    """The precision step's result (ModelOpt AutoCast): what was converted, how, from which cache entry."""

    type: Literal["precision"]
    record: dict[str, Any]


class BuildFinished(_Event):
    type: Literal["build_finished"]
    outcome: Literal["built", "cancelled", "failed"]
    error: str | None = None
    # why it failed, when the worker knows: {"kind": "setting"|"plugin"|"precision"|"internal_error", "code",
    # "key" (a flat setting key), ...}; the supervisor also recognises internal errors in the logs itself
    failure: dict[str, Any] | None = None
    cleanup_status: Literal["cleaned", "quarantined", "failed", "not_needed"] = "not_needed"
    t_cleanup_ns: int | None = None
    engine_bytes: int | None = None
    engine_sha256: str | None = None
    notes: list[str] = []
    peak_rss_bytes: int | None = None  # the worker's own peak RSS (getrusage)


class Queued(_Event):
    """Remote transport only: the cell was submitted to the cluster and waits for a node that can hold it."""

    type: Literal["queued"]
    cell: str | None = None
    labels: dict[str, str] = {}
    num_gpus: float = 0
    num_cpus: float = 1


class Placed(_Event):
    """Remote transport only: a node holds the cell; the worker starts there (docs/farm.md)."""

    type: Literal["placed"]
    node_id: str
    hostname: str = ""
    labels: dict[str, str] = {}
    accelerator_type: str | None = None
    gpu_ids: list[str] = []
    queue_wait_s: float = 0.0
    warm: bool = False  # a node worker kept from an earlier cell of the same shape (no new Ray worker process)


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
    gpu_rule: str | None = None  # why it holds num_gpus (core.farm.gpu_choice), e.g. "auto → 0 GPUs: TensorRT-RTX …"


class ProtocolError(ValueError):
    pass


def parse_event(line: bytes | str) -> Event:
    try:
        ev = EVENT_ADAPTER.validate_json(line)
    except Exception as exc:  # pydantic ValidationError or bad JSON: one clear message either way
        text = line[:200] if isinstance(line, str) else line[:200].decode(errors="replace")
        raise ProtocolError(f"bad event line {text!r}: {exc}") from None
    if ev.v != PROTOCOL_VERSION:
    num_gpus: float | None = None  # GPUs the cell holds there, and why (core.farm.gpu_choice)
    gpu_rule: str | None = None
    cuda_visible_devices: str | None = None  # as Ray set it for the node worker (None: not set)
    actor_pid: int | None = None  # the node worker's process
        raise ProtocolError(f"worker speaks protocol version {ev.v}, supervisor speaks {PROTOCOL_VERSION}")
    return ev


class CancelControl(BaseModel):
    type: Literal["cancel"] = "cancel"
    v: int = PROTOCOL_VERSION
    source: CancelSource
    t_request_ns: int
