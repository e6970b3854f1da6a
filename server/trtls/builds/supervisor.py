"""The parent side of a build: start the worker, fold its events, escalate a stop, write the evidence.

One small API for every face (CLI, language server, acceptance tests):

    sup = Supervisor()
    build = sup.start(loaded_recipe, "demo")          # inside a running event loop
    build.listeners.append(lambda b, ev: ...)         # every event, on the loop thread
    build.cancel("ide_stop")                          # any source, any thread
    summary = await build.wait()                      # the evidence record (summary.json)

Outcomes: built, cancelled (the builder returned after a cooperative cancel), failed, forced (the
builder ignored the cancel past `cancel_grace_s`: SIGTERM, then SIGKILL), killed (the worker died
by itself: OOM killer, segfault — never reported as cancelled).
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import signal
import sys
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trtls import __version__
from trtls.builds.artifacts import remove_or_quarantine, sha256_file, temp_files_near
from trtls.builds.history import History
from trtls.builds.orphans import process_start_id
from trtls.builds.spawn import spawn_worker
from trtls.core.atomic import atomic_write_text
from trtls.core.build_config import flat_settings
from trtls.core.builder_errors import internal_error
from trtls.core.cancel import CancelToken
from trtls.core.events import PROTOCOL_VERSION, CancelControl, ProtocolError, parse_event
from trtls.core.evidence import retry_advice, validation_status
from trtls.core.outcome import build_outcome_kind
from trtls.core.phase_tree import NS, PhaseTree
from trtls.core.recipe import EngineRecipe, LoadedRecipe

KILL_AFTER_TERM_S = 0.1  # SIGTERM → SIGKILL; the forced stop is done within grace + ~200 ms

Listener = Callable[["Build", Any], None]


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
        cache = {
            "path": str(loaded.resolve(eng.timing_cache.path)),
            "mode": overrides.get("cache_mode", eng.timing_cache.mode),
        }
    return {
        "v": PROTOCOL_VERSION,
        "type": "job",
        "build_id": build_id,
        "engine": engine,
        "onnx": str(loaded.resolve(overrides.get("onnx", eng.onnx))),
        "output": str(loaded.resolve(overrides.get("output", eng.output))),
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
    _proc: asyncio.subprocess.Process | None = None
    _loop: asyncio.AbstractEventLoop | None = None
    _done: asyncio.Future | None = None
    _events_file: Any = None
    _force: Callable[[], Any] | None = None
    _force_pending: bool = False
    # the build farm (docs/farm.md): a remote cell runs through trtls.builds.farm.remote_process
    remote: Any = None  # trtls.builds.farm.run.RemoteSpec, or None for a local worker
    cell: str | None = None  # the matrix cell's name
    parent_id: str | None = None  # the matrix build this cell belongs to
    placement: dict[str, Any] = field(default_factory=dict)  # node id, hostname, labels, accelerator, queue wait
    queued_ns: int | None = None
    _prespawned: asyncio.subprocess.Process | None = None
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

    async def wait(self) -> dict[str, Any]:
        """The summary once the build is over. Cancelling the awaiting task stops the build (event_loop)."""
        assert self._done is not None
        try:
            return await asyncio.shield(self._done)
        except asyncio.CancelledError:
            self.cancel("event_loop")
            raise

    # -- views ---------------------------------------------------------------------------------
    def elapsed_s(self, now_ns: int | None = None) -> float:
        return ((now_ns or time.monotonic_ns()) - self.t_start_ns) / NS

    def snapshot(self) -> dict[str, Any]:
        """The `trtls/buildTree` payload (the LSP layer adds the document uri)."""
        now = time.monotonic_ns()
        return {
            "buildId": self.id,
            "engine": self.engine,
            "status": self.status,
            "cancelSource": self.token.source,
            "outcome": self.outcome,
            "outcomeKind": build_outcome_kind(self.outcome),
            "outcomeMessage": self.outcome_message() if self.outcome else None,
            "elapsedS": round(
                self.elapsed_s(now) if self.outcome is None else (self.summary or {}).get("durationS", 0.0), 3
            ),
            "evidencePath": str(self.evidence_dir / "summary.json") if self.summary else None,
            "phases": self.tree.snapshot(now, self.baselines, self.t_start_ns),
            "cell": self.cell,
            "parentId": self.parent_id,
            "node": self.node_view(now) if self.remote is not None else None,
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
        }

    def progress_message(self) -> str:
        """`Building engine › Timing tactics 2/3 · 4.1 s · quiet 42 s · usual 30 s` (`stalled` when the stall rule
        says so)."""
        now = time.monotonic_ns()
        path = self.tree.deepest_running_path()
        if not path and self.status == "waiting for a node" and self.queued_ns:
            return f"waiting for a node {(now - self.queued_ns) / NS:.1f} s"
        if not path:
            return "starting worker" if self.status == "starting" else self.status
        deepest = self.tree.deepest_running_view(now, self.baselines)
        assert deepest is not None
        steps = f"{(deepest.step + 1) if deepest.step is not None else 0}/{deepest.num_steps}"
        text = " › ".join(p.name for p in path) + f" {steps} · {deepest.elapsed_s:.1f} s"
        if deepest.quiet_s is not None:
            text += f" · quiet {deepest.quiet_s:.0f} s"
            if deepest.baseline_s is not None:
                text += f" · usual {deepest.baseline_s:.0f} s"
            if deepest.stalled:
                text += " · stalled"
        if self.token.is_set:
            text += f" · stopping ({self.token.source})"
        return text

    def outcome_message(self) -> str:
        s = self.summary or {}
        if self.outcome == "built":
            return f"built in {s.get('durationS', 0):.1f} s"
        if self.outcome == "cancelled":
            return f"cancelled by {self.token.source}"
        if self.outcome == "failed":
            return f"failed: {self.error}"
        if self.outcome == "forced":
            return f"forced: the builder ignored the cancel from {self.token.source} for {self.grace_s:g} s and was terminated"
        if self.remote is not None and self.error and self.error.startswith("node lost"):
            return f"killed: {self.error}"
        return f"killed: the worker died ({self.error})"


def signal_group(proc: Any, sig: int) -> bool:
    """Signal a worker's process group: a local one by its pid, a remote one through its node (RemoteProcess)."""
    if hasattr(proc, "signal_group"):
        proc.signal_group(sig)
        return True
    try:
        os.killpg(proc.pid, sig)
        return True
    except ProcessLookupError:
        return False


