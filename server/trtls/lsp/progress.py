"""A server-created `$/progress` that never holds up the reply of the command that started it.

A click on Build Engine used to ask the client for a token (`window/workDoneProgress/create`, a request to the
client) and wait for its answer before replying: a client slow to answer delayed the reply by a round trip. Here the
token is asked for on a task of its own; what the run reports meanwhile is kept (the latest report, and the end)
and sent once the client accepted the token, in order: begin, the latest report, end. A client that refuses the
token gets nothing on it; `on_refused` is told once (a relay then says the build's lines in the log instead).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

from lsprotocol import types as lsp

from trtls.core.outcome import OutcomeKind
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
        self.token = f"trtls-{kind}-{uuid.uuid4()}"  # fresh: pygls never frees one
        self.state: TokenState = "asking"
        self._report: lsp.WorkDoneProgressReport | None = None
        self._end: tuple[str, str, OutcomeKind] | None = None
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
        self.ls.work_done_progress.begin(self.token, self.begin_value)
        self.state = "begun"
        future = self.ls.work_done_progress.tokens.get(self.token)
        if future is not None:  # the client's Cancel on the token: the Stop button
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


def begin_stoppable_progress(
    ls: TrtlsServer,
    kind: str,
    begin: lsp.WorkDoneProgressBegin,
    stop: Callable[[], object],
    on_refused: Callable[[], object] | None = None,
) -> Progress:
    """Ask for a `trtls-<kind>-<uuid>` token without waiting, begin it once the client accepted it, and make the
    client's Cancel on it call `stop`. Needs the running loop."""
    return Progress(ls, kind, begin, stop, on_refused)
