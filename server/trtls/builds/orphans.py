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


def _orphan_summary(
    run_dir: Path, state: dict[str, Any], job: dict[str, Any], cleanup: str, inventory: list, note: str
) -> dict[str, Any]:
    """As complete as the supervisor's summary, rebuilt from the events the dead server had recorded."""
    from trtls.core.events import ProtocolError, parse_event
    from trtls.core.phase_tree import PhaseTree

    tree, started, cache = PhaseTree(), None, None
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
        if ev.type == "build_started":
            started = ev
        elif ev.type == "cache_decision":
            cache = ev.model_dump(exclude={"v", "type", "t_ns"})
    end = tree.t_last_callback_ns or 0
    tree.close_open("failed", end)
    env = started.environment if started is not None else {}
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
        "tensorrtVersion": env.get("version"),
        "builderModule": env.get("module"),
        "language": env.get("language", "python"),
        "buildConfigHash": started.build_config_hash if started is not None else None,
        "gpuSku": env.get("device_name") or "none (CPU-only ahead-of-time build)",
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
        if sup == own_pid or process_alive(sup):
            continue  # a live supervisor owns it
        worker = state.get("workerPid")
        if process_alive(worker):
            try:
                os.killpg(worker, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
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
        )
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
