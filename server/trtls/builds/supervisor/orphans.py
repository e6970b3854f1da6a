"""Builds whose supervisor died (a killed `trtls build`, a crashed language server): find them, stop them, clean up,
record what is known.

Every build writes `.trtls/runs/<id>/running.json` when it starts and removes it when its summary is written. A
`running.json` whose supervisor process is gone is an orphan: its worker (which cancels itself when its stdin closes,
and never renames a new engine over the output once its supervisor is gone) is killed if still alive, its temp files
are removed or quarantined, and a summary with outcome `killed` is written so the evidence is never missing. The
summary says what is known — who the supervisor was, the engine on disk now and its sha256, whether this build
renamed one over the output (the output's inode against the one recorded at the start, the sha on disk against the
worker's `artifact` events), which temp files were left — and lists what is not.

The language server runs this when it opens a folder, `trtls build` before it builds.
"""

from __future__ import annotations

import json
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trtls import fs
from trtls.builds.artifacts import remove_or_quarantine
from trtls.builds.supervisor.orphan_model import model_read, started_at
from trtls.builds.supervisor.orphan_output import RecoveryPass, engine_message, output_truth
from trtls.builds.supervisor.running_record import running_records
from trtls.builds.supervisor.running_state import (
    RunningJob,
    RunningProblem,
    RunningState,
    read_running_state,
)
from trtls.core.paths import inside, real
from trtls.core.vocabulary import CleanupStatus
from trtls.fs.kill import ProcessProof, process_alive, process_start_id
from trtls.fs.read import read_bytes

__all__ = ["RecoveredBuild", "RecoveryPass", "process_alive", "process_start_id", "recover_orphans", "same_process"]

EVENTS_LIMIT = 64 << 20  # an events.jsonl holds a few MiB even for a long build; past this it was not ours


@dataclass(frozen=True)
class RecoveredBuild:
    """One build recovery completed: what the faces say of it (the popup, TRT404, a line before `trtls build`).
    `record()` is its JSON (`trtls build --json`'s `orphan_recovered` line): the keys it has always had."""

    build_id: str
    engine: str | None
    message: str
    cleanup_status: CleanupStatus  # as artifacts.remove_or_quarantine says it
    artifacts: list[dict[str, Any]]  # the temp files removed or quarantined, as the summary lists them
    supervisor: dict[str, Any]  # the process that died supervising it, as the summary names it

    def record(self) -> dict[str, Any]:
        return {
            "buildId": self.build_id,
            "engine": self.engine,
            "message": self.message,
            "cleanupStatus": self.cleanup_status,
            "artifacts": self.artifacts,
            "supervisor": self.supervisor,
        }


def same_process(pid: int | None, recorded_start: str | None) -> bool:
    """True only when `pid` is alive and is the very process whose start id was recorded."""
    return bool(recorded_start) and process_alive(pid) and process_start_id(pid) == recorded_start


def _read_events(run_dir: Path) -> list[Any]:
    from trtls.core.events import ProtocolError, parse_event

    try:
        lines = read_bytes(run_dir / "events.jsonl", limit=EVENTS_LIMIT, follow=False).splitlines()
    except OSError:
        return []
    events = []
    for line in lines:
        try:
            events.append(parse_event(line))
        except ProtocolError:
            continue  # the last line may be cut where the supervisor died
    return events


def who_supervised(state: RunningState) -> str:
    """`the supervising trtls build (CLI) (pid 123)`: the real cause, from the record the supervisor left."""
    pid = state.supervisor_pid
    if state.owner is not None and state.owner.kind:
        return f"the supervising {state.owner.kind} (pid {pid})"
    return f"the supervising process (pid {pid}; this older record does not say whether it was a CLI or a server)"


