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
from pathlib import Path
from typing import Any

from trtls.builds.artifacts import remove_or_quarantine, sha256_file, temp_files_near
from trtls.builds.running_record import output_state, replaced_since
from trtls.core.atomic import atomic_write_text


def process_alive(pid: int | None) -> bool:
    """True for a live process (a zombie is not alive for our purposes)."""
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


def process_start_id(pid: int | None) -> str | None:
    """Who a PID is, not only that it exists: `<boot id>:<start time in clock ticks since boot>`.

    A PID is reused after its process dies (and numbering starts again after a reboot), so a recorded
    PID that is alive may be an unrelated process. The kernel's start time of the process, with the boot
    it belongs to, names one process for ever. None when /proc cannot say (not Linux, process gone)."""
    if not pid:
        return None
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        with open("/proc/sys/kernel/random/boot_id") as fh:
            boot = fh.read().strip()
    except (OSError, IndexError):
        return None
    return f"{boot}:{fields[19]}"  # field 22 of stat; fields[0] is field 3 (state)


def same_process(pid: int | None, recorded_start: str | None) -> bool:
    """True only when `pid` is alive and is the very process whose start id was recorded."""
    return bool(recorded_start) and process_alive(pid) and process_start_id(pid) == recorded_start


def _read_events(run_dir: Path) -> list[Any]:
    from trtls.core.events import ProtocolError, parse_event

    try:
        lines = (run_dir / "events.jsonl").read_bytes().splitlines()
    except OSError:
        return []
    events = []
    for line in lines:
        try:
            events.append(parse_event(line))
        except ProtocolError:
            continue  # the last line may be cut where the supervisor died
    return events


def who_supervised(state: dict[str, Any]) -> str:
    """`the supervising trtls build (CLI) (pid 123)`: the real cause, from the record the supervisor left."""
    owner = state.get("owner") or {}
    pid = state.get("supervisorPid")
    if owner.get("kind"):
        return f"the supervising {owner['kind']} (pid {pid})"
    return f"the supervising process (pid {pid}; this older record does not say whether it was a CLI or a server)"


def output_truth(state: dict[str, Any], events: list[Any], temps_left: int) -> dict[str, Any]:
    """What can be known about the output after the supervisor died: the engine on disk and its sha256, whether this
    build renamed a new engine over it, whether the previous engine is intact — and what is not known."""
    output = Path(state.get("output") or state.get("job", {}).get("output", ""))
    now = output_state(output)
    on_disk: dict[str, Any] = {"path": str(output), "exists": now.get("exists")}
    if now.get("exists") and output.is_file() and not output.is_symlink():
        try:
            on_disk.update(sha256=sha256_file(output), size=now["size"])
        except OSError as exc:
            on_disk["error"] = exc.strerror or str(exc)
    reported = [e for e in events if e.type == "artifact" and e.kind == "engine" and e.action == "written"]
    reported_sha = reported[-1].sha256 if reported else None
    replaced = replaced_since(state.get("outputBefore"), now)
    previous = state.get("previousSha256")
    known: list[str] = []
    unknown: list[str] = ["how far the builder got after the last recorded event", "the worker's peak memory"]
    renamed: bool | None
    if replaced is False:
        renamed = False
        known.append("the output is the file this build found when it started (same inode and mtime): not replaced")
    elif replaced is None and state.get("outputBefore") is None:
        renamed = None if reported_sha is None else reported_sha == on_disk.get("sha256")
        unknown.append("whether the output was replaced (this older record has no state of the output at the start)")
    elif replaced is None:
        renamed = None
        unknown.append("whether the output was replaced (it cannot be read now)")
    elif reported_sha is not None and reported_sha == on_disk.get("sha256"):
        renamed = True
        known.append("this build renamed a new engine over the output: its worker reported it and the sha matches")
    else:
        renamed = None
        unknown.append(
            "who replaced the output: it changed after this build started, but no artifact event of this build "
            "reports the engine now on disk"
        )
    if temps_left:
        known.append(f"{temps_left} temp file(s) of this build were left beside the output (the rename had not run)")
    intact: bool | None = None
    if previous is not None and on_disk.get("sha256") is not None:
        intact = previous == on_disk["sha256"]
        known.append(f"the previous engine's sha256 was recorded at the start ({previous[:16]}…)")
    elif (state.get("outputBefore") or {}).get("exists") and renamed is False:
        intact = True
        unknown.append("the previous engine's sha256 (not recorded before the kill); it was not replaced")
    elif not (state.get("outputBefore") or {}).get("exists", True):
        known.append("there was no engine at the output when the build started")
    artifact = None
    if renamed:
        artifact = {
            "action": "written",
            "kind": "engine",
            "path": str(output),
            "size": on_disk.get("size"),
            "sha256": on_disk.get("sha256"),
            "reportedSha256": reported_sha,
            "verified": True,
            "how": "re-read from disk by orphan recovery; the worker's artifact event reports the same sha256",
        }
    return {
        "engineOnDisk": on_disk,
        "renamed": renamed,
        "engineArtifact": artifact,
        "previousEngineIntact": intact,
        "known": known,
        "unknown": unknown,
    }


