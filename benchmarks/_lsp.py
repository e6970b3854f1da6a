"""A real trtls language server over stdio for the benchmarks (the same client the LSP tests use)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

from lsprotocol import types as lsp
from pytest_lsp import LanguageClient, make_test_lsp_client

# The LSP tests' helpers, so a benchmark drives the server exactly as the tests do.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "lsp"))
from lsp_helpers import execute, open_recipe  # noqa: F401 - re-exported for the benchmarks

SERVER = [sys.executable, "-m", "trtls", "serve"]


def caps() -> lsp.ClientCapabilities:
    return lsp.ClientCapabilities(
        window=lsp.WindowClientCapabilities(work_done_progress=True),
        workspace=lsp.WorkspaceClientCapabilities(
            code_lens=lsp.CodeLensWorkspaceClientCapabilities(refresh_support=True)
        ),
    )


def plain(obj: Any) -> Any:
    """pygls hands custom notification params over as namedtuple-like objects: make them dicts."""
    if hasattr(obj, "_asdict"):
        return {k: plain(v) for k, v in obj._asdict().items()}
    if isinstance(obj, (list, tuple)):
        return [plain(v) for v in obj]
    return obj


async def start_server(build_tree: bool = True) -> tuple[LanguageClient, list[dict]]:
    client = make_test_lsp_client()
    trees: list[dict] = []

    @client.feature(lsp.WORKSPACE_CODE_LENS_REFRESH)
    def _refresh(params: Any) -> None:
        return None

    client.feature("trtls/buildTree")(lambda params: trees.append(plain(params)))
    await client.start_io(*SERVER)
    await client.initialize_session(
        lsp.InitializeParams(capabilities=caps(), initialization_options={"buildTree": build_tree})
    )
    return client, trees


async def until(predicate, timeout: float = 180.0, step: float = 0.01) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not predicate():
        if loop.time() > end:
            raise TimeoutError("condition not met in time")
        await asyncio.sleep(step)
