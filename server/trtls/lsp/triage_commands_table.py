"""Commands registered by name without importing their modules: the server's start-up path stays free of pydantic
and the build core (tests/test_layers.py); each module is imported on its command's first call."""

from __future__ import annotations

from typing import Any

COMMANDS = {  # command → (module under trtls.lsp, function)
    "trtls.reduceEngine": ("triage_command", "start_reduction"),
    "trtls.findDivergence": ("triage_command", "find_divergence"),
    "trtls.buildMinimal": ("triage_command", "build_minimal"),
    "trtls.showDocument": ("triage_command", "show_document"),
    "trtls.rollbackEngine": ("rollback_command", "rollback_engine"),
}


def register(command: Any) -> None:
    """Register each command with the server's `command` decorator (lsp/server.py)."""
    for name, (module, handler) in COMMANDS.items():
        command(name)(_lazy(module, handler))


def _lazy(module: str, handler: str) -> Any:
    async def run(ls: Any, args: Any = None) -> Any:  # the (ls, args) shape pygls maps arguments onto
        if module == "rollback_command":
            from trtls.lsp import rollback_command as loaded
        else:
            from trtls.lsp import triage_command as loaded  # type: ignore[no-redef]
        return await getattr(loaded, handler)(ls, args)  # its reply model (lsp/server.py's `command` sends it)

    return run
