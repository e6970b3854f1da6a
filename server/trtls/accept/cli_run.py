"""`trtls build --json` as a real process, read the way a terminal reads it: the one reader of that stream for
every acceptance scenario that drives the CLI (Ctrl-C, a CI timeout, SIGTERM, a full disk)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from trtls.accept.criteria import Observation
from trtls.accept.runner import Context, Recorder, _history
from trtls.builds.supervisor.history import History
from trtls.core.events import Event, ProtocolError, parse_event
from trtls.core.phase_tree import PhaseTree
from trtls.core.summary_record import Summary, SummaryProblem, summary_of
from trtls.fs import parse_json, signal_child


def read_build_stream(
    lines: Iterable[str], on_event: Callable[[Event], None]
) -> tuple[dict[str, Any] | None, list[str]]:
    """(the summary, the lines that are not protocol events) of a `--json` stream; each event goes to `on_event`
    in order. The summary is the object whose `type` is "summary", however its keys are ordered."""
    summary, other = None, []
    for line in lines:
        try:
            record = parse_json(line)
        except ValueError:
            record = None
        if isinstance(record, dict) and record.get("type") == "summary":
            summary = record.get("summary")
            continue
        try:
            ev = parse_event(line)
        except ProtocolError:
            other.append(line.rstrip("\n"))
            continue
        on_event(ev)
    return summary, other


def cli_build(
    ctx: Context,
    ws: Path,
    args: list[str] = (),  # type: ignore[assignment]
    *,
    signal_at_phase: int | None = None,
    sig: int = signal.SIGINT,
    prefix: list[str] = (),  # type: ignore[assignment]
) -> dict[str, Any]:
    """`trtls build --json` (optionally wrapped, e.g. in `unshare`), folding its stream into live snapshots
    the way a terminal would; `sig` goes to the CLI process when the phase_start number `signal_at_phase` arrives.
    Its `summary` is the record the CLI sent, as a `Summary`: None when it sent none, or one that does not hold
    together (`summaryProblem` says why)."""
    hist = _history(ws)
    cmd = [*prefix, sys.executable, "-m", "trtls", "build", str(ws), "--engine", ctx.engine, "--json", *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    tree, baselines, live, seen, had = PhaseTree(), {}, [], 0, False

    def on_event(ev: Event) -> None:
        nonlocal baselines, seen, had
        if ev.type == "build_started":
            had = bool((hist.get(ev.build_config_hash) or {}).get("phases"))
            baselines = History(ws / ".trtls" / "history.json").baselines(ev.build_config_hash)
        if ev.type in ("phase_start", "step", "phase_finish"):
            tree.apply(ev)
            live.append(tree.snapshot(time.monotonic_ns(), baselines))
        if ev.type == "phase_start":
            if signal_at_phase is not None and seen == signal_at_phase:
                signal_child(proc, sig)
            seen += 1

    assert proc.stdout is not None
    received, other = read_build_stream(proc.stdout, on_event)
    code = proc.wait(timeout=600)
    stderr = proc.stderr.read() if proc.stderr else ""
    summary = None if received is None else summary_of(received, "the summary event of `trtls build --json`")
    return {
        "summary": summary if isinstance(summary, Summary) else None,
        "summaryProblem": summary if isinstance(summary, SummaryProblem) else None,
        "code": code,
        "live": live,
        "had": had,
        "pid": proc.pid,
        "other": other,
        "stderr": stderr,
    }


def cli_observation(rec: Recorder, run: dict[str, Any]) -> Observation:
    rec.after(run["summary"], {"live": run["live"], "history_had_baselines": run["had"]}, pids=[run["pid"]])
    rec.obs.extra["exit_code"] = run["code"]
    if run["summaryProblem"] is not None:
        rec.obs.error = f"the CLI exited {run['code']} with {run['summaryProblem']}"
    elif run["summary"] is None:
        rec.obs.error = f"the CLI exited {run['code']} without a summary: {run['stderr'][-300:]}"
    return rec.obs
