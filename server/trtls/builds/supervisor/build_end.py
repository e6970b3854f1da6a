"""The end of a build, after its worker is gone (or never started): clean up what a killed worker left, record the
history, verify what is on disk, and write the evidence (summary.json, tree.json, environment.json)."""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import signal
import time
from collections.abc import Awaitable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from trtls import fs
from trtls.builds.artifacts import remove_or_quarantine, temp_files_near
from trtls.builds.roots import evidence_error, state_root, write_record
from trtls.builds.supervisor.build import Build
from trtls.builds.supervisor.history import History
from trtls.builds.supervisor.job import state_dir
from trtls.builds.supervisor.output_guard import OutputGuard
from trtls.builds.supervisor.running_record import RUNNING
from trtls.builds.supervisor.similar_builds import model_facts
from trtls.builds.supervisor.summary import build_summary, model_read
from trtls.core.build_records import BuildEnvironment
from trtls.core.build_state import Ended, Noted, Recorded, WorkerGone
from trtls.core.events import Artifact
from trtls.core.vocabulary import BuildOutcome
from trtls.fs.hold import test_pause


async def finish_build(build: Build, outcome: BuildOutcome, guard: OutputGuard | None) -> None:
    """Write the evidence of a build that ended with `outcome` (with its output still locked by `guard`) and
    resolve `build.wait()`."""
    t_end = time.monotonic_ns()
    if outcome in ("forced", "killed") or build.token.forced:  # the worker was terminated (a user's forced stop too)
        # The worker could not clean up after itself: its temp files are ours to remove.
        inventory, status = remove_or_quarantine(
            temp_files_near(build.output, build.id),
            state_dir(build.recipe_path) / "quarantine" if build.job.get("keep_evidence") else None,
            f"build {build.id} {outcome}",
            within=Path(build.job["write_root"]) if build.job.get("write_root") else None,  # judged at load
        )
        cache = build.job.get("timing_cache")
        removed = tuple(Artifact(type="artifact", t_ns=t_end, **row) for row in inventory)  # the supervisor's own rows
        build.fold(WorkerGone(outcome, t_end, time.monotonic_ns(), removed, status, cache["path"] if cache else None))
    build.fold(Ended(outcome))
    history = build.history()
    recording = record_history(build, outcome, history, t_end)
    await build.previous_sha()  # the engine this build found, hashed beside it (summary: is it intact?)
    if guard is not None and outcome == "built":
        await guard.verify_written(build)  # the sha of what is on disk, not of what the worker meant to write
    model = await asyncio.to_thread(model_read, build)  # a digest cache's answer, or a hash: never on the loop
    if unrecorded := await recording:
        build.fold(Noted(unrecorded))
    summary = build_summary(build, t_end, history, model)
    if guard is not None:
        summary["outputLock"] = guard.record()
    # on a thread: its fsyncs (and the records' json) would hold the loop, and on a farm the loop is every cell's —
    # 16 cells ending together waited in turn (the tail's `done` step, 0.78–0.95 s a cell, 16-core host 2026-12-05)
    unwritten = await asyncio.to_thread(write_evidence, build, summary)
    build.fold(Recorded(summary, (unwritten,) if unwritten else ()))
    build.close_worker_io()
    cancelled: asyncio.CancelledError | None = None
    for listener in list(build.listeners):
        try:
            ending = listener(build, None)  # None = the build is over; summary is set
            if inspect.isawaitable(ending):
                # the store's publish, on a thread: the loop answers a stop (a Ctrl-C) meanwhile
                cancelled = await ended_work(build, ending) or cancelled
        except Exception:
            pass
    # as the listeners left it: the store's additions (builds/avoidance/lookup.py), a farm cell's reuse (matrix.py)
    build.resolve(build.state.record or summary)
    if cancelled is not None:
        raise cancelled  # the end is written and answered: the task's cancellation goes on


async def ended_work(build: Build, ending: Awaitable[object]) -> asyncio.CancelledError | None:
    """`ending` (a listener's work at the build's end: the store's publish, on a thread) awaited until it is over,
    and the cancellation of this task meanwhile, if one came (its loop going away: the caller raises it once the
    end is written). Cancelled, the work is stopped as any stop of the build that comes then stops it (`Build.cancel`
    → its `end_stop`: the engine's upload cut at once) and still awaited: abandoned, the build's end was never
    answered (`wait()`, `ended()`: a matrix waited for its cell forever) nor the listeners after it told, and the
    thread wrote the store's record into the evidence after the build's task had gone. What the work raised is the
    listener's failure, ignored as the caller ignores a listener's."""
    work = asyncio.ensure_future(ending)
    cancelled: asyncio.CancelledError | None = None
    while not work.done():
        try:
            await asyncio.wait([work])  # cancelling this task does not cancel `work` (as `shield` would not)
        except asyncio.CancelledError as exc:
            cancelled = cancelled or exc
            build.cancel("event_loop")  # the build stands; what its end still does is cut
    if not work.cancelled():
        work.exception()  # retrieved: a listener's failure does not end the build's end
    return cancelled


