"""Issue 32 items 8 and 10 in the editor, over real LSP: the editor's rollback pins like the terminal's (the lens says
`📌 pinned to build X` and Build Engine serves the pinned engine), and a reverted change whose key the store holds
reads `✓ in the store · Build Engine restores build X`, not "will rebuild"."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest_lsp
from lsprotocol import types as lsp
from pytest_lsp import ClientServerConfig, LanguageClient

from tests.lsp.conftest import SERVER, accept_refresh, caps
from tests.lsp.lsp_helpers import execute
from tests.store.conftest import copy_store
from tests.store.helpers import run_build, summaries, with_store
from tests.store.test_editor import change, lens_becomes

MAX_A, MAX_B = "max = [8, 3, 32, 32]", "max = [16, 3, 32, 32]"


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER))
async def client(lsp_client: LanguageClient):
    accept_refresh(lsp_client)
    await lsp_client.initialize_session(lsp.InitializeParams(capabilities=caps()))
    yield
    await lsp_client.shutdown_session()


async def test_the_editors_rollback_pins_and_the_lens_says_pinned_or_in_the_store(
    client: LanguageClient, seeded: tuple[Path, dict], seed_ws: Path, tmp_path: Path
) -> None:
    with_store(seed_ws, copy_store(seeded, tmp_path))
    recipe = seed_ws / "trtls.toml"
    assert run_build(seed_ws).returncode == 0  # A: the seeded engine
    recipe.write_text(recipe.read_text().replace(MAX_A, MAX_B, 1))
    assert run_build(seed_ws).returncode == 0  # B: built
    a_id, b_sha = seeded[1]["buildId"], summaries(seed_ws)[-1]["engineArtifact"]["sha256"]
    text = recipe.read_text()
    uri = recipe.as_uri()
    client.text_document_did_open(
        lsp.DidOpenTextDocumentParams(lsp.TextDocumentItem(uri=uri, language_id="toml", version=1, text=text))
    )
    await lens_becomes(client, uri, "✓ up to date · built ")

    reply = await execute(client, "trtls.rollbackEngine", {"uri": uri, "engine": "demo"})
    assert reply["status"] == "rolled_back" and reply["rolledBackTo"]["buildId"] == a_id
    pin = json.loads((seed_ws / ".trtls" / "engines" / "demo.pin.json").read_text())
    assert pin["buildId"] == a_id and pin["by"]["via"] == "the editor (trtls.rollbackEngine)"
    await lens_becomes(client, uri, f"📌 pinned to build {a_id}")

    out = seed_ws / "build" / "demo.engine"
    out.write_bytes(b"vtrt not the pinned engine")
    served = await execute(client, "trtls.buildEngine", {"uri": uri, "engine": "demo"})
    assert served["status"] == "reused" and served["message"].startswith(f"pinned to build {a_id} by a rollback")
    assert hashlib.sha256(out.read_bytes()).hexdigest() == seeded[1]["engineArtifact"]["sha256"] != b_sha

    change(client, uri, 2, text.replace(MAX_B, MAX_A, 1))  # a reverted change: A's key, which the store holds
    await lens_becomes(client, uri, f"✓ in the store · Build Engine restores build {a_id}")
