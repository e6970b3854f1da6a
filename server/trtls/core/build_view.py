"""How a build reads, from its state alone (`core.build_state.BuildState`): the `trtls/buildTree` payload, its row in
words, where a farm cell is, the progress line and the outcome sentence. Every face renders these; the words come
from `core.display`.

The time left rests on the engine's history on disk, which only the supervisor reads: it is passed in as a function
of the time (`builds.supervisor.time_left`); without it the line has no estimate and the tree row no `timeLeft`."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from trtls.core.build_state import BuildState
from trtls.core.display import (
    build_description,
    human_seconds,
    node_text,
    outcome_text,
    progress_text,
    rebuilt_text,
    stopping_text,
    upload_stopped_text,
    waiting_text,
)
from trtls.core.outcome import build_outcome_kind
from trtls.core.phase_tree import NS

TimeLeftWords = Callable[[int], str | None]  # monotonic now → `~40 s left, 25–60 s`, `no estimate`, or None


def elapsed_s(state: BuildState, now_ns: int | None = None) -> float:
    return ((now_ns or time.monotonic_ns()) - state.t_start_ns) / NS


def shown_elapsed_s(state: BuildState, now_ns: int | None = None) -> float:
    """The build's time as every face shows it: running so far, or the recorded duration once it ended."""
    if state.outcome is None:
        return elapsed_s(state, now_ns)
    summary = state.summary
    return float(summary.durationS or 0.0) if summary is not None else 0.0


def node_view(state: BuildState, now: int | None = None) -> dict[str, Any]:
    """Where a remote cell is: waiting for a node (with how long), or the node that holds it."""
    p = state.placement
    if p is None:
        waited = ((now or time.monotonic_ns()) - state.queued_ns) / NS if state.queued_ns else 0.0
        return {"waitingS": round(waited, 3)} if state.outcome is None else {}
    return {
        "nodeId": p.node_id,
        "hostname": p.hostname,
        "labels": p.labels,
        "acceleratorType": p.accelerator_type,
        "gpuIds": p.gpu_ids,
        "queueWaitS": p.queue_wait_s,
        "warmWorker": p.warm,
        "numGpus": p.num_gpus,
        "gpuRule": p.gpu_rule,
        "cudaVisibleDevices": p.cuda_visible_devices,
    }


def description(state: BuildState, now_ns: int | None = None, node: dict[str, Any] | None = None) -> str:
    """The build's row in words (`building · 4.1 s`, `cancelled by ide_stop · 3.0 s`); a matrix cell adds where it
    runs, and says only that while it waits for a node."""
    text = build_description(
        state.running, state.status, state.outcome, state.token.source, shown_elapsed_s(state, now_ns)
    )
    if state.parent_id is None:
        return text
    if node is None and state.on_farm_node:
        node = node_view(state, now_ns)
    where = node_text(node, state.running)
    return where if state.running and node is not None and "nodeId" not in node else f"{text} · {where}"


def outcome_message(state: BuildState) -> str:
    """How it ended, in a sentence (`built in 4.1 s`, `cancelled by ide_stop`)."""
    summary = state.summary
    if state.outcome == "reused":  # a farm node served the cell from the remote store (builds/farm/node_reuse.py)
        return str((summary and summary.message) or "reused: its engine came from the engine store")
    lost = state.on_farm_node and (state.error or "").startswith("node lost")
    duration = (summary.durationS or 0) if summary is not None else 0
    text = outcome_text(
        state.outcome,
        duration,
        state.token.source,
        state.error,
        state.grace_s,
        lost,
        state.refused_lines,
        state.first_refusal,
    )
    upload = ((summary.store if summary is not None else None) or {}).get("upload")
    if isinstance(upload, dict) and upload.get("stoppedBy"):  # the build stands; the stop cut only its upload
        text += f"; {upload_stopped_text(str(upload['stoppedBy']))}"
    return text


def progress_message(state: BuildState, time_left: TimeLeftWords | None = None) -> str:
    """`Building engine › Timing tactics 2/3 · 4.1 s · quiet 42 s · usual 30 s` (`stalled` when the stall rule says
    so), then the time left when `time_left` is given (`· ~40 s left, 25–60 s`, `· no estimate`)."""
    now = time.monotonic_ns()
    path = state.tree.deepest_running_path()
    if not path and state.status == "waiting for a node" and state.queued_ns:
        return waiting_text((now - state.queued_ns) / NS)
    if not path:
        return "starting worker" if state.status == "starting" else state.status
    deepest = state.tree.deepest_running_view(now, state.baselines)
    assert deepest is not None
    text = progress_text([p.name for p in path], deepest.detail)
    if state.token.is_set:
        text += f" · {stopping_text(state.token.source)}"
    words = time_left(now) if time_left is not None else None
    return f"{text} · {words}" if words else text


def snapshot(state: BuildState, time_left: TimeLeftWords | None = None) -> dict[str, Any]:
    """The `trtls/buildTree` payload (the LSP layer adds the document uri); `timeLeft` while it runs its phases, when
    `time_left` is given."""
    now = time.monotonic_ns()
    elapsed = shown_elapsed_s(state, now)
    node = node_view(state, now) if state.on_farm_node else None
    left = time_left(now) if time_left is not None and state.running and state.tree.roots else None
    summary = state.summary
    return {
        "buildId": state.build_id,
        "engine": state.engine,
        "status": state.status,
        "cancelSource": state.token.source,
        "outcome": state.outcome,
        "outcomeKind": build_outcome_kind(state.outcome),
        "outcomeMessage": outcome_message(state) if state.outcome else None,
        "rebuiltBecause": rebuilt_text(summary),
        "elapsedS": round(elapsed, 3),
        "evidencePath": str(state.evidence_dir / "summary.json") if summary is not None else None,
        "phases": state.tree.snapshot(now, state.baselines, state.t_start_ns),
        "cell": state.cell,
        "parentId": state.parent_id,
        "node": node,
        "running": state.running,
        "description": description(state, now, node),
        "where": node_text(node, state.running),
        "elapsedText": human_seconds(elapsed),
        "timeLeft": left,
    }
