"""The triage commands' names, registered without importing their module: the server's start-up path stays free of
pydantic and the build core (tests/test_layers.py); `trtls.lsp.triage_command` is imported on the first call."""

from __future__ import annotations

from typing import Any

COMMANDS = {
    "trtls.reduceEngine": "start_reduction",
    "trtls.findDivergence": "find_divergence",
    "trtls.buildMinimal": "build_minimal",
    "trtls.showDocument": "show_document",
}


def register(command: Any) -> None:
    """Register each command with the server's `command` decorator (lsp/server.py)."""
    for name, handler in COMMANDS.items():
        command(name)(_lazy(handler))


def _lazy(handler: str) -> Any:
    async def run(ls: Any, args: Any = None) -> dict[str, Any]:  # the (ls, args) shape pygls maps arguments onto
        from trtls.lsp import triage_command

        return dict(await getattr(triage_command, handler)(ls, args))

    return run
