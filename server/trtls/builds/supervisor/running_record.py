"""`running.json`: what a live build leaves on disk for whoever finds it after its supervising process died.

Written by the supervisor when a build starts (and again when the worker exists and when the previous engine's
sha is known), removed when the summary is written. Orphan recovery (builds/supervisor/orphans.py) reads it: who
supervised
the build (a `trtls build` in a terminal or a language server — the record names the real cause of a kill), which
worker to stop, and what the output was before the build, so the recovered record can say whether the engine on
disk is the old one or a new one this build renamed over it.

A record can be planted, so naming a pid proves nothing: the worker's start id and the per-build nonce the
supervisor passed only to that worker (`trtls.fs.kill.NONCE_ENV`) are recorded, and recovery signals the pid only
when the live process carries both (`fs.signal_proven`). The file is 0600: another account reading the nonce could
plant it in a process of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trtls import fs
from trtls.builds.roots import state_root
from trtls.builds.supervisor.running_state import RUNNING, OutputState, RunningState, read_running_state
from trtls.fs.kill import process_start_id

if TYPE_CHECKING:
    from trtls.builds.supervisor.build import Build
    from trtls.builds.supervisor.output_guard import OutputGuard

RUNNING_MODE = 0o600  # it carries the worker's nonce

OWNER_KINDS = {"build": "trtls build (CLI)", "serve": "language server", "accept": "trtls accept (CLI)"}


def process_owner(kind: str | None = None) -> dict[str, Any]:
    """Who this process is, for the records it leaves: `{kind, pid, command}`. The kind comes from the
    subcommand this process runs (`trtls build`, `trtls serve`) unless the caller names it."""
    argv = sys.argv
    sub = argv[1] if len(argv) > 1 else ""
    guessed = OWNER_KINDS.get(sub) or f"python process ({Path(argv[0]).name if argv else '?'})"
    return {"kind": kind or guessed, "pid": os.getpid(), "command": " ".join(argv[:8])[:300]}


def output_state(output: Path) -> dict[str, Any]:
    """The output as it is now, without following a final symlink: enough to tell later whether it was replaced
    (a rename always brings a new inode; trtls never writes an engine in place)."""
    return OutputState.now(output).record()


def write_running(evidence_dir: Path, record: dict[str, Any]) -> None:
    """Inside the recipe's folder (`roots.state_root`: found by the path's text, checked at the write), 0600."""
    path = evidence_dir / RUNNING
    fs.atomic_write_text(path, json.dumps(record), kind=fs.Kind.evidence, within=state_root(path), mode=RUNNING_MODE)


def running_json(
    build: Build, worker_pid: int | None, guard: OutputGuard, local: bool = True, nonce: str | None = None
) -> None:
    """`running.json`: the record orphan recovery finds if this process dies during the build. `nonce`: the secret
    the supervisor put in that worker's environment (spawn.worker_nonce), the proof recovery asks of it."""
    record: dict[str, Any] = {"buildId": build.id, "engine": build.engine, "output": str(build.output)}
    if worker_pid is not None:
        # verified before orphan recovery kills it; a remote worker's pid names no process here
        record["workerPid"] = worker_pid
        record["workerStart"] = process_start_id(worker_pid) if local else None
        record["workerNonce"] = nonce if local else None
    record.update(supervisorPid=os.getpid(), supervisorStart=process_start_id(os.getpid()), job=build.job)
    record["startedAt"] = build.started_at  # recovery vouches for the model only if it is older (orphans.model_read)
    # who supervised (the real cause if this process is killed) and the output as this build found it
    record.update(owner=guard.owner, outputBefore=guard.before, previousSha256=build.previous_engine_sha)
    write_running(build.evidence_dir, record)


def note_previous_sha(build: Build, done: asyncio.Future) -> None:
    """The previous engine's sha into running.json as soon as it is known: recovery after a kill can then say
    whether the engine on disk is still that one."""
    if done.cancelled() or done.exception() is not None:
        return
    build.previous_engine_sha = done.result()
    state = read_running_state(build.evidence_dir / RUNNING)
    if not isinstance(state, RunningState):
        return  # not written yet (running_json will include it) or already removed (the build is over)
    keys = state.present if "previousSha256" in state.present else (*state.present, "previousSha256")
    try:
        write_running(
            build.evidence_dir, replace(state, previous_sha256=build.previous_engine_sha, present=keys).record()
        )
    except OSError:
        pass  # .trtls swapped or full: the summary still records the sha (the record is only for a crash)


def running_records(trtls_dir: Path) -> list[Path]:
    """Every `runs/<id>/running.json` under `trtls_dir`, found without following a link: a `.trtls`, `runs` or run
    folder that is a symlink (swapped mid-run) or gone holds nothing to recover here, never a traceback."""
    runs = trtls_dir / "runs"
    try:
        if trtls_dir.is_symlink() or runs.is_symlink() or not runs.is_dir():
            return []
        with os.scandir(runs) as found:
            folders = [Path(e.path) for e in found if e.is_dir(follow_symlinks=False)]
        return sorted(f / RUNNING for f in folders if os.path.lexists(f / RUNNING))
    except OSError:
        return []


def sha256_and_close(opened: contextlib.ExitStack, fh: Any) -> str:
    """The previous engine's sha256, from the file the supervisor opened before the build (then closed)."""
    import hashlib

    with opened:
        h = hashlib.sha256()
        while block := fh.read(1 << 20):
            h.update(block)
        return h.hexdigest()
