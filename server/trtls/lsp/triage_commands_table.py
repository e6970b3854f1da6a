"""Commands registered by name without importing their modules: the server's start-up path stays free of pydantic
and the build core (tests/test_layers.py); each module is imported on its command's first call."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic import BaseModel

    from trtls.lsp.language_server import TrtlsServer

# command → (module under trtls.lsp, its handler, the handler's argument model in trtls.lsp.command_args: named here
# because the handler is not imported to read its annotation; tests/test_typed_seams.py checks the two agree)
COMMANDS = {
    "trtls.reduceEngine": ("triage_command", "start_reduction", "ReduceEngineArgs"),
    "trtls.findDivergence": ("triage_command", "find_divergence", "FindDivergenceArgs"),
    "trtls.buildMinimal": ("triage_command", "build_minimal", "BuildMinimalArgs"),
    "trtls.showDocument": ("triage_command", "show_document", "ShowDocumentArgs"),
    "trtls.rollbackEngine": ("rollback_command", "rollback_engine", "RollbackEngineArgs"),
}

LazyHandler = Callable[["TrtlsServer", "BaseModel"], Awaitable["BaseModel"]]


def register(command: Callable[[str, str], Callable[[LazyHandler], LazyHandler]]) -> None:
    """Register each command with the server's `command` decorator (lsp/server.py), with its argument model."""
    for name, (module, handler, args_model) in COMMANDS.items():
        command(name, args_model)(_lazy(module, handler))


def _lazy(module: str, handler: str) -> LazyHandler:
    async def run(ls: TrtlsServer, args: BaseModel) -> BaseModel:
        if module == "rollback_command":
            from trtls.lsp import rollback_command as loaded
        else:
            from trtls.lsp import triage_command as loaded  # type: ignore[no-redef]
        reply: BaseModel = await getattr(loaded, handler)(ls, args)  # its reply model (sent by lsp/server.py)
        return reply

    return run
