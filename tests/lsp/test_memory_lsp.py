"""Out of memory over real LSP (stdio): a real build that fails for its workspace pool (`workspace_mib = 1`, as
tests/builds/test_memory_exhaustion.py induces it) publishes TRT207 with a quick fix that removes the limit; the fix,
applied as the editor applies it, makes the next build succeed; and before a further build the hover of the engine
says what its last build peaked at (core.display.peak_memory_text, from the history)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from lsprotocol import types as lsp
from pytest_lsp import LanguageClient

from trtls.builds.supervisor.history import History
from trtls.core.tomlpos import apply_edits

from .lsp_helpers import TIMEOUT, execute, open_recipe, until

RECIPE = (
    '[engines.large]\nonnx = "models/large.onnx"\noutput = "build/large.engine"\n'
    "[engines.large.builder]\nmemory_pool_limits = { workspace_mib = 1 }\n"
    '[[engines.large.profiles]]\ninput = "input"\n'
    "min = [1, 3, 32, 32]\nopt = [4, 3, 32, 32]\nmax = [8, 3, 32, 32]\n"
)


def _oom(client: LanguageClient, uri: str) -> lsp.Diagnostic | None:
    return next((d for d in client.diagnostics.get(uri, []) if d.code == "TRT207"), None)


async def _hover(client: LanguageClient, uri: str, line: int) -> str:
    answer = await client.text_document_hover_async(
        lsp.HoverParams(lsp.TextDocumentIdentifier(uri), lsp.Position(line, 3))
    )
    return answer.contents.value if answer is not None and isinstance(answer.contents, lsp.MarkupContent) else ""


async def _hover_until(client: LanguageClient, uri: str, line: int, words: str) -> str:
    loop = asyncio.get_running_loop()
    end = loop.time() + TIMEOUT
    while words not in (said := await _hover(client, uri, line)):  # the recorded runs are read off the event loop
        assert loop.time() < end, said
        await asyncio.sleep(0.1)
    return said


async def test_a_workspace_limit_failure_is_fixed_by_its_quick_fix_and_the_hover_says_the_peak(
    client: LanguageClient, workspace: Path
) -> None:
    (workspace / "trtls.toml").write_text(RECIPE)
    uri = open_recipe(client, workspace)
    res = await execute(client, "trtls.buildEngine", {"uri": uri, "engine": "large"})
    assert res["status"] == "started"
    await until(lambda: _oom(client, uri) is not None)
    oom = _oom(client, uri)
    assert oom is not None and "workspace pool limit is too small" in oom.message
    assert oom.range.start.line == 4  # at workspace_mib
    actions = await client.text_document_code_action_async(
        lsp.CodeActionParams(lsp.TextDocumentIdentifier(uri), oom.range, lsp.CodeActionContext(diagnostics=[oom]))
    )
    fixes = [a for a in actions or [] if isinstance(a, lsp.CodeAction) and a.edit is not None]
    assert [a.title for a in fixes] == ["Remove the workspace limit (workspace_mib = 1): use the device's memory"]
    assert fixes[0].is_preferred and fixes[0].kind == lsp.CodeActionKind.QuickFix
    edits = [
        {"range": [e.range.start.line, e.range.start.character, e.range.end.line, e.range.end.character],
         "newText": e.new_text}
        for e in fixes[0].edit.changes[uri]
    ]  # fmt: skip
    fixed = apply_edits(RECIPE, edits)
    assert "workspace_mib" not in fixed and "[engines.large.builder]\nmemory_pool_limits = { }\n" in fixed

    # the editor applies it and saves; the next build succeeds
    (workspace / "trtls.toml").write_text(fixed)
    client.text_document_did_change(
        lsp.DidChangeTextDocumentParams(
            text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=2),
            content_changes=[lsp.TextDocumentContentChangeWholeDocument(text=fixed)],
        )
    )
    again = await execute(client, "trtls.buildEngine", {"uri": uri, "engine": "large"})
    assert again["status"] == "started"
    await until(lambda: (workspace / "build" / "large.engine").is_file() and _oom(client, uri) is None)

    # before a further build: the engine's hover says what the last build peaked at, with its settings' history
    said = await _hover_until(client, uri, 0, "last build peaked at")
    history = History(workspace / ".trtls" / "history.json")
    evidence = await execute(client, "trtls.showEvidence", {"buildId": again["buildId"]})
    summary = evidence["summary"]
    assert summary["outcome"] == "built"
    (peak,) = history.peaks(summary["buildConfigHash"])
    assert peak["buildId"] == again["buildId"] and peak["peakRssBytes"] == summary["resources"]["peakRssBytes"]
    assert "(worker RSS; built, " in said and said.startswith("**engine `large`**")
    failed = await execute(client, "trtls.showEvidence", {"buildId": res["buildId"]})
    (first,) = history.peaks(failed["summary"]["buildConfigHash"])  # the failed build's peak is kept too
    assert first["outcome"] == "failed" and first["buildId"] == res["buildId"]
