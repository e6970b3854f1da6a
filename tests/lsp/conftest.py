"""pytest-lsp: the real server over stdio, as any editor would start it."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types as lsp
from pytest_lsp import ClientServerConfig, LanguageClient

SERVER = [sys.executable, "-m", "trtls", "serve"]
ROUTE = Path(__file__).resolve().parents[2] / "samples" / "route"


def caps(progress: bool = True) -> lsp.ClientCapabilities:
    return lsp.ClientCapabilities(
        window=lsp.WindowClientCapabilities(work_done_progress=progress),
        workspace=lsp.WorkspaceClientCapabilities(
            code_lens=lsp.CodeLensWorkspaceClientCapabilities(refresh_support=True)
        ),
        text_document=lsp.TextDocumentClientCapabilities(
            publish_diagnostics=lsp.PublishDiagnosticsClientCapabilities(
                code_description_support=True, data_support=True
            )
        ),
    )


def accept_refresh(client: LanguageClient) -> None:
    """We announce codeLens refresh support, so answer the server's refresh requests like an editor."""
    client.feature(lsp.WORKSPACE_CODE_LENS_REFRESH)(lambda params: None)


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER))
async def client(lsp_client: LanguageClient):
    accept_refresh(lsp_client)
    await lsp_client.initialize_session(
        lsp.InitializeParams(capabilities=caps(), initialization_options={"buildTree": True})
    )
    yield
    await lsp_client.shutdown_session()


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER))
async def plain_client(lsp_client: LanguageClient):
    """A client without window.workDoneProgress: it gets window/logMessage lines instead."""
    accept_refresh(lsp_client)
    await lsp_client.initialize_session(lsp.InitializeParams(capabilities=caps(progress=False)))
    yield
    await lsp_client.shutdown_session()


@pytest.fixture(scope="module")
def route_sample(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The route sample, its checkpoint made (nothing built, locked or recorded): a workspace for the gates."""
    ws = tmp_path_factory.mktemp("route") / "ws"
    shutil.copytree(
        ROUTE,
        ws,
        ignore=shutil.ignore_patterns(".trtls", "build", "checkpoints", "inputs", "model.onnx", "trtls.lock.json"),
    )
    subprocess.run([sys.executable, str(ws / "make_checkpoint.py")], cwd=ws, check=True, capture_output=True)
    return ws
