"""How a state reads, in words: each display rule is one function here, and every face shows its output.

The terminal (`trtls build`), the LSP progress messages, the HTML report and the VS Code tree used to write each
rule once per face, and they drifted apart (one finished phase read `5/6 · 1.2 s`, `✓ Reformat` and `[5/6] done`).
Now the server computes the words and sends them as data (`stepsText`, `detail`, `description`, … on
`trtls/buildTree`, `verdict` on the gates reply); the extension renders them and formats no number itself.
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Any, Literal

from trtls.core.outcome import gates_outcome
from trtls.core.protocol import PROTOCOL

if TYPE_CHECKING:  # a type only: every face imports this module, the language server before pydantic
    from trtls.core.summary_record import Summary

# A phase's mark in text faces (VS Code shows the same status as an icon).
STATUS_MARK = {"running": "…", "done": "✓", "cancelled": "■", "failed": "✗"}
# A finished build's or cell's mark.
OUTCOME_MARK = {
    "built": "✓",
    "reused": "✓",
    "cancelled": "■",
    "failed": "✗",
    "forced": "✗",
    "killed": "✗",
    "not started": "·",
}
# The server's status words while a build runs, as a row reads them.
RUNNING_WORD = {"starting": "starting", "running": "building", "waiting for a node": "waiting for a node"}


def human_seconds(s: Any) -> str:
    """`0.4 s`, `4.1 s`, `59 s`, `1 min 05 s`, `2 h 03 min`; `–` when unknown."""
    if not isinstance(s, int | float) or isinstance(s, bool) or not math.isfinite(s) or s < 0:
        return "–"
    if s < 10:
        return f"{math.floor(s * 10 + 0.5) / 10:.1f} s"
    if s < 60:
        return f"{math.floor(s + 0.5)} s"
    total = math.floor(s + 0.5)
    if total < 3600:
        return f"{total // 60} min {total % 60:02d} s"
    return f"{total // 3600} h {(total % 3600) // 60:02d} min"


def human_bytes(n: Any) -> str:
    """`512 B`, `12.8 MiB`, never a raw byte count; `size unknown` when unknown."""
    if not isinstance(n, int | float) or isinstance(n, bool) or n < 0:
        return "size unknown"
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GiB"  # pragma: no cover  (the loop returns at GiB)


def step_text(status: str, step: int | None, num_steps: int) -> str | None:
    """`2/3` for a phase that runs or stopped there; None for a finished one: TensorRT often finishes a phase
    before its last announced step, and `5/6` on a finished phase reads as unfinished."""
    if status == "done":
        return None
    return f"{(step + 1) if step is not None else 0}/{num_steps}"


def phase_detail(
    status: str,
    step: int | None,
    num_steps: int,
    elapsed_s: float,
    quiet_s: float | None = None,
    baseline_s: float | None = None,
    stalled: bool = False,
) -> str:
    """What a phase row says after its name: `2/3 · 4.1 s · quiet 42 s · usual 30 s · stalled` (quiet before usual,
    as the question reads: silent this long, when it usually takes that long)."""
    parts = [step_text(status, step, num_steps), human_seconds(elapsed_s)]
    if quiet_s is not None:
        parts.append(quiet_text(quiet_s))
    if baseline_s is not None:
        parts.append(f"usual {human_seconds(baseline_s)}")
    if stalled:
        parts.append("stalled")
    if status in ("cancelled", "failed"):
        parts.append(status)
    return " · ".join(p for p in parts if p)


def quiet_text(s: Any) -> str:
    """`quiet 42 s`: how long the builder said nothing (a phase row, the report's timeline gap, the trace's)."""
    return f"quiet {human_seconds(s)}"


def ago(t: Any, now: float | None = None) -> str:
    """`42 s ago`, `5 min ago`, `3 h ago`, `2 days ago` from a wall-clock time (a build's `startedAt`, a store
    entry's last use); `at an unknown time` when there is none."""
    if not isinstance(t, int | float) or isinstance(t, bool) or not math.isfinite(t):
        return "at an unknown time"
    s = max(0.0, (now if now is not None else time.time()) - t)
    if s < 90:
        return f"{s:.0f} s ago"
    if s < 5400:
        return f"{s / 60:.0f} min ago"
    if s < 172800:
        return f"{s / 3600:.0f} h ago"
    return f"{s / 86400:.0f} days ago"


def local_time(t: Any, fmt: str = "%Y-%m-%d %H:%M:%S", unknown: str = "—") -> str:
    """A wall-clock time (a build's `startedAt`) as local time in `fmt`; `unknown` for none or one no calendar holds
    (a record's `1e300`, `-1e18`, NaN or text: `time.localtime` raised OverflowError, OSError, ValueError or
    TypeError out of `trtls report` and `trtls engines`)."""
    if not isinstance(t, int | float) or isinstance(t, bool) or not math.isfinite(t):
        return unknown
    try:
        return time.strftime(fmt, time.localtime(t))
    except (OverflowError, OSError, ValueError):
        return unknown


def folded_label(name: str, count: int) -> str:
    return f"{name} ×{count}"


def folded_detail(total_s: float) -> str:
    return f"{human_seconds(total_s)} in all"


def progress_text(names: list[str], detail: str) -> str:
    """The running path and its deepest phase: `Building engine › Timing tactics 2/3 · 4.1 s · quiet 42 s`."""
    return " › ".join(names) + f" {detail}"


def reasons_text(reasons: list[Any]) -> str:
    """Why an engine is (or was, or will be) built, one reason after the other: `optimization_level 3 → 5;
    models/demo.onnx: bytes` (the engine store's key diff, or `--rebuild`, or `first build of this engine table`)."""
    return "; ".join(str(r) for r in reasons)


def rebuilt_text(summary: Summary | None) -> str | None:
    """Why a build ran instead of reusing an engine (the evidence's `rebuiltBecause`), in the words every face shows
    after it: `rebuilt because: optimization_level 3 → 5; models/demo.onnx: bytes`."""
    why = summary.rebuiltBecause if summary is not None else None
    if not isinstance(why, list) or not why:
        return None
    return f"rebuilt because: {reasons_text(why)}"


def rebuilding_text(engine: str, reasons: list[Any]) -> str:
    """The same, said as the build starts: `rebuilding demo because: optimization_level 3 → 5`."""
    return f"rebuilding {engine} because: {reasons_text(reasons)}"


def will_rebuild_text(reasons: list[Any]) -> str:
    """The same, said before any build (the editor's hint, TRT336): `will rebuild because: optimization_level 3 → 5`."""
    return f"will rebuild because: {reasons_text(reasons)}"


PREVIOUS_ENGINE_WORDS = {
    "intact": "previous engine intact (byte for byte)",
    "changed": "previous engine NOT intact",
    "not_inspected": "the engine at the output was not touched by this build (it never held the output)",
    "absent": "there was no previous engine at the output",
}


def previous_engine_state(summary: Summary) -> str | None:
    """What became of the engine at the output before a build that did not replace it: `intact`, `changed`,
    `not_inspected` (the build ended before it held the output: waiting for another build of it, or stopped first)
    or `absent`; None for a build that replaced it. Older records have only `previousEngineIntact`."""
    if summary.outcome == "built":
        return None
    state = summary.previousEngine
    if isinstance(state, str) and state in PREVIOUS_ENGINE_WORDS:
        return state
    intact = summary.previousEngineIntact
    return "intact" if intact is True else "changed" if intact is False else "absent"


def previous_engine_text(summary: Summary) -> str:
    """The words every face shows for `previous_engine_state` ('' for a build that replaced the engine)."""
    state = previous_engine_state(summary)
    return "" if state is None else PREVIOUS_ENGINE_WORDS[state]


def evidence_lines(summary: Summary) -> list[tuple[str, str]]:
    """The evidence's verdicts as (label, text), in the order the terminal prints them after a build and the report
    lists them: the timing cache's decision and why, the cleanup and the previous engine, the retry advice and its
    rule, the validation status and its note."""
    s = summary
    cache = s.timingCache or {}
    previous = previous_engine_text(s)
    lines = [
        ("timing cache", f"{s.timingCacheMode} — {cache.get('reason', '')}"),
        ("cleanup", f"{s.cleanupStatus}" + (f"; {previous}" if previous else "")),
        ("retry", f"{s.retryPolicy} — {s.retryRule}"),
        ("validation", f"{s.validationStatus} ({s.validationNote})"),
    ]
    return lines


NOT_STARTED = "not started"


def not_started_text(cell: str) -> str:
    """A planned cell the run never started: `o3: not started (the run was stopped first)`."""
    return f"{cell}: {NOT_STARTED} (the run was stopped first)"


def waiting_text(waited_s: Any) -> str:
    """A run the cluster has not placed yet: `waiting for a node 4.0 s`."""
    return f"waiting for a node {human_seconds(waited_s)}"


def stopping_text(cancel_source: str | None) -> str:
    """A run asked to stop that has not ended yet: `stopping (ide_stop)`."""
    return f"stopping ({cancel_source})"


def cancelled_text(cancel_source: str | None) -> str:
    return f"cancelled by {cancel_source}"


def upload_stopped_text(source: str) -> str:
    """What a build's outcome adds when a stop came after it was built and cut its engine's upload to the remote
    store (the evidence's `store.upload.stoppedBy`): every face's last word on the build says it, not only a log."""
    return f"its upload to the remote store was stopped ({source}): the engine is kept in the local store"


def outcome_text(
    outcome: str | None,
    duration_s: Any,
    cancel_source: str | None,
    error: str | None,
    grace_s: float,
    node_lost: bool = False,
    refused_lines: int = 0,
    first_refusal: str | None = None,
) -> str:
    """How a build ended, in a sentence: `built in 4.1 s`, `cancelled by ide_stop`, `failed: …`, `forced: …`,
    `killed: the worker died (signal SIGKILL)`; `node_lost`: a farm cell whose node died under it."""
    if outcome == "built":
        return f"built in {human_seconds(duration_s)}"
    if outcome == "cancelled":
        return cancelled_text(cancel_source)
    if outcome == "failed":
        return f"failed: {error}"
    if outcome == "forced":
        return f"forced: the builder ignored the cancel from {cancel_source} for {grace_s:g} s and was terminated"
    if node_lost:
        return f"killed: {error}"
    broke = f"; {refused_lines} of its lines broke {PROTOCOL}: {first_refusal}" if refused_lines else ""
    return f"killed: the worker died ({error}){broke}"


def build_description(
    running: bool, status: str, outcome: str | None, cancel_source: str | None, elapsed_s: float
) -> str:
    """A build's row: `building · 4.1 s`, `stopping (ide_stop) · 4.1 s`, `cancelled by ide_stop · 3.0 s`."""
    if running:
        word = stopping_text(cancel_source) if cancel_source else RUNNING_WORD.get(status, status)
    elif outcome == "cancelled" and cancel_source:
        word = cancelled_text(cancel_source)
    else:
        word = outcome or status
    return f"{word} · {human_seconds(elapsed_s)}"


def node_text(node: dict[str, Any] | None, running: bool) -> str:
    """Where a cell runs: `local`, `node host (1a2b3c4d5e6f) · GPU 0 · L4 · waited 2.1 s`, `waiting for a node 4 s`."""
    if node is None:
        return "local"
    if node.get("nodeId") is None:
        return waiting_text(node.get("waitingS") or 0) if running else "never placed"
    text = f"node {node.get('hostname') or '?'} ({str(node['nodeId'])[:12]})"
    gpus = node.get("gpuIds") or []
    text += f" · GPU {','.join(gpus)}" if gpus else " · no GPU"
    text += f" ({node['gpuRule']})" if node.get("gpuRule") else ""  # why that many (core.farm.gpu_choice)
    if node.get("acceleratorType"):
        text += f" · {node['acceleratorType']}"
    if node.get("queueWaitS"):
        text += f" · waited {human_seconds(node['queueWaitS'])}"
    return text


def cells_text(done: int, total: int) -> str:
    """A matrix's finished-cell count: finished = ended any way (built, cancelled, failed …), over the planned cells."""
    return f"{done}/{total} cells done"


def matrix_description(
    running: bool, cancel_source: str | None, done: int, total: int, outcome_message: str | None, elapsed_s: float
) -> str:
    """A matrix's row: `1/4 cells done · building · 12 s`, `4/4 cells done · 3 built, 1 failed · 1 min 05 s`."""
    if running:
        status = stopping_text(cancel_source) if cancel_source else "building"
    else:
        status = outcome_message or "finished"
    return f"{cells_text(done, total)} · {status} · {human_seconds(elapsed_s)}"


VerdictLevel = Literal["info", "warning"]


def gates_verdict(
    route: str, decision: str | None, cancelled: bool, status: str | None = None, findings: str = "Problems"
) -> dict[str, Any]:
    """The sentence a gates run ends with, and how loud: the outcome is `core.outcome.gates_outcome`'s (a cancelled
    run decided nothing, whatever a gate said before the cancel). `findings`: where this face lists them (the
    editor's Problems view; `the findings above` in a terminal)."""
    outcome, kind = gates_outcome(decision, cancelled)
    if kind == "cancelled":
        text = f"route {route}: gates cancelled — no decision"
    elif status == "invalid_recipe":
        text = f"route {route}: the recipe has errors — see {findings}"
    elif decision is None:
        text = f"route {route}: no decision ({(status or 'not run').replace('_', ' ')}) — see {findings}"
    elif kind == "ok":
        text = f"route {route}: {decision}"
    else:
        text = f"route {route}: {decision} — see {findings}"
    warn = kind in ("refused", "failed")
    return {
        "outcome": outcome,
        "outcomeKind": kind,
        "level": "warning" if warn else "info",
        "text": text,
        "showProblems": warn,
    }


def _interval_bound(s: float) -> str:
    """A bound of a time-left interval without its unit: `4.5`, `25`, `1 min 05 s` (over a minute it keeps one)."""
    return human_seconds(s).removesuffix(" s") if s < 60 else human_seconds(s)


def time_left_text(seconds: float | None, low: float | None, high: float | None, similar: int = 0) -> str:
    """`~40 s left, 25–60 s`; `~2 min 10 s left, 1 min 40 s – 3 min 00 s`; from `similar` builds of other engines
    (no history of this one): `~40 s left, 25–90 s, from 3 similar builds`; `no estimate` without a basis (no finished
    build of the same engine and settings, none similar: trtls.builds.supervisor.time_left)."""
    if seconds is None or low is None or high is None:
        return "no estimate"
    if high < 60:
        text = f"~{human_seconds(seconds)} left, {_interval_bound(low)}–{human_seconds(high)}"
    else:
        text = f"~{human_seconds(seconds)} left, {human_seconds(low)} – {human_seconds(high)}"
    if similar:
        text += f", from {similar} similar build{'s' if similar != 1 else ''}"
    return text


def peak_memory_text(
    peaks: list[dict[str, Any]], now: float | None = None, lead: str = "last build peaked at"
) -> str | None:
    """`last build peaked at 412.3 MiB (worker RSS; failed, 3 min ago); 4 builds of these settings: 380.0 MiB–412.3
    MiB` from the history's peaks of one config, oldest first (builds.supervisor.history.History.peaks); None when no
    build of it measured one. Said before a build (the engine's hover) and, led by `peaked at`, of the build just
    ended (the terminal) or shown (the report: the peaks up to it)."""
    if not peaks:
        return None
    last = peaks[-1]
    text = (
        f"{lead} {human_bytes(last.get('peakRssBytes'))} (worker RSS; {last.get('outcome') or 'built'}, "
        f"{ago(last.get('startedAt'), now)})"
    )
    sizes = [p["peakRssBytes"] for p in peaks]
    if len(sizes) > 1:
        low, high = human_bytes(min(sizes)), human_bytes(max(sizes))
        text += f"; {len(sizes)} builds of these settings: " + (low if low == high else f"{low}–{high}")
    return text