def record_history(build: Build, outcome: BuildOutcome, history: History, t_end: int) -> asyncio.Future[str | None]:
    """This build in its config's history (the phases' durations and the dated build when built; the phase a stop
    was in; the peak memory), answering why it was not recorded (or None). A built engine's is written on a thread
    while the engine is re-read from disk and the model's digest looked up (its first fsync also commits what the
    worker's engine left in the filesystem's journal: 6-9 ms of 28 here, 2026-12-05): the summary reads nothing of
    it. Any other outcome's is written before the summary, which says a stop repeated in the same phase."""
    done: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
    if not build.config_hash:
        done.set_result(None)
        return done
    peak = peak_record(build, outcome)  # every outcome's: "last build peaked at …" before the next build
    if outcome == "built":
        return asyncio.ensure_future(
            asyncio.to_thread(
                history.record,
                build.config_hash,
                durations=build.tree.durations(),
                build={"buildId": build.id, "startedAt": build.started_at, "durationS": build.elapsed_s(t_end)},
                facts=model_facts(build),  # for engines with no history of their own (supervisor/similar_builds.py)
                peak=peak,
            )
        )
    stop = None
    if build.token.is_set and outcome in ("cancelled", "forced"):
        running = [p for p in build.tree.phases.values() if p.status == "cancelled"]
        deepest = max(running, key=lambda p: p.id.count("."), default=None)
        stop = deepest.id if deepest is not None else None
    unrecorded = None
    if stop is not None or peak is not None:
        unrecorded = history.record(build.config_hash, stop_phase=stop, peak=peak)
    done.set_result(unrecorded)
    return done


def peak_record(build: Build, outcome: BuildOutcome) -> dict[str, Any] | None:
    """The build's peak memory for the history: the worker's own getrusage peak, else the supervisor's last VmHWM
    sample (as the evidence's `resources.peakRssBytes`, builds/supervisor/resources.py); None when none was measured."""
    reported = build.finished.peak_rss_bytes if build.finished is not None else None
    sampled = getattr(build.resources, "peak_rss", None) if build.resources is not None else None
    peak = reported if reported is not None else sampled
    if not isinstance(peak, int) or peak <= 0:
        return None
    return {
        "buildId": build.id,
        "startedAt": round(float(build.started_at), 3),
        "outcome": outcome,
        "peakRssBytes": peak,
    }


def write_evidence(build: Build, summary: dict[str, Any]) -> str | None:
    """summary.json, tree.json, environment.json, then running.json removed: each inside the recipe's folder, checked
    at the write (a `.trtls` or `.trtls/runs` swapped for a symlink is refused, never followed). A record that cannot
    be written (full disk, read-only folder, a swapped folder) is said in the summary as TRT413 (`evidenceError`);
    the build's outcome, and an engine it placed, stand: the TRT413 sentence is returned, for the notes."""
    test_pause("evidence", build.id)  # tests: a build that is over, its evidence not yet written
    records = {
        "summary.json": json.dumps(summary, indent=2, default=str),
        "tree.json": json.dumps(summary["phaseTree"], indent=1),
        "environment.json": json.dumps(build.environment.record(), indent=2, default=str),
    }
    path = build.evidence_dir / "summary.json"
    try:
        if build.evidence_dir.is_dir():
            # Side by side: each record is its own atomic write, and fsyncs issued together are committed together
            # (~3 fsync waits become ~1 on the way to the build's answer, issue 31); an error is said in this order.
            with ThreadPoolExecutor(len(records), thread_name_prefix="trtls-evidence") as pool:
                writes = [pool.submit(write_record, build.evidence_dir / n, t) for n, t in records.items()]
            for name, write in zip(records, writes, strict=True):
                path = build.evidence_dir / name
                write.result()
        else:  # the first write makes the run's folder (and removes it again if it fails): one after the other
            for name, text in records.items():
                path = build.evidence_dir / name
                write_record(path, text)
        path = build.evidence_dir / RUNNING
        fs.remove_file(path, kind=fs.Kind.evidence, within=state_root(path))
    except OSError as exc:
        summary["evidenceError"] = evidence_error(exc, path)
        return str(summary["evidenceError"])
    return None


async def probe_environment(build: Build) -> BuildEnvironment:
    """The environment record of a build that never started its worker (`worker --probe`), validated as a worker's
    line is; one given no keys (`{}` in the evidence) when the worker is not ours, cannot say within a minute, or says
    something that is not an environment record."""
    record = await _probe(build)
    try:
        return BuildEnvironment.model_validate(record)
    except ValidationError:
        return BuildEnvironment()


async def _probe(build: Build) -> dict[str, Any]:
    if build.command[-1] != "trtls.builds.worker":
        return {}
    env = {**os.environ, "TRTLS_BUILDER_MODULE": str(build.job.get("builder_module") or "auto")}
    try:
        proc = await asyncio.create_subprocess_exec(
            *build.command, "--probe", stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL, env=env
        )
    except OSError:
        return {}
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), 60)
        record = fs.parse_json(out.decode().strip().splitlines()[-1])
    except TimeoutError:
        fs.signal_child(proc, signal.SIGKILL)
        await proc.wait()
        return {}
    except (ValueError, IndexError):
        return {}
    return record if isinstance(record, dict) and "error" not in record else {}
