"""The end of a server-created `$/progress` with the core's outcome beside the message.

`WorkDoneProgressEnd` has only `message`; a client that classified the end by reading that prose would re-derive
a rule the server owns. So the end also carries `outcome` and `outcomeKind` (`trtls.core.outcome`), extra
properties every LSP client ignores and the VS Code extension renders.
"""

from __future__ import annotations

from typing import Any

from lsprotocol import types as lsp

from trtls.core.outcome import OutcomeKind


def end_progress(ls: Any, token: str, message: str, outcome: str, outcome_kind: OutcomeKind) -> None:
    value = {"kind": "end", "message": message, "outcome": outcome, "outcomeKind": outcome_kind}
    ls.protocol.notify(lsp.PROGRESS, lsp.ProgressParams(token=token, value=value))
