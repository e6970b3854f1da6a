"""The engine store in the editor, over real LSP: the Build Engine lens says up to date or what changed, and
trtls.buildEngine reuses a stored engine without starting a worker."""

from __future__ import annotations

import json
from pathlib import Path

import pytest_lsp
from lsprotocol import types as lsp
from pytest_lsp import ClientServerConfig, LanguageClient

from tests.lsp.conftest import SERVER, accept_refresh, caps
from tests.lsp.lsp_helpers import execute, until
from tests.store.conftest import copy_store
from tests.store.helpers import run_build, summaries, with_store
from trtls.core import wire


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER))
async def client(lsp_client: LanguageClient):
    accept_refresh(lsp_client)
    await lsp_client.initialize_session(lsp.InitializeParams(capabilities=caps()))
    yield
    await lsp_client.shutdown_session()


async def lens_titles(client: LanguageClient, uri: str) -> list[str]:
    lenses = await client.text_document_code_lens_async(lsp.CodeLensParams(lsp.TextDocumentIdentifier(uri)))
    return [lens.command.title for lens in lenses or [] if lens.command and lens.command.command == "trtls.buildEngine"]


async def lens_becomes(client: LanguageClient, uri: str, title: str) -> None:
    """The demo lens starts with `title` once the server has checked the last change (checks are throttled)."""
    import asyncio

    for _ in range(200):
        if (await lens_titles(client, uri))[0].startswith(title):
            return
        await asyncio.sleep(0.05)
    assert (await lens_titles(client, uri))[0].startswith(title)


def change(client: LanguageClient, uri: str, version: int, text: str) -> None:
    client.text_document_did_change(
        lsp.DidChangeTextDocumentParams(
            text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[lsp.TextDocumentContentChangeWholeDocument(text=text)],
        )
    )


async def test_lens_says_up_to_date_or_what_changed_and_build_reuses(
    client: LanguageClient, seeded: tuple[Path, dict], seed_ws: Path, tmp_path: Path
) -> None:
    with_store(seed_ws, copy_store(seeded, tmp_path))
    assert run_build(seed_ws).returncode == 0  # a hit from the terminal: this table's known-good engine
    recipe = seed_ws / "trtls.toml"
    text = recipe.read_text()
    uri = recipe.as_uri()
    client.text_document_did_open(
        lsp.DidOpenTextDocumentParams(lsp.TextDocumentItem(uri=uri, language_id="toml", version=1, text=text))
    )
    titles = await lens_titles(client, uri)
    assert titles[0].startswith("✓ up to date · built ") and titles[1] == "▶ Build Engine"  # demo; large never built
    change(client, uri, 2, text.replace("optimization_level = 3", "optimization_level = 5", 1))
    await lens_becomes(client, uri, "▶ Build Engine · optimization_level 3 → 5")  # once the change is checked
    await until(lambda: any(d.code == "TRT336" for d in client.diagnostics.get(uri, [])))
    (hint,) = [d for d in client.diagnostics[uri] if d.code == "TRT336"]
    assert hint.message == "will rebuild because: optimization_level 3 → 5"
    assert hint.range.start.line == 5  # [engines.demo]
    change(client, uri, 3, text)
    await lens_becomes(client, uri, "✓ up to date · built ")
    (seed_ws / "build" / "demo.engine").unlink()
    res = await execute(client, "trtls.buildEngine", {"uri": uri, "engine": "demo"})
    assert res["status"] == "reused" and res["message"].startswith(
        f"up to date — engine from build {seeded[1]['buildId']}"
    )
    assert wire.BuildEngineReply.model_validate(res).status == "reused"  # what the protocol declares
    assert (seed_ws / "build" / "demo.engine").is_file() and Path(res["evidencePath"]).is_file()
    assert summaries(seed_ws)[-1]["workerPid"] is None
    assert json.loads(Path(res["reusedFrom"]["storeEntry"], "entry.json").read_text())["key"] == res["engineKey"]
    assert summaries(seed_ws)[-1]["buildId"] == res["buildId"]
