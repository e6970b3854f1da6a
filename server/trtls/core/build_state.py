"""A build's state: what every face reads of a build (its phase tree, status, outcome, what the worker reported, the
evidence record), folded from its events by `BuildState.fold` — the one place the state changes.

Two streams are folded: the worker's events (`core.events`, validated at the supervisor's edge) and the facts the
supervisor itself learns about the build (below: a note, the worker it started, the stop it forced, how the build
ended, the evidence it wrote). A face holds a state, never the supervisor's record (`builds.supervisor.build.Build`),
and renders it with `core.build_view`; a recorded event stream folded here renders as the live build did.

What a build was asked (its id, engine, cell, grace) is given when the state is made; the rest starts empty.

Typed where a reader takes fields: the evidence record reads as `core.summary_record.Summary` (`state.summary`); what
the worker reported is kept as the event the edge validated (its placement, cache decision, inventory and finish:
`Placed`, `CacheDecisionEvent`, `Artifact`, `BuildFinished`), dumped into summary.json once, when the record is
written (`builds.supervisor.summary`); the outcome and cleanup words are `core.vocabulary`'s. The fields kept as JSON
records (`dict[str, Any]`) are the ones the protocol itself declares free (the settings, profiles and precision
records a worker sends); its failure is a `core.failure_record.Failure`, its environment, target and network typing a
`core.build_records.BuildEnvironment`, `BuildTarget` and `NetworkTyping`. Folding stores what the event already
holds: no validation, no dump, no copy, per callback. The record itself changes only by a fold too: the store's
additions (`builds.avoidance.lookup.after_build`) and a farm cell's reuse (`builds.supervisor.matrix`) fold a new
`Recorded`."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from trtls.core.build_records import BuildEnvironment, BuildTarget, NetworkTyping
from trtls.core.cancel import CancelToken
from trtls.core.events import (
    PROTOCOL,
    Artifact,
    BuilderReturned,
    BuildFinished,
    BuildStarted,
    CacheDecisionEvent,
    CancelAcknowledged,
    EnvironmentCaptured,
    Event,
    Log,
    PhaseFinish,
    PhaseStart,
    Placed,
    PrecisionRecord,
    Queued,
    Step,
)
from trtls.core.failure_record import Failure
from trtls.core.phase_tree import PhaseTree
from trtls.core.summary_record import Summary
from trtls.core.vocabulary import BuildOutcome, CleanupStatus

# -- what the supervisor learns about a build, folded beside the worker's events --------------------------------


@dataclass(frozen=True)
class Noted:
    """A sentence for the evidence's notes (a forced stop, an engine replaced on disk, a record not written)."""

    text: str


@dataclass(frozen=True)
class Refused:
    """A worker line the protocol refused (`core.events.parse_event`), and why."""

    why: str


@dataclass(frozen=True)
class StatusSaid:
    """The status before the worker runs: waiting for another build of the same output, then starting."""

    status: str


@dataclass(frozen=True)
class WorkerStarted:
    pid: int | None


@dataclass(frozen=True)
class Erred:
    """Why the build failed, as the supervisor says it (replaces an earlier error: the text carries it)."""

    error: str


@dataclass(frozen=True)
class EnvironmentProbed:
    """The environment of a build whose worker never ran, asked of `worker --probe`."""

    environment: BuildEnvironment  # the worker's environment record (validated by build_end.probe_environment)


@dataclass(frozen=True)
class StoppedWaiting:
    """Cancelled before its worker started (while waiting for the output): the stop is acknowledged and clean."""

    t_ns: int


@dataclass(frozen=True)
class Forced:
    """The supervisor terminates the worker (the grace ran out, or the user asked again)."""

    note: str


@dataclass(frozen=True)
class WorkerGone:
    """A worker that was terminated or died: its open phases closed, the files it left cleaned up by the
    supervisor, and a timing cache it never decided on said discarded."""

    outcome: BuildOutcome  # forced or killed; cancelled when the user forced the stop (failed: the supervisor erred)
    t_end_ns: int
    t_cleanup_ns: int
    inventory: tuple[Artifact, ...]  # what the supervisor removed, quarantined or had to keep (builds.artifacts)
    cleanup_status: CleanupStatus
    timing_cache_path: str | None


