"""One build as the supervisor sees it: its job, its live state (phase tree, cancel token, what the worker
reported), and the views every face renders (tree snapshot, progress line, outcome message)."""

from __future__ import annotations

import asyncio
import secrets
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trtls.builds.roots import judged_write_root, open_record_stream
from trtls.builds.supervisor.history import History
from trtls.builds.supervisor.time_left import time_left_now, with_time_left
from trtls.builds.supervisor.worker_process import WorkerProcess
from trtls.core.build_config import flat_settings
from trtls.core.cancel import CancelToken
from trtls.core.display import (
    build_description,
    human_seconds,
    node_text,
    outcome_text,
    progress_text,
    rebuilt_text,
    stopping_text,
    waiting_text,
)
from trtls.core.events import PROTOCOL, PROTOCOL_VERSION, Event
from trtls.core.outcome import build_outcome_kind
from trtls.core.phase_tree import NS, PhaseTree
from trtls.core.recipe import EngineRecipe, LoadedRecipe
from trtls.core.summary_record import Summary

Listener = Callable[["Build", Event | None], object]  # every event, then None once the build is over


def state_dir(recipe_path: Path) -> Path:
    return recipe_path.parent / ".trtls"


def new_build_id(engine: str) -> str:
    return f"{engine}-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"


def worker_job(
    loaded: LoadedRecipe,
    engine: str,
    build_id: str,
    overrides: dict[str, Any] | None = None,
    faults: dict | None = None,
) -> dict[str, Any]:
    eng: EngineRecipe = loaded.engine(engine)
    settings = flat_settings(eng.builder)
    overrides = overrides or {}
    settings.update(overrides.get("settings", {}))  # a matrix cell replaces settings, profiles, onnx, output
    cache = None
    if eng.timing_cache is not None:
        path = loaded.resolve(eng.timing_cache.path)
        mode = overrides.get("cache_mode", eng.timing_cache.mode)
        cache = {"path": str(path), "mode": mode, "write_root": str(judged_write_root(loaded, path))}
    return {
        "v": PROTOCOL_VERSION,
        "type": "job",
        "build_id": build_id,
        "engine": engine,
        "onnx": str(loaded.resolve(overrides.get("onnx", eng.onnx))),
        "output": str(loaded.resolve(overrides.get("output", eng.output))),
        # where the engine's rename must still land when it happens (a folder swapped for a symlink is refused)
        "write_root": str(judged_write_root(loaded, loaded.resolve(overrides.get("output", eng.output)))),
        "timing_cache": cache,
        "settings": settings,
        "profiles": overrides["profiles"] if "profiles" in overrides else eng.job_profiles(),
        "precision": {**eng.precision.model_dump(), "cache_dir": str(state_dir(loaded.path) / "precision")},
        "plugins": {
            **eng.plugins.model_dump(),
            "libraries": [str(loaded.resolve(p)) for p in eng.plugins.libraries],
            "serialize": [str(loaded.resolve(p)) for p in eng.plugins.serialize],
        },
        "builder_module": overrides.get("builder_module", eng.builder_module),
        "keep_evidence": eng.keep_evidence,
        "quarantine_dir": str(state_dir(loaded.path) / "quarantine"),
        "faults": faults or {},
        "no_monitor": bool(overrides.get("no_monitor")),
    }


async def await_summary(done: asyncio.Future[dict[str, Any]], cancel: Callable[[str], Any]) -> dict[str, Any]:
    """The summary once `done` resolves, the future itself shielded: cancelling the awaiting task stops the work
    (`cancel("event_loop")`) and lets the stop finish and write its evidence instead of abandoning it."""
    try:
        return await asyncio.shield(done)
    except asyncio.CancelledError:
        cancel("event_loop")
        raise


