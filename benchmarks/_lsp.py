"""A real trtls language server over stdio for the benchmarks (the same client the LSP tests use)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

from lsprotocol import types as lsp
from pygls.protocol import JsonRPCNotification
from pytest_lsp import LanguageClient, make_test_lsp_client

# The LSP tests' helpers, so a benchmark drives the server exactly as the tests do.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "lsp"))
from lsp_helpers import execute, open_recipe, plain  # noqa: F401 - re-exported for the benchmarks

SERVER = [sys.executable, "-m", "trtls", "serve"]


def caps() -> lsp.ClientCapabilities:
    return lsp.ClientCapabilities(
        window=lsp.WindowClientCapabilities(work_done_progress=True),
        workspace=lsp.WorkspaceClientCapabilities(
            code_lens=lsp.CodeLensWorkspaceClientCapabilities(refresh_support=True)
        ),
    )


class LatestTrees:
    """`trtls/buildTree` notifications as a benchmark client needs them when many builds stream: the latest per
    build, and how many arrived. Keeping every one (32 farm cells × ~300 phases, several a second) grew this
    client's heap until its own garbage collector paused for 100–200 ms at a time, inside the round trips being
    measured: the benchmark measured itself, not the server."""

    def __init__(self) -> None:
        self.latest: dict[Any, dict] = {}
        self.count = 0

    def append(self, payload: dict) -> None:
        self.count += 1
        self.latest.pop(payload.get("buildId"), None)  # re-inserted last: iteration order is arrival order
        self.latest[payload.get("buildId")] = payload

    def __len__(self) -> int:
        return self.count

    def __iter__(self):
        return iter(list(self.latest.values()))

    def __reversed__(self):
        return reversed(list(self.latest.values()))


async def start_server(build_tree: bool = True, keep_all: bool = True) -> tuple[LanguageClient, Any]:
    """`keep_all=False`: keep only each build's latest notification (LatestTrees)."""
    client = make_test_lsp_client()
    trees: Any = [] if keep_all else LatestTrees()
    if not keep_all:
        # pygls' generic client turns a custom notification's params into namedtuples by re-encoding them and
        # creating a namedtuple *class* per JSON object (pygls.protocol._dict_to_object): for 32 farm cells' trees
        # that is tens of thousands of classes a second and 100–200 ms garbage-collector pauses inside the round
        # trips being measured. Keep them as the dicts JSON gave (what an editor's client does).
        client.protocol._converter.register_structure_hook(JsonRPCNotification, lambda obj, cls: cls(**obj))

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
