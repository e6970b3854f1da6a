"""A command's `$/progress`, which never holds up the reply of the command that started it.

A client that sent its own token with the command (`workDoneToken`, LSP 3.15: lsp/client_token.py) gets the progress
on that token: no `window/workDoneProgress/create` is asked, begin goes out at once, and the client's
`window/workDoneProgress/cancel` on it stops the run. A token of the client's that one of our runs still reports on
(a client that sends the same token with every request) is not taken twice: that run keeps it, the new one gets a
token of the server's.

Otherwise the server makes a token: a click on Build Engine used to ask the client for one and wait for its answer
before replying (a client slow to answer delayed the reply by a round trip). Here the token is asked for on a task of
its own; what the run reports meanwhile is kept (the latest report, and the end) and sent once the client accepted
the token, in order: begin, the latest report, end. A client that refuses the token gets nothing on it;
`on_refused` is told once (a relay then says the build's lines in the log instead).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

from lsprotocol import types as lsp

from trtls.core.outcome import OutcomeKind
from trtls.lsp.client_token import client_token_offered, take_client_token
from trtls.lsp.progress_end import end_progress

if TYPE_CHECKING:
    from trtls.lsp.language_server import TrtlsServer

TokenState = Literal["asking", "begun", "refused", "ended"]


class Progress:
    """One stoppable progress: `report` and `end` may be called at once; they go out once the token exists."""

    def __init__(
        self,
        ls: TrtlsServer,
        kind: str,
        begin: lsp.WorkDoneProgressBegin,
        stop: Callable[[], object],
        on_refused: Callable[[], object] | None = None,
    ) -> None:
        self.ls, self.begin_value, self.stop, self.on_refused = ls, begin, stop, on_refused
        self._report: lsp.WorkDoneProgressReport | None = None
        self._end: tuple[str, str, OutcomeKind] | None = None
        self.state: TokenState = "asking"
        self.created: asyncio.Task[None] | None = None  # the create request's task; None on the client's token
        token = take_client_token()  # taken only when no run of ours reports on it still
        self.on_client_token = token is not None and token not in ls.work_done_progress.tokens
        if token is not None and self.on_client_token:
            self.token: lsp.ProgressToken = token
            self._begin()
        else:
            self.token = f"trtls-{kind}-{uuid.uuid4()}"  # fresh: pygls never frees one
            self.created = asyncio.get_running_loop().create_task(self._create(), name=f"trtls-progress-{self.token}")

    @property
    def refused(self) -> bool:
        return self.state == "refused"

    async def _create(self) -> None:
        try:
            await self.ls.work_done_progress.create_async(self.token)
        except Exception:  # the client refused the token (or the connection ended): nothing goes out on it
            self.state = "refused"
            if self.on_refused is not None:
                self.on_refused()
            return
        self._begin()

    def _begin(self) -> None:
        """Begin on the token, make the client's Cancel on it the Stop button, then send what was kept."""
        self.ls.work_done_progress.begin(self.token, self.begin_value)  # registers the client's token for its Cancel
        self.state = "begun"
        future = self.ls.work_done_progress.tokens.get(self.token)
        if future is not None:
            future.add_done_callback(lambda f: self.stop() if f.cancelled() else None)
        if self._report is not None:
            self.ls.work_done_progress.report(self.token, self._report)
        if self._end is not None:
            self._send_end(*self._end)

    def report(self, value: lsp.WorkDoneProgressReport) -> None:
        """Send `value` now, or keep it (the latest only) until the client accepted the token."""
        if self.state == "begun":
            self.ls.work_done_progress.report(self.token, value)
        elif self.state == "asking":
            self._report = value

    def end(self, message: str, outcome: str, outcome_kind: OutcomeKind) -> None:
        """End the progress now, or as soon as the client accepted the token."""
        if self.state == "begun":
            self._send_end(message, outcome, outcome_kind)
        elif self.state == "asking":
            self._end = (message, outcome, outcome_kind)

    def _send_end(self, message: str, outcome: str, outcome_kind: OutcomeKind) -> None:
        self.state = "ended"
        end_progress(self.ls, self.token, message, outcome, outcome_kind)
        if self.on_client_token:  # the client's token is free again: its next request may bring the same one
            self.ls.work_done_progress.tokens.pop(self.token, None)


def begin_stoppable_progress(
    ls: TrtlsServer,
    kind: str,
    begin: lsp.WorkDoneProgressBegin,
    stop: Callable[[], object],
    on_refused: Callable[[], object] | None = None,
) -> Progress:
    """Begin on the command's own `workDoneToken` when the client sent one, else ask for a `trtls-<kind>-<uuid>`
    token without waiting and begin it once the client accepted it; the client's Cancel on it calls `stop`. Needs
    the running loop."""
    return Progress(ls, kind, begin, stop, on_refused)


def wants_progress(ls: TrtlsServer) -> bool:
    """Whether the running command reports `$/progress`: its client sent a token with it, or takes tokens from the
    server (`window.workDoneProgress`)."""
    window = ls.client_capabilities.window
    return client_token_offered() or bool(window and window.work_done_progress)
