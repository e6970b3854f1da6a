"""The parent side of a build: start the worker, fold its events, escalate a stop (its own module:
builds/supervisor/stop_escalation.py), write the evidence.

One small API for every face (CLI, language server, acceptance tests):

    sup = Supervisor()
    build = sup.start(loaded_recipe, "demo")          # inside a running event loop
    build.listeners.append(lambda b, ev: ...)         # every event, on the loop thread
    build.cancel("ide_stop")                          # any source, any thread
    summary = await build.wait()                      # the evidence record (summary.json) as a Summary

Outcomes: built, cancelled (the builder returned after a cooperative cancel, or the user forced the stop with a
second request: `forced: true` then), failed, forced (the builder ignored the cancel past `cancel_grace_s`: SIGTERM,
then SIGKILL), killed (the worker died by itself: OOM killer, segfault — never reported as cancelled).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sys
import time
from pathlib import Path
from typing import Any

from trtls import fs
from trtls.builds.roots import evidence_error, state_root
from trtls.builds.supervisor.build import Build, Listener
from trtls.builds.supervisor.build_end import finish_build, probe_environment
from trtls.builds.supervisor.job import new_build_id, state_dir, worker_job
from trtls.builds.supervisor.output_guard import OutputGuard
from trtls.builds.supervisor.output_probe import output_problem
from trtls.builds.supervisor.resources import ResourceSampler
from trtls.builds.supervisor.retention import Policy, auto_collect, policy_of
from trtls.builds.supervisor.running_record import note_previous_sha, process_owner, running_json, sha256_and_close
from trtls.builds.supervisor.spawn import reap_beside, spawn_worker, taken_by_build, worker_nonce
from trtls.builds.supervisor.speculation import JobAhead
from trtls.builds.supervisor.stop_escalation import StopEscalation, signal_group
from trtls.builds.supervisor.worker_process import WorkerProcess
from trtls.core.build_state import Ended, EnvironmentProbed, Erred, Noted, StoppedWaiting
from trtls.core.events import CommitControl, ProtocolError, parse_event
from trtls.core.recipe import LoadedRecipe
from trtls.core.vocabulary import BuildOutcome

RESOURCE_SAMPLE_S = 0.25  # /proc VmHWM samples of the worker (the peak of a worker that dies)
NODE_PYTHON = "{python}"  # in a remote worker command: the node's interpreter (trtls.builds.farm.node_worker)

__all__ = ["Build", "Listener", "Supervisor", "new_build_id", "state_dir", "worker_job"]


def _error_of(build: Build, exc: Exception) -> str:
    """A record under `.trtls` that cannot be written (a full disk, a read-only or swapped folder) is TRT413, located
    on the record; anything else is the supervisor's own error."""
    name = getattr(exc, "filename", None)
    if isinstance(exc, OSError) and isinstance(name, str):
        where = Path(name)
        if state_dir(build.recipe_path) in (where, *where.parents):
            return evidence_error(exc, where if where.is_relative_to(build.evidence_dir) else build.evidence_dir)
    return f"supervisor error: {type(exc).__name__}: {exc}"


def light_gc(trtls_dir: Path, policy: Policy) -> None:
    """Retention after a build (builds/retention.auto_collect: only past the bounds, a few runs at a time). Upkeep
    never fails a build: an error here is left for `trtls gc` to report."""
    try:
        auto_collect(trtls_dir, policy)
    except Exception:
        pass