def running_json(build: Build, worker_pid: int | None, local: bool = True) -> None:
    """`running.json`: the record orphan recovery finds if this process dies during the build."""
    record: dict[str, Any] = {"buildId": build.id, "engine": build.engine, "output": str(build.output)}
    if worker_pid is not None:
        record["workerPid"] = worker_pid
        # verified before orphan recovery kills it; a remote worker's pid names no process here
        record["workerStart"] = process_start_id(worker_pid) if local else None
    record.update(supervisorPid=os.getpid(), supervisorStart=process_start_id(os.getpid()), job=build.job)
    atomic_write_text(build.evidence_dir / "running.json", json.dumps(record))


def _sha256_and_close(fh: Any) -> str:
    import hashlib

    with fh:
        h = hashlib.sha256()
        while block := fh.read(1 << 20):
            h.update(block)
        return h.hexdigest()


class Supervisor:
    def __init__(self) -> None:
        self.builds: dict[str, Build] = {}

    def running(self) -> list[Build]:
        return [b for b in self.builds.values() if b.running]

    def start(
        self,
        loaded: LoadedRecipe,
        engine: str,
        *,
        overrides: dict[str, Any] | None = None,
        faults: dict[str, Any] | None = None,
        build_id: str | None = None,
        remote: Any = None,
        cell: str | None = None,
        parent_id: str | None = None,
        worker: asyncio.subprocess.Process | None = None,
    ) -> Build:
        """Start a build (needs a running loop). The recipe must have loaded without errors. `remote` (a
        `trtls.builds.farm.run.RemoteSpec`) runs the same worker on a cluster node (docs/farm.md).

        `worker`: a built-in worker the caller started early (`builds.spawn`), already importing TensorRT while
        the caller loaded the recipe; it gets this build's job. Ignored (and closed) for an external worker."""
        if loaded.recipe is None:
            raise ValueError("the recipe has errors; no build starts")
        if engine not in loaded.recipe.engines:
            raise KeyError(engine)
        build_id = build_id or new_build_id(engine if cell is None else f"{engine}.{cell}")
        job = worker_job(loaded, engine, build_id, overrides, faults)
        if remote is not None and remote.shared_dir is not None:  # nodes write straight to shared storage
            job["output"] = str(remote.shared_dir / Path(job["output"]).relative_to(loaded.base_dir))
        eng = loaded.engine(engine)
        command = list(eng.worker) if eng.worker else [sys.executable, "-m", "trtls.builds.worker"]
        build = Build(build_id, engine, loaded.path, job, eng.cancel_grace_s, command)
        build.remote, build.cell, build.parent_id = remote, cell, parent_id
        if worker is not None and eng.worker:
            worker.stdin.close()  # type: ignore[union-attr]  # an external worker was asked for: not ours to use
        elif worker is not None:
            build._prespawned = worker
        loop = asyncio.get_running_loop()
        build._loop = loop
        build._done = loop.create_future()
        self.builds[build_id] = build
        build.token.on_request(lambda source: loop.call_soon_threadsafe(self._on_cancel, build))
        build._force = lambda: asyncio.ensure_future(self._escalate(0.0, build))
        loop.create_task(self._run(build), name=f"trtls-build-{build_id}")
        return build

    async def shutdown(self, source: str = "service_shutdown") -> None:
        """Cancel every running build and wait for them (bounded by their grace + the kill)."""
        builds = self.running()
        for b in builds:
            b.cancel(source)
        if builds:
            await asyncio.gather(*(asyncio.shield(b._done) for b in builds if b._done), return_exceptions=True)

    # -- the build's life ----------------------------------------------------------------------
    async def _run(self, build: Build) -> None:
        """The build's task. Whatever goes wrong in here (a damaged .trtls folder, a listener, a bug), the
        build still ends: the worker is stopped and `wait()` gets an answer — never a build that runs forever."""
        try:
            await self._run_unguarded(build)
        except asyncio.CancelledError:
            # The event loop is going away with this process (e.g. `exit` without `shutdown`): the worker
            # sees its stdin close and cancels itself; the next supervisor completes the evidence from
            # running.json and events.jsonl (orphan recovery).
            raise
        except Exception as exc:
            build.error = f"supervisor error: {type(exc).__name__}: {exc}"
            proc = build._proc
            if proc is not None and proc.returncode is None:
                signal_group(proc, signal.SIGKILL)
            if build.outcome is None:
                try:
                    await self._finish(build, "failed")
                except BaseException as again:
                    build.outcome = build.status = "failed"
                    build.error += f"; evidence not written: {type(again).__name__}: {again}"
            if build._done is not None and not build._done.done():
                build._done.set_result(
                    build.summary
                    or {"buildId": build.id, "engine": build.engine, "outcome": "failed", "error": build.error}
                )

    async def _run_unguarded(self, build: Build) -> None:
        build.evidence_dir.mkdir(parents=True, exist_ok=True)
        if build.output.is_file():
            # Hashed beside the build, not before it (10s of MB on the critical path of every build). The file is
            # opened now: a build that replaces it later cannot change what is hashed.
            fh = open(build.output, "rb")
            build._previous_sha = asyncio.get_running_loop().run_in_executor(None, _sha256_and_close, fh)
        proc = build._prespawned
        # unbuffered: if this process dies, the next one rebuilds the evidence from what is on disk
        build._events_file = open(build.evidence_dir / "events.jsonl", "wb", buffering=0)
        if proc is None:
            running_json(build, None)  # before the spawn: a crash while spawning still leaves the record
            try:
                if build.remote is not None:
                    from trtls.builds.farm.remote_process import RemoteProcess  # Ray: only on the remote path

                    own = build.command[-1] == "trtls.builds.worker"  # the node runs its own copy of ours
                    proc = await RemoteProcess.start(build.job, build.remote, None if own else build.command)
                else:
                    proc = await spawn_worker(build.command)
            except OSError as exc:
                build.error = f"cannot start worker {build.command[0]}: {exc}"
                await self._finish(build, "failed")
                return
        build._proc, build.pid, build.status = proc, proc.pid, "running"
        running_json(build, proc.pid, local=build.remote is None)
        assert proc.stdin is not None
        proc.stdin.write((json.dumps(build.job) + "\n").encode())
        if build.token.is_set:  # cancelled before the worker existed
            self._send_control(build)
            if build._force_pending:  # and forced before it existed: the grace is already over
                asyncio.ensure_future(self._escalate(0.0, build))
        await asyncio.gather(self._read_events(build), self._read_stderr(build))
        build.exit_code = await proc.wait()
        if build.finished is not None and not build.token.forced:
            outcome = build.finished["outcome"]
        elif build.token.forced:
            outcome = "forced"
        elif getattr(proc, "lost", None):  # a remote cell whose node (or actor) died under it
            outcome = "killed"
            build.error = proc.lost
        else:
            outcome = "killed"
            sig = -build.exit_code if build.exit_code < 0 else None
            build.error = (
                f"signal {signal.Signals(sig).name}"
                if sig
                else f"exit code {build.exit_code} without a build_finished event"
            )
            if build.stderr_tail:
                build.error += f"; stderr: {build.stderr_tail[-1]}"
        await self._finish(build, outcome)

    async def _read_events(self, build: Build) -> None:
        proc = build._proc
        assert proc is not None and proc.stdout is not None
        while line := await proc.stdout.readline():
            build._events_file.write(line)
            try:
                ev = parse_event(line)
            except ProtocolError as exc:
                build.logs.append({"severity": "ERROR", "msg": str(exc)})
                continue
            self._fold(build, ev)
            for listener in list(build.listeners):
                try:
                    listener(build, ev)
                except Exception as exc:
                    build.logs.append({"severity": "ERROR", "msg": f"listener error: {exc!r}"})

    async def _read_stderr(self, build: Build) -> None:
        proc = build._proc
        assert proc is not None and proc.stderr is not None
        while line := await proc.stderr.readline():
            build.stderr_tail.append(line.decode(errors="replace").rstrip())

    def _fold(self, build: Build, ev: Any) -> None:
        kind = ev.type
        if kind in ("phase_start", "step", "phase_finish"):
            build.tree.apply(ev)
        elif kind == "queued":
            build.status, build.queued_ns = "waiting for a node", ev.t_ns
        elif kind == "placed":
            build.placement = ev.model_dump(exclude={"v", "type", "t_ns"})
            build.status = "running"
        elif kind == "build_started":
            if build.remote is not None:
                build.pid = ev.pid  # the worker's pid on its node (the evidence says which node)
            build.environment, build.config_hash, build.effective_settings = (
                ev.environment,
                ev.build_config_hash,
                ev.effective_settings,
            )
            build.optimization_profiles = ev.optimization_profiles
            build.baselines = self._history(build).baselines(ev.build_config_hash)
        elif kind == "log":
            build.logs.append({"severity": ev.severity, "msg": ev.msg})
        elif kind == "cache_decision":
            build.cache = ev.model_dump(exclude={"v", "type", "t_ns"})
        elif kind == "builder_returned":
            build.builder_returned_ns = ev.t_ns
        elif kind == "cancel_acknowledged":
            build.token.t_ack_ns = ev.t_ns
            build.token.after_complete = ev.after_complete
            build.cancel_seen_ns = getattr(ev, "t_seen_ns", None)
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

    # -- cancel and escalation -----------------------------------------------------------------
    def _on_cancel(self, build: Build) -> None:
        self._send_control(build)
        if build.running:
            asyncio.ensure_future(self._escalate(build.grace_s, build))

    def _send_control(self, build: Build) -> None:
        proc = build._proc
        if proc is None or proc.stdin is None or proc.stdin.is_closing():
            return
        msg = CancelControl(source=build.token.source, t_request_ns=build.token.t_request_ns)  # type: ignore[arg-type]
        try:
            proc.stdin.write((msg.model_dump_json() + "\n").encode())
        except (BrokenPipeError, ConnectionResetError):
            pass

    async def _escalate(self, grace_s: float, build: Build) -> None:
        await asyncio.sleep(grace_s)
        proc = build._proc
        if proc is None and build.running:  # not spawned yet: escalate as soon as it is
            build._force_pending = True
            return
        if proc is None or proc.returncode is not None or build.builder_returned_ns is not None:
            return  # the builder returned in time: the stop was cooperative
        build.token.forced = True
        build.notes.append(f"the builder did not return within {grace_s:g} s of the cancel: SIGTERM, then SIGKILL")
        for sig, wait in ((signal.SIGTERM, KILL_AFTER_TERM_S), (signal.SIGKILL, None)):
            if not signal_group(proc, sig):
                return
            if wait is None:
                return
            try:
                await asyncio.wait_for(asyncio.shield(proc.wait()), wait)
                return
            except TimeoutError:
                continue

    # -- after the worker is gone --------------------------------------------------------------
    def _history(self, build: Build) -> History:
        return History(build.recipe_path.parent / ".trtls" / "history.json")

    async def _finish(self, build: Build, outcome: str) -> None:
        t_end = time.monotonic_ns()
        if outcome in ("forced", "killed"):
            build.tree.close_open("cancelled" if outcome == "forced" else "failed", t_end)
            if build.token.is_set and build.token.t_ack_ns is None:
                build.token.t_ack_ns = t_end  # the worker is gone: nothing will build any more
            # The worker could not clean up after itself: its temp files are ours to remove.
            inventory, status = remove_or_quarantine(
                temp_files_near(build.output, build.id),
                state_dir(build.recipe_path) / "quarantine" if build.job.get("keep_evidence") else None,
                f"build {build.id} {outcome}",
            )
            build.artifacts.extend(inventory)
            build.finished = {"cleanup_status": status}
            t_clean = time.monotonic_ns()
            if build.token.is_set:
                build.token.t_cleanup_ns = t_clean
            if build.cache is None and build.job.get("timing_cache"):
                build.cache = {
                    "decision": "discarded",
                    "reason": f"the worker was {outcome} before deciding; the cache on disk was not written",
                    "path": build.job["timing_cache"]["path"],
                    "written_back": False,
                }
        build.outcome = build.status = outcome
        history = self._history(build)
        if build.config_hash:
            if outcome == "built":
                history.record(
                    build.config_hash,
                    durations=build.tree.durations(),
                    build={"buildId": build.id, "startedAt": build.started_at, "durationS": build.elapsed_s(t_end)},
                )
            elif build.token.is_set and outcome in ("cancelled", "forced"):
                running = [p for p in build.tree.phases.values() if p.status == "cancelled"]
                deepest = max(running, key=lambda p: p.id.count("."), default=None)
                if deepest is not None:
                    history.record(build.config_hash, stop_phase=deepest.id)
        if build._previous_sha is not None and not build._previous_sha.done():
            await asyncio.wait([build._previous_sha])
        build.summary = self._summary(build, t_end, history)
        build.evidence_dir.mkdir(parents=True, exist_ok=True)
        atomic_write_text(build.evidence_dir / "summary.json", json.dumps(build.summary, indent=2, default=str))
        atomic_write_text(build.evidence_dir / "tree.json", json.dumps(build.summary["phaseTree"], indent=1))
        atomic_write_text(build.evidence_dir / "environment.json", json.dumps(build.environment, indent=2, default=str))
        (build.evidence_dir / "running.json").unlink(missing_ok=True)
        if build._events_file is not None:
            build._events_file.close()
        if build._proc is not None and build._proc.stdin is not None:
            build._proc.stdin.close()
        for listener in list(build.listeners):
            try:
                listener(build, None)  # None = the build is over; summary is set
            except Exception:
                pass
        if build._done is not None and not build._done.done():
            build._done.set_result(build.summary)

    def _summary(self, build: Build, t_end: int, history: History) -> dict[str, Any]:
        env = build.environment
        cache = build.cache or {
            "decision": "cold" if not build.job.get("timing_cache") else "discarded",
            "reason": "no timing cache configured"
            if not build.job.get("timing_cache")
            else "the build ended before a cache decision",
        }
        intact = None
        if build._previous_sha is not None:
            try:
                build.previous_engine_sha = build._previous_sha.result()
            except (OSError, asyncio.InvalidStateError):
                build.previous_engine_sha = None
        if build.previous_engine_sha is not None and build.outcome != "built":
            intact = build.output.is_file() and sha256_file(build.output) == build.previous_engine_sha
        engine_written = [a for a in build.artifacts if a.get("kind") == "engine" and a.get("action") == "written"]
        repeated = (
            history.repeated_stop_phase(build.config_hash) if build.config_hash and build.outcome != "built" else None
        )
        if repeated is not None and repeated in build.tree.phases:
            repeated = f"{build.tree.phases[repeated].name} ({repeated})"
        failure = build.failure
        if failure is None and build.outcome == "failed":
            failure = internal_error(build.logs)  # also for external workers, which only send the log
        advice = retry_advice(build.outcome or "killed", cache.get("decision"), bool(intact), repeated, failure)
        lat = build.token.latencies_ms()
        seen = None
        if build.cancel_seen_ns and build.token.t_ack_ns:
            seen = round((build.token.t_ack_ns - build.cancel_seen_ns) / 1e6, 3)
        return {
            "framework": "trtls",
            "trtlsVersion": __version__,
            "buildId": build.id,
            "engine": build.engine,
            "recipe": str(build.recipe_path),
            "outcome": build.outcome,
            "error": build.error,
            "tensorrtVersion": env.get("version"),
            "builderModule": env.get("module"),
            "language": env.get("language", "python"),
            "buildConfigHash": build.config_hash,
            "gpuSku": env.get("device_name") or "none (CPU-only ahead-of-time build)",
            "computeCapability": env.get("compute_capability"),
            "effectiveSettings": build.effective_settings,
            "optimizationProfiles": build.optimization_profiles,
            "precision": build.precision,
            "failure": failure,
            "timingCacheMode": cache.get("decision"),
            "timingCache": cache,
            "cancelSource": build.token.source,
            "cancelLatencyMs": lat["cancelLatencyMs"],
            "cancelReturnAfterSeenMs": seen,  # builder return minus the callback that saw the cancel
            "cleanupLatencyMs": lat["cleanupLatencyMs"],
            "cleanupStatus": (build.finished or {}).get("cleanup_status", "not_needed"),
            "forced": build.token.forced,
            "cancelAfterComplete": build.token.after_complete,
            "laterCancelRequests": [{"source": s, "tNs": t} for s, t in build.token.later_requests],
            "retryPolicy": advice.policy,
            "retryRule": advice.rule,
            "validationStatus": validation_status(build.outcome or "killed"),
            "validationNote": "a finished build does not prove the engine correct; parity is checked by the route gates",
            "engineArtifact": engine_written[0] if engine_written else None,
            "previousEngineIntact": intact,
            "artifacts": build.artifacts,
            "notes": build.notes,
            "startedAt": build.started_at,
            "durationS": round((t_end - build.t_start_ns) / NS, 3),
            "workerPid": build.pid,
            "workerExitCode": build.exit_code,
            "stderrTail": list(build.stderr_tail)[-10:],
            "cell": build.cell,
            "parentId": build.parent_id,
            "node": build.node_view(t_end) if build.remote is not None else None,
            "logs": build.logs[-50:],
            "environment": env,
            "phaseTree": build.tree.snapshot(t_end, build.baselines, build.t_start_ns),
            "events": "events.jsonl",
        }