def _orphan_summary(
    run_dir: Path,
    state: RunningState,
    job: RunningJob | None,
    cleanup: str,
    inventory: list,
    note: str,
    work: RecoveryPass,
) -> dict[str, Any]:
    """As complete as the supervisor's summary, rebuilt from the events the dead supervisor had recorded and from
    what is on disk now."""
    from trtls.core.build_records import BuildEnvironment
    from trtls.core.capability import build_capability
    from trtls.core.evidence import UNKNOWN, gpu_sku
    from trtls.core.phase_tree import PhaseTree

    tree, started, cache, env = PhaseTree(), None, None, BuildEnvironment()
    events = _read_events(run_dir)
    for ev in events:
        tree.apply(ev)
        if ev.type == "environment":
            env = ev.environment
        if ev.type == "build_started":
            started, env = ev, ev.environment
        elif ev.type == "cache_decision":
            cache = ev.model_dump(exclude={"v", "type", "t_ns"})
    end = tree.t_last_callback_ns or 0
    tree.close_open("failed", end)
    if cache is None:
        configured = job is not None and job.timing_cache
        cache = {
            "decision": "discarded" if configured else "cold",
            "reason": "the build was interrupted before deciding; the cache on disk was not written"
            if configured
            else "no timing cache configured",
            "path": job.timing_cache_path if job is not None else None,
        }
    temps_left = sum(1 for a in inventory if a.get("kind") == "temp")
    truth = output_truth(state, events, temps_left, run_dir.parent.parent.parent, work)
    model, said, known = model_read(state, run_dir.parent.parent)
    (truth["known"] if known else truth["unknown"]).append(said)
    who = who_supervised(state)
    capability = build_capability("killed", None, started is not None, env.module)
    if isinstance(capability.get("builder"), dict) and capability["builder"].get("status") == "not_asked":
        why = "the build was killed after the parse (its supervisor died); the builder was not asked"
        capability["builder"] = {"status": "not_asked", "reason": why}
    return {
        "framework": "trtls",
        "buildId": state.build_id,
        "engine": state.engine,
        **({"startedAt": started_at(state)} if started_at(state) is not None else {}),
        **model,
        "outcome": "killed",
        "error": f"{who} died during the build",
        "supervisor": (state.owner.record() if state.owner else None) or {"pid": state.supervisor_pid, "kind": None},
        "tensorrtVersion": env.version or UNKNOWN,
        "builderModule": env.module,
        "language": env.language,  # python when the worker did not say (its default)
        "buildConfigHash": started.build_config_hash if started is not None else None,
        "gpuSku": gpu_sku(env.record()),
        "environment": env.record(),  # as the worker sent it
        "target": started.target.record() if started is not None else None,  # as the worker sent it
        "network": started.network.record() if started is not None else None,
        "resources": {
            "peakRssBytes": None,
            "how": "not measured: the supervising process died with its samples",
            "gpuMemory": None,
            "oom": {"oomKill": None, "how": "the worker was stopped by orphan recovery or by itself, not known which"},
        },
        "timingCacheMode": cache["decision"],
        "timingCache": cache,
        "cancelSource": None,
        "cancelLatencyMs": None,
        "cleanupLatencyMs": None,
        "cleanupStatus": cleanup,
        "forced": False,
        **truth,
        "artifacts": inventory,
        "notes": [note],
        "retryPolicy": "retry_cold",
        "retryRule": f"the build was interrupted because {who} died; what the builder did after the last recorded "
        "event is not known, so the retry starts cold",
        "validationStatus": "not_applicable",
        "capability": capability,
        "phaseTree": tree.snapshot(end),
        "events": "events.jsonl",
    }


def _stop_worker(state: RunningState, problem: RunningProblem | None) -> str:
    """Kill the recorded worker's process group only if it proves to be that worker — its start id and the run nonce
    its supervisor passed only to it (`fs.signal_proven`) — and wait until it is gone (so the output is examined
    after it can no longer change). A record can be planted: a pid that cannot be proved is never signalled, nor is
    any process a record that does not hold together names, and the note says why. Returns the note for the
    record."""
    if problem is not None:
        return f"; {problem.message}, so no process it names was signalled"
    worker = state.worker_pid
    if worker is None or not process_alive(worker):
        return ""
    why = fs.signal_proven(ProcessProof(worker, state.worker_start, state.worker_nonce), signal.SIGKILL, group=True)
    if why is None:
        deadline = time.monotonic() + 10
        while process_alive(worker) and time.monotonic() < deadline:
            time.sleep(0.02)
        return (
            f"; its worker (pid {worker}) was still running, proved to be this build's worker (its start time and "
            "this run's nonce), and was killed"
        )
    if not process_alive(worker):
        return ""  # it ended while it was being proved
    return f"; pid {worker} is alive but was not proved to be this build's worker ({why}), so it was left alone"


