"""Relay one build to the client: workDoneProgress (or log lines), `trtls/buildTree`, and Stop.

Throttled: at most 5 updates a second per build, only when something changed, and the last state
always goes out before `end` (slow clients have been flooded by chatty servers: rust-analyzer#7590); the trees of
all running builds share TREES_PER_S.
The percentage never falls, even though a phase's step count is only known once it starts.

`notify_build_tree` is the one place a `trtls/buildTree` goes out (a build's, a matrix's, a cell's, a restored
run's): constructed as its model (trtls.core.wire.BuildTree | MatrixTree), so a row the protocol does not declare
never reaches a client.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from lsprotocol import types as lsp

from trtls.builds.supervisor.supervisor import Build
from trtls.core import build_view, wire
from trtls.core.outcome import build_outcome_kind
from trtls.lsp.progress import Progress, begin_stoppable_progress

if TYPE_CHECKING:
    from trtls.core.events import Event
    from trtls.lsp.language_server import TrtlsServer

MIN_INTERVAL_S = 0.2  # ≤ 5 reports per second
# Every running build's trees together, per second. A tree is the whole phase tree (`large`: ~300 phases, ~100 KB of
# JSON, ~5 ms of the server's CPU to draw, validate and send, and the client's to parse): 16 builds at 5 a second each
# starved a 2-core host's server and client behind the builds themselves (hover p95 6.9 s, 2026-12-05). Shared, each
# of n builds sends a tree at most every max(MIN_INTERVAL_S, n / TREES_PER_S) seconds; progress reports are not held.
TREES_PER_S = 10.0
_tree_relays: set[BuildRelay] = set()  # the relays whose build is running and that send trees


def tree_interval() -> float:
    """The least time between two trees of one build, with every running build's relay counted."""
    return max(MIN_INTERVAL_S, len(_tree_relays) / TREES_PER_S)


def notify_build_tree(ls: TrtlsServer, tree: wire.BuildTree | wire.MatrixTree) -> None:
    """Send one `trtls/buildTree` notification."""
    ls.protocol.notify(wire.BUILD_TREE, wire.to_wire(tree))


def build_tree(uri: str, snapshot: dict[str, Any]) -> wire.BuildTree:
    """A build's snapshot (core.build_view.snapshot, RestoredRun.snapshot) as the notification for the document
    `uri`."""
    return wire.BuildTree.model_validate({"uri": uri, **snapshot})


class BuildRelay:
    def __init__(
        self,
        ls: TrtlsServer,
        build: Build,
        uri: str,
        send_tree: bool,
        has_progress: bool,
        on_done: Callable[[Build], object],
    ):
        self.ls = ls
        self.build = build
        self.uri = uri
        self.send_tree = send_tree
        self.has_progress = has_progress
        self.on_done = on_done
        self.progress: Progress | None = None  # None: the client takes no progress (the log says the build)
        self.percentage = 0
        self.last_sent: tuple[str, int] | None = None
        self.last_tree: dict[str, Any] | None = None
        self.dirty = asyncio.Event()
        self.reports_sent = 0
        self.tree_sent_at: float | None = None  # loop time of the last tree sent

    async def start(self) -> None:
        b = self.build
        starting = f"trtls: building {b.engine} ({b.id})"
        if self.has_progress:  # the token is asked for beside the reply, never before it (lsp/progress.py)
            self.progress = begin_stoppable_progress(
                self.ls,
                "build",
                lsp.WorkDoneProgressBegin(
                    title=f"Building {b.engine}", cancellable=True, message="starting worker", percentage=0
                ),
                lambda: b.cancel("ide_stop"),
                on_refused=lambda: self._log(starting),
            )
        else:
            self._log(starting)
        b.listeners.append(self._on_event)
        if self.send_tree:
            _tree_relays.add(self)
        asyncio.get_running_loop().create_task(self._pump())

    def _on_event(self, build: Build, ev: Event | None) -> None:
        self.dirty.set()

    async def _pump(self) -> None:
        """Send the current state at most every MIN_INTERVAL_S while the build runs, then finish. Whatever ends it (a
        send that raised too), this relay leaves the shared count: other builds' trees are not held for it."""
        try:
            await self._relay()
        finally:
            _tree_relays.discard(self)

    async def _relay(self) -> None:
        b = self.build
        while b.state.running:
            try:
                await asyncio.wait_for(self.dirty.wait(), timeout=1.0)  # also tick for elapsed/quiet time
            except TimeoutError:
                pass
            self.dirty.clear()
            if not b.state.running:
                break
            self._send_state()
            await asyncio.sleep(MIN_INTERVAL_S)
        # The outcome is known before the evidence is written (the output's sha is re-read first): the last state
        # must carry the evidence path, or the finished row has no Show Evidence / Timeline (seen under load).
        await b.ended()
        self._send_state()  # the last state before end
        self._end()

    def _send_state(self) -> None:
        b, state = self.build, self.build.state
        done = min(int(state.tree.fraction_done() * 100), 99 if state.running else 100)
        self.percentage = max(self.percentage, done)
        if state.running:
            message = build_view.progress_message(state, b.time_left)
        else:
            message = build_view.outcome_message(state)
        shown = (message, self.percentage)
        if shown != self.last_sent:
            self.last_sent = shown
            self.reports_sent += 1
            if self.progress is not None and not self.progress.refused:
                self.progress.report(lsp.WorkDoneProgressReport(message=message, percentage=self.percentage))
            else:
                self._log(f"trtls: {b.engine}: {message} ({self.percentage}%)")
        if self.send_tree:
            now = asyncio.get_running_loop().time()
            if state.running and self.tree_sent_at is not None and now - self.tree_sent_at < tree_interval():
                return  # shared with the other running builds: the last state always goes, before `end`
            snapshot = build_view.snapshot(state, b.time_left)
            if snapshot != self.last_tree:
                self.last_tree, self.tree_sent_at = snapshot, now
                notify_build_tree(self.ls, build_tree(self.uri, snapshot))

    def _end(self) -> None:
        b, state = self.build, self.build.state
        _tree_relays.discard(self)
        if self.send_tree:
            notify_build_tree(self.ls, build_tree(self.uri, build_view.snapshot(state, b.time_left)))
        if self.progress is not None and not self.progress.refused:
            outcome = state.outcome or "killed"
            self.progress.end(build_view.outcome_message(state), outcome, build_outcome_kind(outcome) or "failed")
        else:
            self._log(f"trtls: {b.engine}: {build_view.outcome_message(state)}")
        self.on_done(b)

    def _log(self, text: str) -> None:
        self.ls.window_log_message(lsp.LogMessageParams(type=lsp.MessageType.Info, message=text))
