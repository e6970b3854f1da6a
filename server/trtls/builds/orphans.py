"""Builds whose supervisor died (server killed mid-build): find them, stop them, clean up, record.

Every build writes `.trtls/runs/<id>/running.json` when it starts and removes it when its summary
is written. A `running.json` whose supervisor process is gone is an orphan: its worker (which
cancels itself when its stdin closes) is killed if still alive, its temp files are removed or
quarantined, and a summary with outcome `killed` is written so the evidence is never missing.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

from trtls.builds.artifacts import remove_or_quarantine, temp_files_near
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


def _orphan_summary(
    run_dir: Path, state: dict[str, Any], job: dict[str, Any], cleanup: str, inventory: list, note: str
) -> dict[str, Any]:
    """As complete as the supervisor's summary, rebuilt from the events the dead server had recorded."""
    from trtls.core.events import ProtocolError, parse_event
    from trtls.core.evidence import UNKNOWN, gpu_sku
    from trtls.core.phase_tree import PhaseTree

    tree, started, cache, env = PhaseTree(), None, None, {}
    try:
        lines = (run_dir / "events.jsonl").read_bytes().splitlines()
    except OSError:
        lines = []
    for line in lines:
        try:
            ev = parse_event(line)
        except ProtocolError:
            continue  # the last line may be cut where the server died
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
    return {
        "framework": "trtls",
        "buildId": state["buildId"],
        "engine": state.get("engine"),
        "outcome": "killed",
        "error": "the supervising server process died during the build",
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
            "how": "not measured: the supervising server died with its samples",
            "gpuMemory": None,
            "oom": {"oomKill": None, "how": "the worker was stopped by the recovering server, not by the kernel"},
        },
        "timingCacheMode": cache["decision"],
        "timingCache": cache,
        "cancelSource": None,
        "cancelLatencyMs": None,
        "cleanupLatencyMs": None,
        "cleanupStatus": cleanup,
        "forced": False,
        "artifacts": inventory,
        "notes": [note],
        "retryPolicy": "retry_cold",
        "retryRule": "the previous build was interrupted by a server crash; nothing it did is trusted",
        "validationStatus": "not_applicable",
        "phaseTree": tree.snapshot(end),
        "events": "events.jsonl",
    }


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
        worker = state.get("workerPid")
        worker_note = ""
        if same_process(worker, state.get("workerStart")):
            try:
                os.killpg(worker, signal.SIGKILL)
                worker_note = f"; its worker (pid {worker}) was still running and was killed"
            except (ProcessLookupError, PermissionError):
                pass
        elif process_alive(worker):
            # PID reuse (a reboot, or a long time since): the live process is someone else's. Never kill it.
            worker_note = (
                f"; pid {worker} is alive but is not the recorded worker (its start time differs or was not "
                "recorded), so it was left alone"
            )
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
        atomic_write_text(running.with_name("summary.json"), json.dumps(summary, indent=2))
        running.unlink(missing_ok=True)
        recovered.append(
            {
                "buildId": state["buildId"],
                "engine": state.get("engine"),
                "message": message,
                "cleanupStatus": status,
                "artifacts": inventory,
            }
        )
    return recovered
