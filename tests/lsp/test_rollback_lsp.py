"""The retry advice `rollback` as an action, over the real server: after two good builds and a failed one, the
TRT205 advice offers "Roll back to the engine built …", and running it restores the earlier engine from the store to
the output (its bytes), with evidence `rolled_back`."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from lsprotocol import types as lsp
from pytest_lsp import LanguageClient

from .lsp_helpers import command_of, execute, open_recipe, until

LEVEL = "[engines.demo.builder]\noptimization_level = 3\n"


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


async def _build(client: LanguageClient, uri: str, ws: Path) -> dict:
    """Start a build and wait until its evidence is complete: the engine store's section (`store`) is written into
    summary.json after the engine is published and its known-good record appended (builds.avoidance.lookup.after_build),
    so a record with it is a build the store and the rollback know. A fixed sleep after the first summary was a
    guess that a loaded machine could lose."""
    started = await execute(client, "trtls.buildEngine", {"uri": uri, "engine": "demo"})
    summary = ws / ".trtls" / "runs" / started["buildId"] / "summary.json"
    record: dict = {}

    def complete() -> bool:
        nonlocal record
        try:  # replaced atomically: a read sees the first summary or the completed one, never half of one
            record = json.loads(summary.read_text())
        except (OSError, ValueError):
            return False
        return "store" in record

    await until(complete, timeout=300)
    return record


def _edit(client: LanguageClient, uri: str, ws: Path, old: str, new: str, version: int) -> None:
    recipe = ws / "trtls.toml"
    recipe.write_text(recipe.read_text().replace(old, new))
    client.text_document_did_change(
        lsp.DidChangeTextDocumentParams(
            text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[lsp.TextDocumentContentChangeWholeDocument(text=recipe.read_text())],
        )
    )


async def test_rollback_advice_is_an_action_that_restores_the_earlier_engine(
    client: LanguageClient, workspace: Path, tmp_path: Path
) -> None:
    recipe = workspace / "trtls.toml"
    recipe.write_text(recipe.read_text() + f'\n[store]\npath = "{tmp_path / "store"}"\nmode = "read_write"\n')
    uri = open_recipe(client, workspace)
    first = await _build(client, uri, workspace)
    assert first["outcome"] == "built", first.get("error")
    engine = workspace / "build" / "demo.engine"
    first_sha = _sha(engine)
    _edit(client, uri, workspace, LEVEL, LEVEL + 'refit = "individual"\n', 2)  # adds refit data: other bytes
    second = await _build(client, uri, workspace)
    assert second["outcome"] == "built" and _sha(engine) != first_sha
    _edit(client, uri, workspace, 'refit = "individual"\n',
          'refit = "individual"\nmemory_pool_limits = { tactic_shared_memory_kib = 32 }\n', 3)  # fmt: skip
    failed = await _build(client, uri, workspace)
    assert failed["outcome"] == "failed" and failed["retryPolicy"] in ("rollback", "investigate")
    await until(lambda: any(d.code == "TRT205" for d in client.diagnostics.get(uri, [])))
    advice = next(d for d in client.diagnostics[uri] if d.code == "TRT205")
    data = dict(advice.data)
    data["retryPolicy"] = "rollback"  # the advice this test is about (an internal error advises investigate first)
    advice.data = data
    actions = await client.text_document_code_action_async(
        lsp.CodeActionParams(
            text_document=lsp.TextDocumentIdentifier(uri=uri),
            range=advice.range,
            context=lsp.CodeActionContext(diagnostics=[advice]),
        )
    )
    rollbacks = [a for a in actions or [] if a.title.startswith("Roll back to the engine built")]
    assert len(rollbacks) == 1, [a.title for a in actions or []]
    command, arguments = command_of(rollbacks[0])
    assert command == "trtls.rollbackEngine"
    assert arguments[0]["to"] == first["buildId"], "the newest good engine that is not the one at the output"
    reply = await execute(client, command, arguments[0])
    assert reply["status"] == "rolled_back" and reply["rolledBackTo"]["buildId"] == first["buildId"]
    assert _sha(engine) == first_sha, "the first build's engine is back at the output, byte for byte"
    # the rollback is a finished run like any build: listed, its evidence shown by id (no stuck "starting" row)
    listed = {b["buildId"]: b for b in (await execute(client, "trtls.listBuilds", {}))["builds"]}
    assert listed[reply["buildId"]]["status"] != "running", listed[reply["buildId"]]
    evidence = await execute(client, "trtls.showEvidence", {"buildId": reply["buildId"]})
    assert Path(evidence["path"]).is_file() and evidence["summary"]["buildId"] == reply["buildId"]
