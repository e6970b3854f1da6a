"""A server-created `$/progress`: its stoppable start, and its end with the core's outcome beside the message.

`WorkDoneProgressEnd` has only `message`; a client that classified the end by reading that prose would re-derive
a rule the server owns. So the end also carries `outcome` and `outcomeKind` (`trtls.core.outcome`), extra
properties every LSP client ignores and the VS Code extension renders.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING

from lsprotocol import types as lsp

from trtls.core.outcome import OutcomeKind

if TYPE_CHECKING:
    from trtls.lsp.language_server import TrtlsServer


async def begin_stoppable_progress(
    ls: TrtlsServer, kind: str, begin: lsp.WorkDoneProgressBegin, stop: Callable[[], object]
) -> str | None:
    """Create a fresh `trtls-<kind>-<uuid>` token (pygls never frees one), begin it, and make the client's Cancel on
    it call `stop` (the Stop button); None when the client refused the token."""
    token = f"trtls-{kind}-{uuid.uuid4()}"
    try:
        await ls.work_done_progress.create_async(token)
    except Exception:
        return None
    ls.work_done_progress.begin(token, begin)
    future = ls.work_done_progress.tokens.get(token)
    if future is not None:
        future.add_done_callback(lambda f: stop() if f.cancelled() else None)
    return token


def end_progress(ls: TrtlsServer, token: str, message: str, outcome: str, outcome_kind: OutcomeKind) -> None:
    from trtls.core.wire import ProgressEnd, to_wire

    value = to_wire(ProgressEnd(kind="end", message=message, outcome=outcome, outcomeKind=outcome_kind))
    ls.protocol.notify(lsp.PROGRESS, lsp.ProgressParams(token=token, value=value))