@dataclass(frozen=True)
class CacheDiscarded:
    """The timing cache of a worker terminated (or dead) before it decided: the supervisor's decision, `discarded`
    (summary.json's `timingCache` says it in these four fields, not a worker's six)."""

    reason: str
    path: str
    decision: Literal["discarded"] = "discarded"
    written_back: Literal[False] = False


@dataclass(frozen=True)
class Ended:
    outcome: BuildOutcome


@dataclass(frozen=True)
class EngineCheck:
    """An engine the worker said it wrote, re-read from disk after the rename with the output locked: summary.json's
    row of it carries the sha on disk as `sha256`, the worker's as `reportedSha256`, `verified` and `how`."""

    index: int  # its row in `BuildState.artifacts`
    reported: str | None  # the worker's sha256
    on_disk: str | None  # None: unreadable, or not re-read
    verified: bool | None  # None: not re-read (a remote node wrote it), so the worker's sha stays in `sha256`
    how: str


@dataclass(frozen=True)
class EngineVerified:
    """The engines re-read from disk after the rename, and what differed (for the notes)."""

    checks: tuple[EngineCheck, ...]
    notes: tuple[str, ...]


@dataclass(frozen=True)
class Recorded:
    """The evidence record (summary.json) as written, or as the store amended it; a record that could not be written
    carries its notes."""

    record: dict[str, Any]  # JSON as written; readers take it as `BuildState.summary`
    notes: tuple[str, ...] = ()


Supervised = (
    Noted
    | Refused
    | StatusSaid
    | WorkerStarted
    | Erred
    | EnvironmentProbed
    | StoppedWaiting
    | Forced
    | WorkerGone
    | Ended
    | EngineVerified
    | Recorded
)


def no_baselines(config_hash: str) -> dict[str, float]:
    return {}


