"""The model-aware editor over real LSP (stdio): diagnostics against the ONNX model's inputs as you type, the
quick fix that inserts a missing input, hover with the declared shape, completion of input names."""

from __future__ import annotations

import shutil
from pathlib import Path

from lsprotocol import types as lsp
from pytest_lsp import LanguageClient

from tests.lsp.test_editor_features import open_doc, wait_for

RECIPE = """\
[engines.enc]
onnx = "models/encoder.onnx"
output = "build/enc.engine"

[[engines.enc.profiles]]
inputs.input_ids = { min = [1, 1], opt = [2, 64], max = [4, 128] }
inputs.attention_mask = { min = [1, 1], opt = [2, 64], max = [4, 128] }
"""


def _ws(tmp_path: Path, sample_models: Path) -> Path:
    shutil.copytree(sample_models, tmp_path / "models")
    return tmp_path


def _change(client: LanguageClient, uri: str, version: int, text: str) -> None:
    client.text_document_did_change(
        lsp.DidChangeTextDocumentParams(
            text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[lsp.TextDocumentContentChangeWholeDocument(text=text)],
        )
    )


def _apply(text: str, edits: list[lsp.TextEdit]) -> str:
    lines = text.splitlines(keepends=True)
    for e in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True):
        start = sum(len(x) for x in lines[: e.range.start.line]) + e.range.start.character
        end = sum(len(x) for x in lines[: e.range.end.line]) + e.range.end.character
        text = text[:start] + e.new_text + text[end:]
        lines = text.splitlines(keepends=True)
    return text


async def test_missing_input_as_you_type_and_its_quick_fix(
    client: LanguageClient, tmp_path: Path, sample_models: Path
) -> None:
    ws = _ws(tmp_path, sample_models)
    uri = open_doc(client, ws / "trtls.toml", RECIPE)
    await wait_for(lambda: uri in client.diagnostics)
    assert list(client.diagnostics[uri]) == []
    typed = RECIPE.replace("inputs.attention_mask = { min = [1, 1], opt = [2, 64], max = [4, 128] }\n", "")
    _change(client, uri, 2, typed)
    await wait_for(lambda: [d.code for d in client.diagnostics.get(uri, [])] == ["TRT113"])
    (diag,) = client.diagnostics[uri]
    assert (diag.range.start.line, diag.range.start.character) == (4, 0)
    assert "attention_mask" in diag.message and diag.code_description.href.endswith("#trt113")

    actions = await client.text_document_code_action_async(
        lsp.CodeActionParams(lsp.TextDocumentIdentifier(uri), diag.range, lsp.CodeActionContext(diagnostics=[diag]))
    )
    (fix,) = [a for a in actions if a.title.startswith("Add 'attention_mask'")]
    fixed = _apply(typed, fix.edit.changes[uri])
    assert "inputs.attention_mask = { min = [1, 1], opt = [2, 64], max = [4, 128] }" in fixed
    _change(client, uri, 3, fixed)
    await wait_for(lambda: list(client.diagnostics.get(uri, [])) == [])

    misspelt = fixed.replace("inputs.attention_mask", "inputs.attention_mas")
    _change(client, uri, 4, misspelt)
    await wait_for(lambda: "TRT112" in [d.code for d in client.diagnostics.get(uri, [])])
    unknown = next(d for d in client.diagnostics[uri] if d.code == "TRT112")
    assert (unknown.range.start.line, unknown.range.start.character) == (6, 0)
    actions = await client.text_document_code_action_async(
        lsp.CodeActionParams(
            lsp.TextDocumentIdentifier(uri), unknown.range, lsp.CodeActionContext(diagnostics=[unknown])
        )
    )
    rename = next(a for a in actions if a.title == "Rename to 'attention_mask'")
    assert _apply(misspelt, rename.edit.changes[uri]) == fixed


async def test_hover_shows_the_declared_shape_and_dtype(
    client: LanguageClient, tmp_path: Path, sample_models: Path
) -> None:
    ws = _ws(tmp_path, sample_models)
    uri = open_doc(client, ws / "trtls.toml", RECIPE)
    hover = await client.text_document_hover_async(
        lsp.HoverParams(lsp.TextDocumentIdentifier(uri), lsp.Position(5, 10))
    )
    assert "**input_ids**" in hover.contents.value and "`int64` `[batch, seq]`" in hover.contents.value
    hover = await client.text_document_hover_async(
        lsp.HoverParams(lsp.TextDocumentIdentifier(uri), lsp.Position(1, 12))
    )
    assert "encoder.onnx" in hover.contents.value and "`attention_mask` · `int64`" in hover.contents.value


async def test_completion_offers_the_model_input_names(
    client: LanguageClient, tmp_path: Path, sample_models: Path
) -> None:
    ws = _ws(tmp_path, sample_models)
    half = RECIPE.replace("inputs.attention_mask = { min = [1, 1], opt = [2, 64], max = [4, 128] }\n", "inputs.")
    uri = open_doc(client, ws / "trtls.toml", half)
    items = await client.text_document_completion_async(
        lsp.CompletionParams(lsp.TextDocumentIdentifier(uri), lsp.Position(6, 7))
    )
    assert [i.label for i in items.items] == ["attention_mask"], "input_ids is already in this profile"
    assert items.items[0].insert_text.startswith("attention_mask = { min = [1, 1]")
    assert items.items[0].detail == "int64 [batch, seq]"

    shorthand = RECIPE.split("[[")[0] + '[[engines.enc.profiles]]\ninput = "'
    _change(client, uri, 2, shorthand)
    items = await client.text_document_completion_async(
        lsp.CompletionParams(lsp.TextDocumentIdentifier(uri), lsp.Position(5, 9))
    )
    assert {i.label for i in items.items} == {'"input_ids"', '"attention_mask"'}


async def test_fast_typing_ends_with_the_last_text_diagnosed(
    client: LanguageClient, tmp_path: Path, sample_models: Path
) -> None:
    """Checks are throttled while typing fast; the trailing check must diagnose the final text."""
    import asyncio

    ws = _ws(tmp_path, sample_models)
    uri = open_doc(client, ws / "trtls.toml", RECIPE)
    await wait_for(lambda: uri in client.diagnostics)
    broken = RECIPE.replace("inputs.attention_mask", "inputs.attention_mas")
    for version in range(2, 12):
        _change(client, uri, version, broken if version % 2 == 0 else RECIPE)
        await asyncio.sleep(0.01)
    _change(client, uri, 12, broken)  # the last keystroke breaks the recipe
    await wait_for(lambda: "TRT112" in [d.code for d in client.diagnostics.get(uri, [])])
    await asyncio.sleep(0.5)  # nothing later may replace it with an older text's (empty) diagnostics
    assert "TRT112" in [d.code for d in client.diagnostics[uri]]
