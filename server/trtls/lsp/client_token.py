"""The client's own progress token of a `workspace/executeCommand` (`workDoneToken`, LSP 3.15), for the command it
came with.

pygls hands a command's handler its arguments only: the token stays in the request's params. `CommandProtocol`
keeps pygls's dispatch (the command's lookup, its arguments) and runs the handler with the token in a context
variable of the handler's own task, so the progress the command begins (lsp/progress.py) takes it, once, instead of
asking the client for one (`window/workDoneProgress/create`). Nothing outside that task sees it: the variable is set
inside the task, never in the loop's main context, which every later message is handled in.

Loaded before `initialize` is answered (the server is constructed with it): pygls, lsprotocol and the stdlib only.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable, Coroutine, Generator

from lsprotocol import types as lsp
from pygls.protocol import LanguageServerProtocol, lsp_method


class _Offered:
    """The token one request came with, until a progress takes it (subtasks copy the context, not this box)."""

    __slots__ = ("token",)

    def __init__(self, token: lsp.ProgressToken) -> None:
        self.token: lsp.ProgressToken | None = token


_offered: contextvars.ContextVar[_Offered | None] = contextvars.ContextVar("trtls_work_done_token", default=None)


def client_token_offered() -> bool:
    """Whether the running command came with a `workDoneToken` no progress has taken yet (a client that sends one
    takes progress on it, whatever its `window.workDoneProgress` capability says)."""
    offered = _offered.get()
    return offered is not None and offered.token is not None


def take_client_token() -> lsp.ProgressToken | None:
    """The running command's `workDoneToken` the first time it is asked for; None after that, outside a command, or
    when the client sent none."""
    offered = _offered.get()
    if offered is None:
        return None
    token, offered.token = offered.token, None
    return token


# A command's handler as pygls calls it (its arguments already structured), and what the dispatch yields to pygls.
Handler = Callable[..., Coroutine[object, object, object]]
Dispatch = Generator[tuple[Handler, tuple[object, ...], dict[str, object]], object, object]


def _with_token(handler: Handler, token: lsp.ProgressToken) -> Handler:
    async def handle(*args: object, **kwargs: object) -> object:
        _offered.set(_Offered(token))  # in the task pygls made for this request: its context is its own copy
        return await handler(*args, **kwargs)

    return handle


class CommandProtocol(LanguageServerProtocol):
    """pygls's protocol, with the `workDoneToken` of `workspace/executeCommand` passed to the command's task."""

    @lsp_method(lsp.WORKSPACE_EXECUTE_COMMAND)
    def lsp_workspace__execute_command(self, params: lsp.ExecuteCommandParams) -> Dispatch:
        dispatch = super().lsp_workspace__execute_command(params)
        handler, args, kwargs = next(dispatch)  # pygls's own lookup and argument structuring (its errors as raised)
        if params.work_done_token is not None and asyncio.iscoroutinefunction(handler):
            handler = _with_token(handler, params.work_done_token)
        result = yield handler, args, kwargs
        try:
            dispatch.send(result)
        except StopIteration as done:
            return done.value
        raise RuntimeError("pygls's workspace/executeCommand yielded more than one handler")
