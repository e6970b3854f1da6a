"""Relay a matrix (or farm) run to the client: one workDoneProgress for the parent, `trtls/buildTree` for the
parent and for each cell, Stop on the progress = Stop on every cell.

Coalesced at the source: 32 cells each streaming events must not become 32 × 5 notifications a second on the
server's one event loop (hover and completion share it). Events only mark their cell dirty; one pump sends the
parent row and the cells that changed, at most every PUMP_INTERVAL_S, and each cell's phase tree at most every
CELL_TREE_INTERVAL_S (its status line goes with the parent row every time).

A cell's phase tree goes as a delta (`phasesDelta: true`: only the phases that changed since that cell's last
notification; the client merges them by id), with the whole tree first, every FULL_TREE_INTERVAL_S and at the end.
Why: a `large` build has ~300 phases (~100 KB of JSON); 32 cells sending whole trees once a second were 2 MB/s to
serialize on the event loop and to parse in the client, and hover waited behind them (p99 1.9 s). Most phases are
finished and never change; a running cell's delta is its running path. A pump also stops sending cell trees after
SEND_BUDGET_S of work: the cells left over stay dirty and go first on the next pump.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from lsprotocol import types as lsp

from trtls.builds.supervisor.matrix import MatrixBuild
from trtls.builds.supervisor.supervisor import Build
from trtls.core import build_view, wire
from trtls.core.display import NOT_STARTED, cells_text, not_started_text, stopping_text
from trtls.core.outcome import build_outcome_kind
from trtls.lsp.build_relay import build_tree, notify_build_tree
from trtls.lsp.progress import Progress, begin_stoppable_progress

if TYPE_CHECKING:
    from trtls.core.events import Event
    from trtls.lsp.language_server import TrtlsServer

PUMP_INTERVAL_S = 0.25
CELL_TREE_INTERVAL_S = 1.0
FULL_TREE_INTERVAL_S = 10.0
SEND_BUDGET_S = 0.005


def cell_row(b: Build) -> wire.CellRow:
    """A cell as the parent row carries it: no phase tree (that goes in the cell's own notification)."""
    state = b.state
    return wire.CellRow(
        buildId=b.id,
        cell=state.cell or state.engine,
        engine=state.engine,
        status=state.status,
        message=build_view.progress_message(state, b.time_left) if state.running else build_view.outcome_message(state),
        description=build_view.description(state),
        node=wire.NodeView.model_validate(build_view.node_view(state)) if state.on_farm_node else None,
        cancelSource=state.token.source,
    )


def not_started_row(cell: str, engine: str) -> wire.CellRow:
    """A planned cell that never started (the run was stopped first)."""
    return wire.CellRow(
        buildId=None,
        cell=cell,
        engine=engine,
        status=NOT_STARTED,
        description=NOT_STARTED,
        message=not_started_text(cell),
    )


def progress_text(mb: MatrixBuild) -> str:
    """`1/4 cells done · 3 running, 1 built`: the same count the tree's matrix row shows (trtls.core.display)."""
    counts: dict[str, int] = {}
    for state in (b.state for b in mb.cells):
        key = state.status if state.running else (state.outcome or "?")
        counts[key] = counts.get(key, 0) + 1
    if mb.not_started:
        counts["not started"] = len(mb.not_started)
    text = cells_text(mb.cells_done, len(mb.planned)) + " · " + ", ".join(f"{n} {k}" for k, n in counts.items())
    return text + (f" · {stopping_text(mb.cancel_source)}" if mb.cancel_source and mb.running else "")


class MatrixRelay:
    def __init__(
        self,
        ls: TrtlsServer,
        mb: MatrixBuild,
        uri: str,
        send_tree: bool,
        has_progress: bool,
        on_done: Callable[[MatrixBuild], object],
    ):
        self.ls, self.mb, self.uri = ls, mb, uri
        self.send_tree, self.has_progress, self.on_done = send_tree, has_progress, on_done
        self.progress: Progress | None = None
        self.dirty: set[str] = set()
        self.wake = asyncio.Event()
        self.cell_sent_at: dict[str, float] = {}
        self.full_sent_at: dict[str, float] = {}
        self.sent_phases: dict[str, dict[str, wire.PhaseRow]] = {}  # cell → phase id → as last sent
        self.notifications = 0

    async def start(self) -> None:
        if self.has_progress:
            self.progress = begin_stoppable_progress(  # beside the reply, never before it (lsp/progress.py)
                self.ls,
                "matrix",
                lsp.WorkDoneProgressBegin(title=f"Building {self.mb.title}", cancellable=True, message="submitting"),
                lambda: self.mb.cancel("ide_stop"),
            )
        self.mb.listeners.append(self._on_event)
        asyncio.get_running_loop().create_task(self._pump())

    def _on_event(self, mb: MatrixBuild, build: Build | None, ev: Event | None) -> None:
        if build is not None:
            self.dirty.add(build.id)
        self.wake.set()  # cheap: the pump decides what to send

    async def _pump(self) -> None:
        while self.mb.running:
            try:
                await asyncio.wait_for(self.wake.wait(), timeout=1.0)
            except TimeoutError:
                pass
            self.wake.clear()
            if not self.mb.running:
                break
            self._send(final=False)
            await asyncio.sleep(PUMP_INTERVAL_S)
        self._send(final=True)
        if self.progress is not None:  # with the outcome's kind, so a failed farm run warns (progress_end.py)
            outcome = self.mb.outcome or "killed"
            kind = build_outcome_kind(outcome) or "failed"
            self.progress.end(self.mb.outcome_message(), outcome, kind)
        self.on_done(self.mb)

    def _send(self, final: bool) -> None:
        mb = self.mb
        total = len(mb.planned) or 1
        if self.progress is not None and not final:
            percentage = int(100 * mb.cells_done / total)
            self.progress.report(lsp.WorkDoneProgressReport(message=progress_text(mb), percentage=percentage))
        if not self.send_tree:
            return
        now = time.monotonic()
        t_end = time.perf_counter() + SEND_BUDGET_S
        # Longest-waiting first, so a budget cut never starves the same cells.
        for b in sorted(mb.cells, key=lambda c: self.cell_sent_at.get(c.id, 0.0)):
            due = now - self.cell_sent_at.get(b.id, 0.0) >= CELL_TREE_INTERVAL_S
            if final or (b.id in self.dirty and (due or not b.state.running)):
                if not final and time.perf_counter() > t_end:
                    break  # the rest stay dirty: next pump
                self.dirty.discard(b.id)
                self.cell_sent_at[b.id] = now
                self._notify(self._cell_tree(b, now, whole=final or not b.state.running))
        cells = [cell_row(b) for b in mb.cells] + [not_started_row(p.key, p.engine) for p in mb.not_started]
        parent = mb.snapshot(with_cells=False)
        self._notify(wire.MatrixTree.model_validate({"uri": self.uri, **parent, "cells": cells}))

    def _cell_tree(self, b: Build, now: float, whole: bool) -> wire.BuildTree:
        """The cell's tree, its phases as a delta against what this relay last sent for it (see the module doc)."""
        tree = build_tree(self.uri, build_view.snapshot(b.state, b.time_left))
        last = self.sent_phases.get(b.id)
        self.sent_phases[b.id] = {p.id: p for p in tree.phases}
        if whole or last is None or now - self.full_sent_at.get(b.id, 0.0) >= FULL_TREE_INTERVAL_S:
            self.full_sent_at[b.id] = now
            return tree
        changed = [p for p in tree.phases if last.get(p.id) != p]
        return tree.model_copy(update={"phases": changed, "phasesDelta": True})

    def _notify(self, tree: wire.BuildTree | wire.MatrixTree) -> None:
        self.notifications += 1
        notify_build_tree(self.ls, tree)
