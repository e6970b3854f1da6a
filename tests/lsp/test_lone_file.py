"""A lone trtls.toml: an editor window with no folder open (no rootUri, no workspace folders) or with a folder
that does not contain the recipe. The server must validate it against its own directory all the same, over real
LSP stdio. (The VS Code side, activation on the lone file, is the `lone` step of extension/e2e/run.mjs.)"""

from __future__ import annotations

from pathlib import Path

import pytest_lsp
from lsprotocol import types as lsp
from pytest_lsp import ClientServerConfig, LanguageClient

from tests.lsp.conftest import SERVER, accept_refresh, caps
from tests.lsp.lsp_helpers import until

# The only error: the `onnx` file does not exist next to the recipe (TRT104 at the `onnx` line).
RECIPE = '[engines.solo]\nonnx = "missing.onnx"\noutput = "build/solo.engine"\n'
ONNX_LINE = 1  # 0-based


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER))
async def no_folder_client(lsp_client: LanguageClient):
    """As VS Code starts a server for a window with no folder: rootUri null, no workspace folders."""
    accept_refresh(lsp_client)
    await lsp_client.initialize_session(
        lsp.InitializeParams(capabilities=caps(), root_uri=None, root_path=None, workspace_folders=None)
    )
    yield
    await lsp_client.shutdown_session()


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER))
async def other_folder_client(lsp_client: LanguageClient, tmp_path_factory):
    """A window whose only folder is somewhere else (the recipe is opened from outside it)."""
    folder = tmp_path_factory.mktemp("unrelated-folder")
    accept_refresh(lsp_client)
    await lsp_client.initialize_session(
        lsp.InitializeParams(
            capabilities=caps(),
            root_uri=folder.as_uri(),
            workspace_folders=[lsp.WorkspaceFolder(uri=folder.as_uri(), name=folder.name)],
        )
    )
    yield
    await lsp_client.shutdown_session()


def open_doc(client: LanguageClient, path: Path) -> str:
    uri = path.as_uri()
    client.text_document_did_open(
        lsp.DidOpenTextDocumentParams(
            lsp.TextDocumentItem(uri=uri, language_id="toml", version=1, text=path.read_text())
        )
    )
    return uri


async def check_lone_recipe(client: LanguageClient, lone: Path) -> None:
    (lone / "trtls.toml").write_text(RECIPE)
    (lone / "engines.toml").write_text(RECIPE)  # the same text under another name: not a recipe
    other = open_doc(client, lone / "engines.toml")
    uri = open_doc(client, lone / "trtls.toml")
    await until(lambda: uri in client.diagnostics, timeout=60)
    codes = [(d.code, d.range.start.line) for d in client.diagnostics[uri]]
    assert codes == [("TRT104", ONNX_LINE)], codes
    (missing,) = client.diagnostics[uri]
    # resolved against the recipe's own directory, not the server's cwd or a workspace root
    assert str(lone / "missing.onnx") in missing.message
    # the server sends in order: the recipe's diagnostics came after anything it would publish for engines.toml
    assert client.diagnostics.get(other, []) == []
    lenses = await client.text_document_code_lens_async(lsp.CodeLensParams(lsp.TextDocumentIdentifier(uri)))
    assert any(lens.command and lens.command.title == "▶ Build Engine" for lens in lenses)
    targets = await client.workspace_execute_command_async(
        lsp.ExecuteCommandParams(command="trtls.listTargets", arguments=[{"uri": uri}])
    )
    assert targets["engines"] == ["solo"]


async def test_lone_recipe_without_a_workspace_gets_located_diagnostics(
    no_folder_client: LanguageClient, tmp_path: Path
) -> None:
    await check_lone_recipe(no_folder_client, tmp_path)


async def test_recipe_outside_the_open_folder_gets_located_diagnostics(
    other_folder_client: LanguageClient, tmp_path: Path
) -> None:
    await check_lone_recipe(other_folder_client, tmp_path)
