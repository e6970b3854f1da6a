"""A remote store that stalls never stalls the language server (docs/store.md, "The lookup and the event loop").

The real server over stdio; the recipe's `[store] remote` is a real socket server on a loopback port that accepts
connections and never answers. While the editor's Build Engine waits for that remote (its lookup runs on a thread,
bounded by the remote's timeouts), the server answers another request; then the build goes on without the remote,
a real TensorRT-RTX build, and its evidence names the remote as unreachable."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from pathlib import Path
from typing import Any

import pytest_lsp
from lsprotocol import types as lsp
from pytest_lsp import ClientServerConfig, LanguageClient

from tests.lsp.conftest import SERVER, accept_refresh, caps
from tests.lsp.lsp_helpers import execute, open_recipe, until
from tests.store.helpers import with_store
from tests.store.scripted_remote import Listener


class SilentServer(Listener):
    """Accepts every connection, reads what is sent, answers nothing; counts the connections the client closed."""

    def __init__(self) -> None:
        self.accepted = 0
        self.closed = 0
        self.lock = threading.Lock()
        super().__init__()

    def serve(self, conn: socket.socket) -> None:
        with self.lock:
            self.accepted += 1
        with conn:
            try:
                while conn.recv(65536):
                    pass
            except OSError:
                pass
        with self.lock:
            self.closed += 1


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER))
async def client(lsp_client: LanguageClient):
    accept_refresh(lsp_client)
    await lsp_client.initialize_session(
        lsp.InitializeParams(capabilities=caps(), initialization_options={"buildTree": True})
    )
    yield
    await lsp_client.shutdown_session()


def _summary(ws: Path, build_id: str) -> dict[str, Any] | None:
    path = ws / ".trtls" / "runs" / build_id / "summary.json"
    try:
        summary = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return summary if "store" in summary else None  # rewritten with the store's record once the build ended


async def test_a_stalled_remote_leaves_the_server_answering_and_the_build_names_it(
    client: LanguageClient, workspace: Path, tmp_path: Path
) -> None:
    silent = SilentServer()
    try:
        with_store(workspace, tmp_path / "store", remote=silent.url)
        uri = open_recipe(client, workspace)
        build = asyncio.ensure_future(execute(client, "trtls.buildEngine", {"uri": uri, "engine": "demo"}))
        await until(lambda: silent.accepted >= 1 or build.done(), timeout=300)
        assert silent.accepted >= 1, build.result()  # the lookup asked the remote, which says nothing

        params = lsp.CodeLensParams(text_document=lsp.TextDocumentIdentifier(uri=uri))
        lenses = await client.text_document_code_lens_async(params)
        # answered while the build's lookup still waits on the remote: its connection open, the build not answered
        with silent.lock:
            assert silent.closed == 0, "the lens was answered only after the remote's wait ended"
        assert not build.done(), "the build was answered before the lens: the lookup held the event loop"
        assert lenses and any("Build Engine" in (lens.command.title if lens.command else "") for lens in lenses)

        reply = await build  # the remote's timeout ends the wait: a miss, and a real build starts
        assert reply["status"] == "started", reply
        await until(lambda: _summary(workspace, reply["buildId"]) is not None, timeout=600)
        summary = _summary(workspace, reply["buildId"])
        assert summary is not None and summary["outcome"] == "built", summary
        said = f"the remote store {silent.url} was not used: it could not be reached (timed out)"
        assert said in summary["store"]["warnings"], summary["store"]
        assert silent.closed >= 1  # the lookup gave the connection up: no hang
    finally:
        silent.stop()
