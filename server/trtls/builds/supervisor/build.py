"""One build as the supervisor sees it: its id, job and options, the handles only the supervisor holds (the worker
process, the event log, the future its waiters await), and its state (`core.build_state.BuildState`: the phase tree,
cancel token, what the worker reported), which `BuildState.fold` alone changes. A face reads `build.state` and renders
it with `core.build_view` (giving it `build.time_left`, which rests on the history only the supervisor reads); the
read-only attributes below are the supervisor's and the store's reads of that state (tests/test_build_read_only.py:
no face reads them)."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, Generic, NoReturn, TypeVar, cast

from trtls.builds.roots import open_record_stream
from trtls.builds.supervisor.history import History
from trtls.builds.supervisor.job import state_dir
from trtls.builds.supervisor.time_left import build_time_left, time_left_words
from trtls.builds.supervisor.worker_process import WorkerProcess
from trtls.core import build_view
from trtls.core.build_records import BuildEnvironment, BuildTarget, NetworkTyping
from trtls.core.build_state import BuildState, CacheDiscarded, EngineCheck, Refused, Supervised, WorkerStarted
from trtls.core.cancel import CancelToken
from trtls.core.events import Artifact, BuildFinished, CacheDecisionEvent, Event, Log
from trtls.core.failure_record import Failure
from trtls.core.phase_tree import PhaseTree
from trtls.core.summary_record import Summary
from trtls.core.vocabulary import BuildOutcome, CleanupStatus

Listener = Callable[["Build", Event | None], object]  # every event, then None once the build is over


async def await_summary(done: asyncio.Future[Summary], cancel: Callable[[str], Any]) -> Summary:
    """The evidence record once `done` resolves, the future itself shielded: cancelling the awaiting task stops the
    work (`cancel("event_loop")`) and lets the stop finish and write its evidence instead of abandoning it."""
    try:
        return await asyncio.shield(done)
    except asyncio.CancelledError:
        cancel("event_loop")
        raise


T = TypeVar("T")


class Folded(Generic[T]):
    """A read-only attribute of a Build that is a field of its state (of the same name unless `field` says which):
    folded from the build's events (`BuildState.fold`), never written on the Build (mypy and the assignment both
    refuse it)."""

    def __init__(self, field: str | None = None) -> None:
        self.field = field

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name
        self.field = self.field or name

    def __get__(self, build: Any, owner: type | None = None) -> T:
        return cast(T, self if build is None else getattr(build.state, cast(str, self.field)))

    def __set__(self, build: Any, value: NoReturn) -> None:
        raise AttributeError(f"a Build's {self.name} is folded from its events: fold an event (core.build_state)")


class Build:
    """A build's id, job and options (given here, never written afterwards), the supervisor's handles, and `state`."""

    state: BuildState
    listeners: list[Listener]  # every event, then None once the build is over (how a face follows it)
    # what only the supervisor learns and keeps: read by the evidence, written by builds/supervisor/ alone
    output_check: dict[str, Any] | None
    resources: Any  # trtls.builds.supervisor.resources.ResourceSampler of a local worker
    exit_code: int | None
    previous_engine_sha: str | None
    stderr_tail: deque[str]
    _proc: WorkerProcess | None
    _loop: asyncio.AbstractEventLoop | None
    _done: asyncio.Future[Summary] | None
    _events_file: Any
    _force: Callable[[], Any] | None
    _previous_sha: asyncio.Future | None
    end_stop: CancelToken | None  # the cancel state of the work its end still does (the store's upload: attach)
    end_upload: Callable[[], str | None] | None  # that work's upload now: the remote store it sends the engine to

    def __init__(
        self,
        id: str,
        engine: str,
        recipe_path: Path,
        job: dict[str, Any],
        grace_s: float,
        command: list[str],
        *,
        remote: Any = None,
        cell: str | None = None,
        parent_id: str | None = None,
        notes: tuple[str, ...] | list[str] = (),
        started: tuple[int, float] | None = None,
    ) -> None:
        """`remote`: a farm cell's RemoteSpec (docs/farm.md; None: local), `cell` and `parent_id`: the matrix cell's
        name and its matrix build, `notes`: a face's sentences for the evidence (a retry's reason), `started`: when
        it began if before now (monotonic ns, epoch s): a job sent ahead of the check (supervisor/speculation)."""
        self.id, self.engine, self.recipe_path, self.job, self.command = id, engine, recipe_path, job, command
        self.remote = remote
        self.state = BuildState(
            id,
            engine,
            self.evidence_dir,
            grace_s,
            cell,
            parent_id,
            remote is not None,
            baselines_of=self.history().baselines,
            notes=list(notes),
        )
        if started is not None:  # given when the state is made, as the rest of what the build was asked
            self.state = replace(self.state, t_start_ns=started[0], started_at=started[1])
        self.listeners = []
        self.output_check, self.resources, self.exit_code, self.previous_engine_sha = None, None, None, None
        self.stderr_tail = deque(maxlen=40)
        self._proc = self._loop = self._done = self._events_file = self._force = self._previous_sha = None
        self.end_stop = self.end_upload = None

    @property
    def evidence_dir(self) -> Path:
        return self.recipe_path.parent / ".trtls" / "runs" / self.id

    @property
    def output(self) -> Path:
        return Path(self.job["output"])

    @property
    def running(self) -> bool:
        return self.state.running

    # -- control -------------------------------------------------------------------------------
    def cancel(self, source: str) -> bool:
        """Cooperative stop from any source and any thread; escalates after the grace period.
        A build that has ended cannot be cancelled (a stale Stop must not rewrite its evidence); a stop that comes
        while its end's own work still runs (`end_stop`: its engine sent to the remote store) stops that work."""
        if self.outcome is not None:
            if self.end_stop is not None and self.ending:
                self.end_stop.request(source)  # the build stands; its upload is cut (builds/avoidance/lookup.attach)
            return False
        return self.token.request(source)

    def stop_end_with(self, stop: CancelToken, upload: Callable[[], str | None] | None = None) -> None:
        """Hand a stop of this build to `stop` too, the cancel state of the work its end does (a listener's: the store
        sending the engine to the remote, builds/avoidance/lookup.attach): while the build runs, through its own
        cancel state; once it has ended and until its end is written, directly (the build itself stands then).
        `upload()`: the remote store (as shown) that work is sending the engine to now, or will, else None — its
        owner's reading (the store's end: builds/avoidance/lookup.upload_a_stop_cuts)."""
        self.end_stop, self.end_upload = stop, upload
        self.token.on_request(stop.request)

    def upload_a_stop_cuts(self) -> str | None:
        """The remote store (as shown) whose upload of this build's engine a stop now cuts (`cancel`; app/stop.py
        says it), or None: the build still runs (a stop stops the build), its end is over, its end's work was stopped
        already, or its end sends nothing (`stop_end_with`'s `upload`)."""
        if not self.ending or self.end_stop is None or self.end_stop.is_set or self.end_upload is None:
            return None
        return self.end_upload()

    @property
    def ending(self) -> bool:
        """It has its outcome and its end is not over yet (its evidence, then its listeners' work: the store's
        publish); `wait()` answers once it is."""
        return self.outcome is not None and self._done is not None and not self._done.done()

    def force(self) -> None:
        """Skip the grace (a second Ctrl-C): terminate the worker now."""
        if self._force is not None and self._loop is not None:
            self._loop.call_soon_threadsafe(self._force)

    # -- its life: the supervisor attaches it, gives it its worker, and ends it (no other module writes these) ----
    def attach(self, loop: asyncio.AbstractEventLoop, force: Callable[[], Any]) -> None:
        """Live on `loop`: `wait()` and `ended()` resolve there, `force()` runs `force` there."""
        self._loop, self._done, self._force = loop, loop.create_future(), force

    @property
    def worker(self) -> WorkerProcess | None:
        """The worker process once it runs; None before the spawn or when none started."""
        return self._proc

    def worker_started(self, proc: WorkerProcess) -> None:
        self._proc = proc
        self.fold(WorkerStarted(proc.pid))

    def open_event_log(self) -> Any:
        """`events.jsonl`, unbuffered: if this process dies, the next one rebuilds the evidence from it."""
        self._events_file = open_record_stream(self.evidence_dir / "events.jsonl")
        return self._events_file

    def close_worker_io(self) -> None:
        """Close the event log and the worker's input (a worker still reading it sees the end)."""
        if self._events_file is not None:
            self._events_file.close()
        if self._proc is not None and self._proc.stdin is not None:
            self._proc.stdin.close()

    def hashing_previous_engine(self, pending: asyncio.Future) -> None:
        self._previous_sha = pending  # the sha of the engine this build may replace, being computed

    async def previous_sha(self) -> str | None:
        """The previous engine's sha once computed, recorded in `previous_engine_sha` (None: unreadable)."""
        if self._previous_sha is not None:
            await asyncio.wait([self._previous_sha])
            try:
                self.previous_engine_sha = self._previous_sha.result()
            except (OSError, asyncio.CancelledError):
                self.previous_engine_sha = None
        return self.previous_engine_sha

    def resolve(self, summary: dict[str, Any]) -> None:
        """Answer `wait()` and `ended()` with the evidence record (the JSON written, as its model); the first answer
        stands."""
        if self._done is not None and not self._done.done():
            self._done.set_result(Summary.written(summary))

    async def wait(self) -> Summary:
        """The evidence record once the build is over, as its model (`Summary`; `.record()` is the JSON written).
        Cancelling the awaiting task stops the build (event_loop)."""
        assert self._done is not None
        return await await_summary(self._done, self.cancel)

    async def ended(self) -> None:
        """Wait until the evidence is written (`summary` set), without stopping the build if the waiter is
        cancelled. `outcome` is set earlier, before the output's sha is verified: a face that draws its last
        state when `running` turns False would draw a finished build with no evidence yet."""
        if self._done is not None:
            try:
                await asyncio.shield(self._done)
            except Exception:
                pass  # a build that failed to end cleanly: its waiters see the error, a face draws what it has

    # -- the worker's events and the supervisor's, folded into the state ----------------------------------------
    def fold(self, ev: Event | Supervised) -> None:
        """Apply one event to this build's state (`BuildState.fold`, the only place it changes)."""
        self.state.fold(ev)

    def deliver(self, ev: Event) -> None:
        """One event into this build's state, then to each listener (a face); a listener that fails is folded in as an
        ERROR line and the others are still told. The worker's events and the supervisor's own lines arrive this way."""
        self.fold(ev)
        for listener in list(self.listeners):
            try:
                listener(self, ev)
            except Exception as exc:
                self.fold(Log(type="log", t_ns=ev.t_ns, severity="ERROR", msg=f"listener error: {exc!r}"))

    def refuse_line(self, why: str) -> None:
        """A worker line the protocol refused: in the logs each time, and the first in the evidence's notes."""
        self.fold(Refused(why))

    # -- views (core.build_view over the state, with the time left from this engine's history) --------------------
    # A face renders `self.state` with core.build_view itself, given `time_left`; these are the supervisor's and the
    # store's (the evidence's node and duration, a matrix's cell rows, a route's sentence, the Run protocol's answers)
    def time_left(self, now_ns: int) -> str:
        """`~40 s left, 25–60 s` or `no estimate` (supervisor/time_left.py: the history on disk)."""
        return time_left_words(build_time_left(self, now_ns))

    def elapsed_s(self, now_ns: int | None = None) -> float:
        return build_view.elapsed_s(self.state, now_ns)

    def snapshot(self) -> dict[str, Any]:
        """The `trtls/buildTree` payload (the LSP layer adds the document uri)."""
        return build_view.snapshot(self.state, self.time_left)

    def node_view(self, now: int | None = None) -> dict[str, Any]:
        return build_view.node_view(self.state, now)

    def outcome_message(self) -> str:
        return build_view.outcome_message(self.state)

    def history(self) -> History:
        return History(state_dir(self.recipe_path) / "history.json")

    # the state, read-only, as the supervisor and the store read it (BuildState.fold writes it; a face reads
    # `build.state`). What only a face read is not here: placement, queued_ns, refused_lines, first_refusal
    token = Folded[CancelToken]()
    tree = Folded[PhaseTree]()
    status = Folded[str]()  # starting, running, then the outcome
    outcome = Folded[BuildOutcome | None]()
    error = Folded[str | None]()
    pid = Folded[int | None]()
    environment = Folded[BuildEnvironment]()
    effective_settings = Folded[dict[str, Any]]()
    optimization_profiles = Folded[list[dict[str, Any]]]()
    config_hash = Folded[str | None]()
    target = Folded[BuildTarget]()
    network = Folded[NetworkTyping]()
    baselines = Folded[dict[str, float]]()
    cache = Folded[CacheDecisionEvent | CacheDiscarded | None]()
    artifacts = Folded[list[Artifact]]()
    engine_checks = Folded[tuple[EngineCheck, ...]]()
    logs = Folded[list[dict[str, str]]]()
    notes = Folded[list[str]]()
    finished = Folded[BuildFinished | None]()
    cleanup_status = Folded[CleanupStatus]()
    builder_returned_ns = Folded[int | None]()
    cancel_seen_ns = Folded[int | None]()
    precision = Folded[dict[str, Any] | None]()
    failure = Folded[Failure | None]()
    # the evidence record as the JSON written; its model is `record` (what every kind of run answers,
    # builds.supervisor.runs.Run.record). The supervisor and the store read the state's: `state.record` (the JSON),
    # `state.summary` (the Summary model)
    summary = Folded[dict[str, Any] | None]("record")
    t_start_ns = Folded[int]()
    started_at = Folded[float]()
    grace_s = Folded[float]()
    cell = Folded[str | None]()
    parent_id = Folded[str | None]()

    @property
    def record(self) -> Summary | None:
        """The evidence record, once written, as its model (the state's `summary`): builds.supervisor.runs.Run."""
        return self.state.summary