def recover_orphans(
    trtls_dir: Path, own_pid: int | None = None, work: RecoveryPass | None = None
) -> list[RecoveredBuild]:
    """Complete the evidence of every build under `trtls_dir/runs` whose supervisor is gone. `work`: the pass's
    shared knowledge (each output hashed and listed once, however many records name it)."""
    own_pid = own_pid or os.getpid()
    work = work or RecoveryPass()
    recovered: list[RecoveredBuild] = []
    for running in running_records(trtls_dir):  # a swapped .trtls: nothing to recover, never followed
        found = read_running_state(running)
        problem = found if isinstance(found, RunningProblem) else None
        state = found.partial if isinstance(found, RunningProblem) else found
        if state is None or state.build_id != running.parent.name:
            continue  # unreadable, or naming another build than its own folder's: not one trtls wrote
        sup = state.supervisor_pid  # None when the record's is not a pid (a planted record may say anything)
        if sup == own_pid:
            continue
        # an old record without a start id: assume the live pid is that supervisor; a start id that is not one
        # (a damaged record) names no live process
        unproved = problem is not None and "supervisorStart" in problem.fields
        if (
            process_alive(sup)
            and not unproved
            and (state.supervisor_start is None or same_process(sup, state.supervisor_start))
        ):
            continue  # a live supervisor owns it
        recovered.append(_recover_one(running, state, problem, trtls_dir, own_pid, work))
    return recovered


def _recover_one(
    running: Path,
    state: RunningState,
    problem: RunningProblem | None,
    trtls_dir: Path,
    own_pid: int,
    work: RecoveryPass,
) -> RecoveredBuild:
    root = trtls_dir.parent  # every record written here stays in the recipe's folder (checked at the write)
    worker_note = _stop_worker(state, problem)
    job, output = state.job, state.output_path
    qdir = trtls_dir / "quarantine" if job is not None and job.keep_evidence else None
    # A record can be planted: its temp files are looked for only beside an output inside the recipe's folder.
    ours = inside(real(output.parent), real(root))
    temps = work.temps(output, state.build_id) if ours else []
    inventory, status = remove_or_quarantine(temps, qdir, f"orphan of build {state.build_id}", within=real(root))
    if inventory:
        message = f"{'quarantined' if status == 'quarantined' else 'removed'} {len(inventory)} orphaned temp file(s)"
    elif ours:
        message = "no temp files were left"
    else:
        message = f"temp files beside {output} were not looked for (a record can be forged; it is not in this folder)"
    message += worker_note
    stamp = f"recovered at {time.strftime('%Y-%m-%d %H:%M:%S')} by process {own_pid}"
    summary = _orphan_summary(running.parent, state, job, status, inventory, f"{stamp}: {message}", work)
    message = f"{summary['error']}; {engine_message(summary)}; {message}"
    summary["notes"][0] = f"{stamp}: {message}"
    try:
        fs.atomic_write_text(
            running.with_name("summary.json"), json.dumps(summary, indent=2), kind=fs.Kind.evidence, within=root
        )
        fs.remove_file(running, kind=fs.Kind.evidence, within=root)
    except OSError as exc:
        # the run folder leads out of the recipe's folder (a symlink) or the disk refuses: nothing is written there
        message += f"; its record was not completed ({exc.strerror or exc}: {exc.filename})"
    return RecoveredBuild(state.build_id, state.engine, message, status, inventory, summary["supervisor"])
