"""A `$/progress` end with the core's outcome beside the message (the progress itself: lsp/progress.py).

`WorkDoneProgressEnd` has only `message`; a client that classified the end by reading that prose would re-derive
a rule the server owns. So the end also carries `outcome` and `outcomeKind` (`trtls.core.outcome`), extra
properties every LSP client ignores and the VS Code extension renders.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lsprotocol import types as lsp

from trtls.core.outcome import OutcomeKind

if TYPE_CHECKING:
    from trtls.lsp.language_server import TrtlsServer


def end_progress(
    ls: TrtlsServer, token: lsp.ProgressToken, message: str, outcome: str, outcome_kind: OutcomeKind
) -> None:
    from trtls.core.wire import ProgressEnd, to_wire

    value = to_wire(ProgressEnd(kind="end", message=message, outcome=outcome, outcomeKind=outcome_kind))
    ls.protocol.notify(lsp.PROGRESS, lsp.ProgressParams(token=token, value=value))