class Supervisor:
    def __init__(self, owner: str | None = None) -> None:
        """`owner`: what this process is, for the records a kill leaves (default: from its subcommand)."""
        self.builds: dict[str, Build] = {}
        self.owner = process_owner(owner)
        self.guards: dict[str, OutputGuard] = {}  # build id → its hold on the output (builds/output_guard)
        self.wait_for_output: dict[str, bool] = {}
        self.retention: dict[str, Policy] = {}  # build id → the recipe's [evidence] bounds, for the pass after it
        self.prespawned: dict[str, WorkerProcess] = {}  # build id → the worker started early for it (until spawned)
        self.stops = StopEscalation()  # the cancel, then SIGTERM and SIGKILL past the grace; whose stop it was
        self.sent_ahead: set[str] = set()  # builds whose worker got its job before the check: it waits for `commit`
        self.reaping: set[asyncio.Future[int]] = set()  # the exits of workers whose last event ended their build

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
        wait_for_output: bool = True,
        job: dict[str, Any] | None = None,
        grace_s: float | None = None,
        notes: tuple[str, ...] = (),
        ahead: JobAhead | None = None,
    ) -> Build:
        """Start a build (needs a running loop). The recipe must have loaded without errors. `remote` (a
        `trtls.builds.farm.run.RemoteSpec`) runs the same worker on a cluster node (docs/farm.md).

        `worker`: a built-in worker the caller started early (`builds.supervisor.spawn`), already importing TensorRT
        while the caller loaded the recipe; it gets this build's job. Ignored (and closed) for an external worker.

        `wait_for_output`: when another build (any process) holds this output, wait for it (True) or end `failed`
        with TRT410 at once (False). `job`: the worker job the caller built once for this request (trtls.app, which
        keyed it first); built here when not given. `grace_s` (None: the recipe's) and `notes` (for the evidence):
        how a face runs it, passed here — nothing outside the supervisor writes a Build. `ahead`: `job` went to `worker`
        before the check (builds/supervisor/speculation.py): it gets its `commit` line where the job would be sent."""
        if loaded.recipe is None:
            raise ValueError("the recipe has errors; no build starts")
        if engine not in loaded.recipe.engines:
            raise KeyError(engine)
        if job is not None:
            build_id, job = job["build_id"], dict(job)
        build_id = build_id or new_build_id(engine if cell is None else f"{engine}.{cell}")
        job = job if job is not None else worker_job(loaded, engine, build_id, overrides, faults)
        if remote is not None and remote.shared_dir is not None:  # nodes write straight to shared storage
            job["output"] = str(remote.shared_dir / Path(job["output"]).relative_to(loaded.base_dir))
        eng = loaded.engine(engine)
        command = [sys.executable, "-m", "trtls.builds.worker"] if eng.builds_in_our_worker else list(eng.worker or ())
        grace = eng.cancel_grace_s if grace_s is None else grace_s
        if ahead is not None:  # the caller checked it is this job (same_job), for its built-in worker
            notes = (*notes, ahead.note)
        started = (ahead.t_sent_ns, ahead.sent_at) if ahead is not None else None  # its build began then
        build = Build(
            build_id,
            engine,
            loaded.path,
            job,
            grace,
            command,
            remote=remote,
            cell=cell,
            parent_id=parent_id,
            notes=notes,
            started=started,
        )
        if worker is not None and not eng.builds_in_our_worker:
            worker.stdin.close()  # type: ignore[union-attr]  # an external worker was asked for: not ours to use
        elif worker is not None:
            self.prespawned[build_id] = worker
            if ahead is not None:
                self.sent_ahead.add(build_id)
        loop = asyncio.get_running_loop()
        build.attach(loop, force=lambda: self.stops.force_now(build))
        self.builds[build_id] = build
        self.wait_for_output[build_id] = wait_for_output
        self.retention[build_id] = policy_of(loaded.recipe.evidence)
        build.token.on_request(lambda source: loop.call_soon_threadsafe(self.stops.on_cancel, build))
        loop.create_task(self._run(build), name=f"trtls-build-{build_id}")
        if worker is not None and eng.builds_in_our_worker:
            taken_by_build(worker)  # its build's task owns it now: a face's discard of it is a no-op (spawn.py)
        return build

    async def shutdown(self, source: str = "service_shutdown") -> None:
        """Cancel every running build and wait for them (bounded by their grace + the kill)."""
        builds = self.running()
        for b in builds:
            b.cancel(source)
        if builds:
            await asyncio.gather(*(b.ended() for b in builds), return_exceptions=True)

    # -- the build's life ----------------------------------------------------------------------
    async def _run(self, build: Build) -> None:
        """The build's task. Whatever goes wrong in here (a damaged .trtls folder, a listener, a bug), the
        build still ends: the worker is stopped and `wait()` gets an answer — never a build that runs forever."""
        try:
            await self._run_unguarded(build)
            return
        except asyncio.CancelledError:
            # The event loop is going away with this process (e.g. `exit` without `shutdown`): the worker
            # sees its stdin close and cancels itself; the next supervisor completes the evidence from
            # running.json and events.jsonl (orphan recovery).
            raise
        except Exception as exc:
            build.fold(Erred(_error_of(build, exc)))
            proc = build.worker
            if proc is not None and proc.returncode is None:
                signal_group(proc, signal.SIGKILL)
            if build.outcome is None:
                try:
                    await self._finish(build, "failed")
                except BaseException as again:
                    build.fold(Ended("failed"))
                    build.fold(Erred(f"{build.error}; evidence not written: {type(again).__name__}: {again}"))
            build.resolve(
                build.state.record
                or {"buildId": build.id, "engine": build.engine, "outcome": "failed", "error": build.error}
            )
        finally:
            self.prespawned.pop(build.id, None)
            self.stops.forget(build.id)
            self.sent_ahead.discard(build.id)
            guard = self.guards.get(build.id)
            if guard is not None:
                guard.release()

    async def _run_unguarded(self, build: Build) -> None:
        fs.ensure_folder(build.evidence_dir, within=state_root(build.evidence_dir))
        proc: WorkerProcess | None = self.prespawned.pop(build.id, None)
        guard = self.guards[build.id] = OutputGuard.for_build(build, self.owner)
        if not await guard.take(build, wait=self.wait_for_output.get(build.id, True)):
            # another build holds the output (--no-wait), the build was cancelled while waiting, or no lock
            await self._no_job(proc)
            if build.token.is_set and build.error is None:
                build.fold(StoppedWaiting(time.monotonic_ns()))
                build.fold(Noted(f"cancelled while waiting for another build of {build.output}; nothing was built"))
                await self._finish(build, "cancelled")
            else:
                await self._finish(build, "failed")
            return
        if build.output.is_file():
            # Hashed beside the build, not before it (10s of MB on the critical path of every build). The file is
            # opened now: a build that replaces it later cannot change what is hashed. Not through a symlink (the
            # output policy refuses a linked output; its previous engine is not ours to vouch for).
            opened = contextlib.ExitStack()
            with contextlib.suppress(OSError):
                fh = opened.enter_context(fs.open_regular(build.output, limit=None, follow=False))
                hashing = asyncio.get_running_loop().run_in_executor(None, sha256_and_close, opened, fh)
                hashing.add_done_callback(lambda done: note_previous_sha(build, done))
                build.hashing_previous_engine(hashing)
        # Before the build spends its time: can the engine be written where it must go? (A remote node writes
        # to its own view of the path; only a local folder can be checked from here — a local farm's node is this
        # machine, and its worker writes the output in place.)
        root = Path(build.job["write_root"]) if build.job.get("write_root") else None  # judged at load
        here = build.remote is None or bool(getattr(build.remote, "same_machine", False))
        # The probe (three fsynced writes, a rename, their folder's fsyncs) runs on a thread while this one writes
        # running.json (fsynced too): a journaling filesystem commits fsyncs issued together at once, and both are on
        # the way to the worker's job. A failed probe's running.json is removed when its evidence is written.
        loop = asyncio.get_running_loop()
        probing = loop.run_in_executor(None, output_problem, build.output, build.id, root) if here else None
        if proc is not None:  # started early: it waits for its job
            running_json(build, proc.pid, guard, local=build.remote is None, nonce=worker_nonce(proc))
        else:
            running_json(build, None, guard)  # before the spawn: a crash while spawning still leaves the record
        problem = await probing if probing is not None else None
        build.output_check = {
            "path": str(build.output.parent),
            "writable": problem is None if here else None,
            "error": problem[1] if problem else (None if here else "not checked here: a remote node writes it"),
            "code": problem[0] if problem else None,
        }
        if problem is not None:
            what = "the output folder is not writable" if problem[0] == "TRT405" else "the output cannot be replaced"
            build.fold(Erred(f"{problem[0]} {what}: {problem[1]}; nothing was built"))
            await self._no_job(proc)
            build.fold(EnvironmentProbed(await probe_environment(build)))  # the evidence says what would build
            await self._finish(build, "failed")
            return
        events = build.open_event_log()  # unbuffered: a next process rebuilds the evidence from what is on disk
        if proc is None:
            try:
                if build.remote is not None:
                    from trtls.builds.farm.remote_process import RemoteProcess  # Ray: only on the remote path

                    if build.command[1:3] == ["-m", "trtls.builds.worker"]:  # ours: the node's own interpreter runs it
                        command = [NODE_PYTHON, *build.command[1:]]
                    else:
                        command = build.command  # a recipe's external worker, run on the node as written
                    proc = await RemoteProcess.start(build.job, build.remote, command)
                else:
                    proc = await spawn_worker(build.command)
            except OSError as exc:
                build.fold(Erred(f"cannot start worker {build.command[0]}: {exc}"))
                await self._finish(build, "failed")
                return
            running_json(build, proc.pid, guard, local=build.remote is None, nonce=worker_nonce(proc))
        build.worker_started(proc)
        if build.remote is None and proc.pid is not None:
            build.resources = ResourceSampler(proc.pid, device=False)
        assert proc.stdin is not None
        if build.id not in self.sent_ahead:
            proc.stdin.write((json.dumps(build.job) + "\n").encode())
        elif not build.token.is_set:  # its job went ahead of the check, which agreed: the engine may be written
            proc.stdin.write((CommitControl().model_dump_json() + "\n").encode())
        self.stops.worker_started(build)  # a cancel (or a force) that came before the worker reaches it now
        sampling = asyncio.ensure_future(self._sample_resources(build))
        await asyncio.gather(self._read_events(build, events), self._read_stderr(build))
        sampling.cancel()
        if build.finished is not None and build.remote is None and not build.token.forced:
            # Its last event (build_finished) said how the build ended and what it wrote; the process only exits now.
            # The evidence does not wait for its reap: on a GPU host without persistence mode the last process to
            # close the driver pays the GPU's teardown (50–90 ms on the H200 host, benchmarks/probe_cuda_exit.py),
            # which every build's end waited for. It is reaped beside (a CLI that ends first leaves it to init), and
            # `workerExitCode` stays null: nothing waited to measure it.
            exiting = reap_beside(proc)
            self.reaping.add(exiting)
            exiting.add_done_callback(self.reaping.discard)
        else:
            build.exit_code = await proc.wait()
        if (build.finished is not None or getattr(proc, "reused", None)) and not build.token.forced:
            outcome: BuildOutcome = build.finished.outcome if build.finished else "reused"  # reused: a farm node's hit
        elif build.token.forced:  # the user's forced stop is their cancel; "forced" blames the builder
            outcome = self.stops.forced_outcome(build)
        elif lost := getattr(proc, "lost", None):  # a remote cell whose node (or actor) died under it: killed; or
            outcome = "failed" if (build.exit_code or 0) > 0 else "killed"  # its actor's method raised: failed there
            build.fold(Erred(lost))
        else:
            outcome = "killed"
            code = build.exit_code or 0  # awaited above: no build_finished came
            sig = -code if code < 0 else None
            why = f"exit code {build.exit_code} without a build_finished event"
            why = f"signal {signal.Signals(sig).name}" if sig else why
            build.fold(Erred(why + (f"; stderr: {build.stderr_tail[-1]}" if build.stderr_tail else "")))
        await self._finish(build, outcome)

    @staticmethod
    async def _no_job(proc: WorkerProcess | None) -> None:
        """A worker started early that gets no job: closing its input ends it."""
        if proc is not None and proc.stdin is not None:
            proc.stdin.close()
            await proc.wait()

    async def _read_events(self, build: Build, events: Any) -> None:
        proc = build.worker
        assert proc is not None and proc.stdout is not None
        while line := await proc.stdout.readline():
            events.write(line)
            try:
                ev = parse_event(line)
            except ProtocolError as exc:
                build.refuse_line(str(exc))
                continue
            build.deliver(ev)

    async def _sample_resources(self, build: Build) -> None:
        sampler = build.resources
        while sampler is not None:
            sampler.device = bool(build.environment.device_name)
            sampler.sample_rss()
            if sampler.gpu_due():  # nvidia-smi takes a while: not on the loop thread, and seldom (resources.py)
                await asyncio.to_thread(sampler.sample_gpu)
            await asyncio.sleep(RESOURCE_SAMPLE_S)

    async def _read_stderr(self, build: Build) -> None:
        proc = build.worker
        assert proc is not None and proc.stderr is not None
        while line := await proc.stderr.readline():
            build.stderr_tail.append(line.decode(errors="replace").rstrip())

    # -- after the worker is gone --------------------------------------------------------------
    async def _finish(self, build: Build, outcome: BuildOutcome) -> None:
        await finish_build(build, outcome, self.guards.get(build.id))
        policy = self.retention.pop(build.id, None)
        if policy is not None and policy.auto_gc:  # in a thread: the build's answer does not wait for upkeep
            asyncio.get_running_loop().run_in_executor(None, light_gc, state_dir(build.recipe_path), policy)