def _orphan_summary(
    run_dir: Path, state: dict[str, Any], job: dict[str, Any], cleanup: str, inventory: list, note: str
) -> dict[str, Any]:
    """As complete as the supervisor's summary, rebuilt from the events the dead supervisor had recorded and from
    what is on disk now."""
    from trtls.core.evidence import UNKNOWN, gpu_sku
    from trtls.core.phase_tree import PhaseTree

    tree, started, cache, env = PhaseTree(), None, None, {}
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
        configured = job.get("timing_cache")
        cache = {
            "decision": "discarded" if configured else "cold",
            "reason": "the build was interrupted before deciding; the cache on disk was not written"
            if configured
            else "no timing cache configured",
            "path": (configured or {}).get("path"),
        }
    temps_left = sum(1 for a in inventory if a.get("kind") == "temp")
    truth = output_truth(state, events, temps_left)
    who = who_supervised(state)
    return {
        "framework": "trtls",
        "buildId": state["buildId"],
        "engine": state.get("engine"),
        "outcome": "killed",
        "error": f"{who} died during the build",
        "supervisor": state.get("owner") or {"pid": state.get("supervisorPid"), "kind": None},
        "tensorrtVersion": env.get("version") or UNKNOWN,
        "builderModule": env.get("module"),
        "language": env.get("language", "python"),
        "buildConfigHash": started.build_config_hash if started is not None else None,
        "gpuSku": gpu_sku(env),
        "environment": env,
        "target": getattr(started, "target", None),
        "network": getattr(started, "network", None),
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
        "phaseTree": tree.snapshot(end),
        "events": "events.jsonl",
    }


def _stop_worker(state: dict[str, Any]) -> str:
    """Kill the recorded worker's process group if it is provably that worker, and wait until it is gone (so the
    output is examined after it can no longer change). Returns the note for the record."""
    worker = state.get("workerPid")
    if isinstance(worker, int) and same_process(worker, state.get("workerStart")):
        try:
            os.killpg(worker, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            return ""
        deadline = time.monotonic() + 10
        while process_alive(worker) and time.monotonic() < deadline:
            time.sleep(0.02)
        return f"; its worker (pid {worker}) was still running and was killed"
    if process_alive(worker):
        # PID reuse (a reboot, or a long time since): the live process is someone else's. Never kill it.
        return (
            f"; pid {worker} is alive but is not the recorded worker (its start time differs or was not "
            "recorded), so it was left alone"
        )
    return ""


def _engine_message(summary: dict[str, Any]) -> str:
    disk = summary["engineOnDisk"]
    sha = f"sha256 {disk['sha256'][:16]}…" if disk.get("sha256") else "no engine"
    if summary["renamed"] is True:
        return f"this build's new engine is on disk ({sha})"
    if summary["renamed"] is False:
        return f"the output was not replaced ({sha} on disk)"
    return f"whether this build replaced the output is not known ({sha} on disk)"


def recover_orphans(trtls_dir: Path, own_pid: int | None = None) -> list[dict[str, Any]]:
    own_pid = own_pid or os.getpid()
    recovered: list[dict[str, Any]] = []
    for running in sorted((trtls_dir / "runs").glob("*/running.json")):
        try:
            state = json.loads(running.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        sup = state.get("supervisorPid")
        if sup == own_pid:
            continue
        if process_alive(sup) and (state.get("supervisorStart") is None or same_process(sup, state["supervisorStart"])):
            continue  # a live supervisor owns it (an old record without a start id: assume it is that one)
        worker_note = _stop_worker(state)
        job = state.get("job", {})
        output = Path(state.get("output", job.get("output", "")))
        qdir = trtls_dir / "quarantine" if job.get("keep_evidence") else None
        inventory, status = remove_or_quarantine(
            temp_files_near(output, state["buildId"]), qdir, f"orphan of build {state['buildId']}"
        )
        n = len(inventory)
        message = (
            f"{'quarantined' if status == 'quarantined' else 'removed'} {n} orphaned temp file(s)"
            if n
            else "no temp files were left"
        ) + worker_note
        summary = _orphan_summary(
            running.parent,
            state,
            job,
            status,
            inventory,
            f"recovered at {time.strftime('%Y-%m-%d %H:%M:%S')} by process {own_pid}: {message}",
        )
        message = f"{summary['error']}; {_engine_message(summary)}; {message}"
        summary["notes"][0] = f"recovered at {time.strftime('%Y-%m-%d %H:%M:%S')} by process {own_pid}: {message}"
        atomic_write_text(running.with_name("summary.json"), json.dumps(summary, indent=2))
        running.unlink(missing_ok=True)
        recovered.append(
            {
                "buildId": state["buildId"],
                "engine": state.get("engine"),
                "message": message,
                "cleanupStatus": status,
                "artifacts": inventory,
                "supervisor": summary["supervisor"],
            }
        )
    return recovered