@dataclass
class Build:
    id: str
    engine: str
    recipe_path: Path
    job: dict[str, Any]
    grace_s: float
    command: list[str]
    token: CancelToken = field(default_factory=CancelToken)
    tree: PhaseTree = field(default_factory=PhaseTree)
    listeners: list[Listener] = field(default_factory=list)
    status: str = "starting"  # starting, running, then the outcome
    outcome: str | None = None
    error: str | None = None
    environment: dict[str, Any] = field(default_factory=dict)
    effective_settings: dict[str, Any] = field(default_factory=dict)
    optimization_profiles: list[dict[str, Any]] = field(default_factory=list)
    config_hash: str | None = None
    target: dict[str, Any] = field(default_factory=dict)
    network: dict[str, Any] = field(default_factory=dict)
    output_check: dict[str, Any] | None = None
    resources: Any = None  # trtls.builds.supervisor.resources.ResourceSampler of a local worker
    baselines: dict[str, float] = field(default_factory=dict)
    cache: dict[str, Any] | None = None
    artifacts: list[dict[str, Any]] = field(default_factory=list)
    logs: list[dict[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    finished: dict[str, Any] | None = None
    builder_returned_ns: int | None = None
    cancel_seen_ns: int | None = None
    pid: int | None = None
    exit_code: int | None = None
    summary: dict[str, Any] | None = None
    t_start_ns: int = field(default_factory=time.monotonic_ns)
    started_at: float = field(default_factory=time.time)
    previous_engine_sha: str | None = None
    precision: dict[str, Any] | None = None
    failure: dict[str, Any] | None = None
    stderr_tail: deque = field(default_factory=lambda: deque(maxlen=40))
    _proc: WorkerProcess | None = None
    _loop: asyncio.AbstractEventLoop | None = None
    _done: asyncio.Future | None = None
    _events_file: Any = None
    _force: Callable[[], Any] | None = None
    remote: Any = None  # the build farm (docs/farm.md): a remote cell's RemoteSpec (farm.remote_process); None: local
    cell: str | None = None  # the matrix cell's name
    parent_id: str | None = None  # the matrix build this cell belongs to
    placement: dict[str, Any] = field(default_factory=dict)  # node id, hostname, labels, accelerator, queue wait
    queued_ns: int | None = None
    refused_lines: int = 0  # worker lines that broke the protocol (core.events.parse_event refused them)
    first_refusal: str | None = None
    _previous_sha: asyncio.Future | None = None

    @property
    def evidence_dir(self) -> Path:
        return self.recipe_path.parent / ".trtls" / "runs" / self.id

    @property
    def output(self) -> Path:
        return Path(self.job["output"])

    @property
    def running(self) -> bool:
        return self.outcome is None

    # -- control -------------------------------------------------------------------------------
    def cancel(self, source: str) -> bool:
        """Cooperative stop from any source and any thread; escalates after the grace period.
        A build that has ended cannot be cancelled (a stale Stop must not rewrite its evidence)."""
        if self.outcome is not None:
            return False
        return self.token.request(source)

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
        self._proc, self.pid, self.status = proc, proc.pid, "running"

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
        """Answer `wait()` and `ended()` with the evidence record; the first answer stands."""
        if self._done is not None and not self._done.done():
            self._done.set_result(summary)

    async def wait(self) -> dict[str, Any]:
        """The summary once the build is over. Cancelling the awaiting task stops the build (event_loop)."""
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

    # -- views ---------------------------------------------------------------------------------
    def elapsed_s(self, now_ns: int | None = None) -> float:
        return ((now_ns or time.monotonic_ns()) - self.t_start_ns) / NS

    def shown_elapsed_s(self, now_ns: int | None = None) -> float:
        """The build's time as every face shows it: running so far, or the recorded duration once it ended."""
        return self.elapsed_s(now_ns) if self.outcome is None else float((self.summary or {}).get("durationS", 0.0))

    def description(self, now_ns: int | None = None, node: dict[str, Any] | None = None) -> str:
        """The build's row in words (`building · 4.1 s`, `cancelled by ide_stop · 3.0 s`; trtls.core.display); a
        matrix cell adds where it runs, and says only that while it waits for a node."""
        text = build_description(
            self.running, self.status, self.outcome, self.token.source, self.shown_elapsed_s(now_ns)
        )
        if self.parent_id is None:
            return text
        if node is None and self.remote is not None:
            node = self.node_view(now_ns)
        where = node_text(node, self.running)
        return where if self.running and node is not None and "nodeId" not in node else f"{text} · {where}"

    def snapshot(self) -> dict[str, Any]:
        """The `trtls/buildTree` payload (the LSP layer adds the document uri)."""
        now = time.monotonic_ns()
        elapsed = self.shown_elapsed_s(now)
        node = self.node_view(now) if self.remote is not None else None
        return {
            "buildId": self.id,
            "engine": self.engine,
            "status": self.status,
            "cancelSource": self.token.source,
            "outcome": self.outcome,
            "outcomeKind": build_outcome_kind(self.outcome),
            "outcomeMessage": self.outcome_message() if self.outcome else None,
            "rebuiltBecause": rebuilt_text(Summary.written(self.summary) if self.summary else None),
            "elapsedS": round(elapsed, 3),
            "evidencePath": str(self.evidence_dir / "summary.json") if self.summary else None,
            "phases": self.tree.snapshot(now, self.baselines, self.t_start_ns),
            "cell": self.cell,
            "parentId": self.parent_id,
            "node": node,
            "running": self.running,
            "description": self.description(now, node),
            "where": node_text(node, self.running),
            "elapsedText": human_seconds(elapsed),
            "timeLeft": time_left_now(self, now),  # the progress message's words (supervisor/time_left.py)
        }

    def node_view(self, now: int | None = None) -> dict[str, Any]:
        """Where a remote cell is: waiting for a node (with how long), or the node that holds it."""
        if not self.placement:
            waited = ((now or time.monotonic_ns()) - self.queued_ns) / NS if self.queued_ns else 0.0
            return {"waitingS": round(waited, 3)} if self.outcome is None else {}
        p = self.placement
        return {
            "nodeId": p.get("node_id"),
            "hostname": p.get("hostname"),
            "labels": p.get("labels", {}),
            "acceleratorType": p.get("accelerator_type"),
            "gpuIds": p.get("gpu_ids", []),
            "queueWaitS": p.get("queue_wait_s"),
            "warmWorker": p.get("warm", False),
            "numGpus": p.get("num_gpus"),
            "gpuRule": p.get("gpu_rule"),
            "cudaVisibleDevices": p.get("cuda_visible_devices"),
        }

    def progress_message(self) -> str:
        """`Building engine › Timing tactics 2/3 · 4.1 s · quiet 42 s · usual 30 s` (`stalled` when the stall rule
        says so)."""
        now = time.monotonic_ns()
        path = self.tree.deepest_running_path()
        if not path and self.status == "waiting for a node" and self.queued_ns:
            return waiting_text((now - self.queued_ns) / NS)
        if not path:
            return "starting worker" if self.status == "starting" else self.status
        deepest = self.tree.deepest_running_view(now, self.baselines)
        assert deepest is not None
        text = progress_text([p.name for p in path], deepest.detail)
        if self.token.is_set:
            text += f" · {stopping_text(self.token.source)}"
        return with_time_left(self, text, now)  # `· ~40 s left, 25–60 s` or `· no estimate` (supervisor/time_left.py)

    def outcome_message(self) -> str:
        """How it ended, in a sentence (trtls.core.display.outcome_text): `built in 4.1 s`, `cancelled by ide_stop`."""
        if self.outcome == "reused":  # a farm node served the cell from the remote store (builds/farm/node_reuse.py)
            return str((self.summary or {}).get("message") or "reused: its engine came from the engine store")
        lost = self.remote is not None and (self.error or "").startswith("node lost")
        duration = (self.summary or {}).get("durationS", 0)
        return outcome_text(self.outcome, duration, self.token.source, self.error, self.grace_s, lost,
                            self.refused_lines, self.first_refusal)  # fmt: skip

    def history(self) -> History:
        return History(state_dir(self.recipe_path) / "history.json")

    # -- the worker's events -------------------------------------------------------------------
    def refuse_line(self, why: str) -> None:
        """A worker line the protocol refused: in the logs each time, and the first in the evidence's notes, so the
        author of an external worker reads what was wrong in the first build's summary."""
        self.refused_lines += 1
        self.logs.append({"severity": "ERROR", "msg": why})
        if self.refused_lines == 1:
            self.first_refusal = why
            self.notes.append(f"the worker broke {PROTOCOL} (docs/protocol.md); its line was refused: {why}")

    def fold(self, ev: Any) -> None:
        """Apply one worker event to this build's state."""
        build = self
        kind = ev.type
        if kind in ("phase_start", "step", "phase_finish"):
            build.tree.apply(ev)
        elif kind == "queued":
            build.status, build.queued_ns = "waiting for a node", ev.t_ns
        elif kind == "placed":
            build.placement = ev.model_dump(exclude={"v", "type", "t_ns"})
            build.status = "running"
        elif kind == "environment":
            build.environment = ev.environment
        elif kind == "build_started":
            if build.remote is not None:
                build.pid = ev.pid  # the worker's pid on its node (the evidence says which node)
            build.environment, build.config_hash = ev.environment, ev.build_config_hash
            build.effective_settings, build.optimization_profiles = ev.effective_settings, ev.optimization_profiles
            build.target, build.network = ev.target, ev.network
            build.baselines = build.history().baselines(ev.build_config_hash)
        elif kind == "log":
            build.logs.append({"severity": ev.severity, "msg": ev.msg})
        elif kind == "cache_decision":
            build.cache = ev.model_dump(exclude={"v", "type", "t_ns"})
        elif kind == "builder_returned":
            build.builder_returned_ns = ev.t_ns
        elif kind == "cancel_acknowledged":
            build.token.t_ack_ns = ev.t_ns
            build.token.after_complete = ev.after_complete
            build.cancel_seen_ns = ev.t_seen_ns
        elif kind == "artifact":
            build.artifacts.append(ev.model_dump(exclude={"v", "type", "t_ns"}, exclude_none=True))
        elif kind == "precision":
            build.precision = ev.record
        elif kind == "build_finished":
            build.finished = ev.model_dump()
            build.error = ev.error
            build.failure = ev.failure
            build.notes.extend(ev.notes)
            if ev.t_cleanup_ns and build.token.is_set:
                build.token.t_cleanup_ns = ev.t_cleanup_ns