@dataclass
class BuildState:
    build_id: str
    engine: str
    evidence_dir: Path  # where its summary.json is written
    grace_s: float  # how long the builder may take to honour a cancel
    cell: str | None = None  # the matrix cell's name
    parent_id: str | None = None  # the matrix build this cell belongs to
    on_farm_node: bool = False  # a remote cell (docs/farm.md): it waits for a node, then runs on one
    # the recorded phase durations of a build config (the history's "usual"), read when the worker names its config
    baselines_of: Callable[[str], dict[str, float]] = field(default=no_baselines, repr=False, compare=False)
    t_start_ns: int = field(default_factory=time.monotonic_ns)
    started_at: float = field(default_factory=time.time)
    token: CancelToken = field(default_factory=CancelToken)
    tree: PhaseTree = field(default_factory=PhaseTree)
    status: str = "starting"  # starting, running, then the outcome
    outcome: BuildOutcome | None = None
    error: str | None = None
    pid: int | None = None
    # what builds it (core.build_records, validated at the edge); given no keys until the worker says
    environment: BuildEnvironment = field(default_factory=BuildEnvironment)
    # the worker's records, free JSON as the protocol declares them (core.events.BuildStarted), written as they are
    effective_settings: dict[str, Any] = field(default_factory=dict)
    optimization_profiles: list[dict[str, Any]] = field(default_factory=list)
    config_hash: str | None = None
    # what the engine is built for and the parsed network's typing (core.build_records, validated at the edge);
    # given no keys until build_started
    target: BuildTarget = field(default_factory=BuildTarget)
    network: NetworkTyping = field(default_factory=NetworkTyping)
    baselines: dict[str, float] = field(default_factory=dict)
    # summary.json's `timingCache`: the worker's cache_decision, or the supervisor's `discarded` for a killed worker
    cache: CacheDecisionEvent | CacheDiscarded | None = None
    # summary.json's `artifacts`: the worker's inventory, then what the supervisor cleaned up after a killed one
    artifacts: list[Artifact] = field(default_factory=list)
    engine_checks: tuple[EngineCheck, ...] = ()  # the written engines re-read from disk (EngineVerified)
    logs: list[dict[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    finished: BuildFinished | None = None  # the worker's last line
    # what became of the files a stopped build started: the worker's word, or the supervisor's for a killed worker
    cleanup_status: CleanupStatus = "not_needed"
    builder_returned_ns: int | None = None
    cancel_seen_ns: int | None = None
    precision: dict[str, Any] | None = None  # the AutoCast record (free JSON: core.events.PrecisionRecord)
    failure: Failure | None = None  # why it failed, as the worker says (core.events.BuildFinished, validated)
    placement: Placed | None = None  # the node that holds a farm cell
    queued_ns: int | None = None
    refused_lines: int = 0  # worker lines that broke the protocol
    first_refusal: str | None = None
    # the evidence record as written (summary.json), once written, as the JSON written (the store's amendment is a
    # new `Recorded`: builds.avoidance.lookup.after_build); readers take it typed, as `summary`
    record: dict[str, Any] | None = None

    @property
    def running(self) -> bool:
        return self.outcome is None

    @property
    def summary(self) -> Summary | None:
        """The evidence record, once written, as the one model every reader takes fields from (not validated again:
        this process wrote it)."""
        return None if self.record is None else Summary.written(self.record)

    def fold(self, ev: Event | Supervised) -> None:
        """Apply one event, the worker's or the supervisor's, to this state: the only place it changes."""
        token = self.token
        match ev:
            case Noted(text=text):
                self.notes.append(text)
            case Refused(why=why):
                # in the logs each time, and the first in the evidence's notes: the author of an external worker
                # reads what was wrong in the first build's summary
                self.refused_lines += 1
                self.logs.append({"severity": "ERROR", "msg": why})
                if self.refused_lines == 1:
                    self.first_refusal = why
                    self.notes.append(f"the worker broke {PROTOCOL} (docs/protocol.md); its line was refused: {why}")
            case StatusSaid(status=status):
                self.status = status
            case WorkerStarted(pid=pid):
                self.pid, self.status = pid, "running"
            case Erred(error=error):
                self.error = error
            case EnvironmentProbed(environment=environment):
                self.environment = environment
            case StoppedWaiting(t_ns=t_ns):
                token.t_ack_ns = token.t_cleanup_ns = t_ns
            case Forced(note=note):
                token.forced = True
                self.notes.append(note)
            case WorkerGone():
                self.tree.close_open("failed" if ev.outcome == "killed" else "cancelled", ev.t_end_ns)
                if token.is_set and token.t_ack_ns is None:
                    token.t_ack_ns = ev.t_end_ns  # the worker is gone: nothing will build any more
                self.artifacts.extend(ev.inventory)
                self.cleanup_status = ev.cleanup_status
                if token.is_set:
                    token.t_cleanup_ns = ev.t_cleanup_ns
                if self.cache is None and ev.timing_cache_path is not None:
                    self.cache = CacheDiscarded(
                        f"the worker was {ev.outcome} before deciding; the cache on disk was not written",
                        ev.timing_cache_path,
                    )
            case Ended(outcome=outcome):
                self.outcome = self.status = outcome
            case EngineVerified():
                self.engine_checks = ev.checks
                self.notes.extend(ev.notes)
            case Recorded():
                self.record = ev.record
                self.notes.extend(ev.notes)
            case _:
                self._fold_worker(ev)

    def _fold_worker(self, ev: Event) -> None:
        token = self.token
        match ev:
            case PhaseStart() | Step() | PhaseFinish():
                self.tree.apply(ev)
            case Queued():
                self.status, self.queued_ns = "waiting for a node", ev.t_ns
            case Placed():
                self.placement, self.status = ev, "running"
            case EnvironmentCaptured():
                self.environment = ev.environment
            case BuildStarted():
                if self.on_farm_node:
                    self.pid = ev.pid  # the worker's pid on its node (the evidence says which node)
                self.environment, self.config_hash = ev.environment, ev.build_config_hash
                self.effective_settings, self.optimization_profiles = ev.effective_settings, ev.optimization_profiles
                self.target, self.network = ev.target, ev.network
                self.baselines = self.baselines_of(ev.build_config_hash)
            case Log():
                self.logs.append({"severity": ev.severity, "msg": ev.msg})
            case CacheDecisionEvent():
                self.cache = ev
            case BuilderReturned():
                self.builder_returned_ns = ev.t_ns
            case CancelAcknowledged():
                token.t_ack_ns = ev.t_ns
                token.after_complete = ev.after_complete
                self.cancel_seen_ns = ev.t_seen_ns
            case Artifact():
                self.artifacts.append(ev)
            case PrecisionRecord():
                self.precision = ev.record
            case BuildFinished():
                self.finished, self.cleanup_status = ev, ev.cleanup_status
                self.error = ev.error
                self.failure = ev.failure
                self.notes.extend(ev.notes)
                if ev.t_cleanup_ns and token.is_set:
                    token.t_cleanup_ns = ev.t_cleanup_ns
