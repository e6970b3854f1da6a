"""Recipe diagnostics while typing, code lens, hover, completion and quick fixes, over real LSP."""

from __future__ import annotations

import asyncio
from pathlib import Path

from lsprotocol import types as lsp
from pytest_lsp import LanguageClient

from tests.lsp.lsp_helpers import write_static_onnx

RECIPE = """\
[engines.demo]
onnx = "m.onnx"
output = "out/demo.engine"
timing_cache = { path = "out/demo.cache", mode = "read_write" }

[engines.demo.builder]
optimization_level = 3
"""


def open_doc(client: LanguageClient, path: Path, text: str) -> str:
    uri = path.as_uri()
    client.text_document_did_open(
        lsp.DidOpenTextDocumentParams(lsp.TextDocumentItem(uri=uri, language_id="toml", version=1, text=text))
    )
    return uri


async def wait_for(predicate, timeout: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not predicate():
        assert loop.time() < end, "condition not met in time"
        await asyncio.sleep(0.05)


async def test_diagnostics_while_typing_at_exact_ranges(client: LanguageClient, tmp_path: Path) -> None:
    write_static_onnx(tmp_path / "m.onnx")
    uri = open_doc(client, tmp_path / "trtls.toml", RECIPE)
    await wait_for(lambda: uri in client.diagnostics)
    assert list(client.diagnostics[uri]) == []
    bad = RECIPE.replace("optimization_level = 3", "optimisation_level = 3").replace(
        'mode = "read_write"', 'mode = "read_wrte"'
    )
    client.text_document_did_change(
        lsp.DidChangeTextDocumentParams(
            text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=2),
            content_changes=[lsp.TextDocumentContentChangeWholeDocument(text=bad)],
        )
    )
    await wait_for(lambda: len(client.diagnostics.get(uri, [])) == 2)
    by_code = {d.code: d for d in client.diagnostics[uri]}
    unknown = by_code["TRT101"]
    assert (unknown.range.start.line, unknown.range.start.character, unknown.range.end.character) == (6, 0, 18)
    assert unknown.source == "trtls" and unknown.code_description.href.endswith("#trt101")
    mode = by_code["TRT106"]
    assert (mode.range.start.line, mode.range.start.character) == (3, 49)

    actions = await client.text_document_code_action_async(
        lsp.CodeActionParams(
            lsp.TextDocumentIdentifier(uri), unknown.range, lsp.CodeActionContext(diagnostics=[unknown, mode])
        )
    )
    titles = [a.title for a in actions]
    assert "Rename to 'optimization_level'" in titles and 'Replace with "read_write"' in titles
    rename = next(a for a in actions if a.title.startswith("Rename"))
    edit = rename.edit.changes[uri][0]
    assert edit.new_text == "optimization_level" and edit.range == unknown.range


async def test_code_lens_hover_completion(client: LanguageClient, tmp_path: Path) -> None:
    write_static_onnx(tmp_path / "m.onnx")
    uri = open_doc(client, tmp_path / "trtls.toml", RECIPE + '\n[routes.r]\nengine = "demo"\n')
    lenses = await client.text_document_code_lens_async(lsp.CodeLensParams(lsp.TextDocumentIdentifier(uri)))
    titles = {(lens.range.start.line, lens.command.title) for lens in lenses}
    assert (0, "▶ Build Engine") in titles and (8, "▶ Run Gates") in titles
    build_lens = next(lens for lens in lenses if lens.command.title == "▶ Build Engine")
    assert build_lens.command.command == "trtls.buildEngine" and list(build_lens.command.arguments) == [
        {"uri": uri, "engine": "demo"}
    ]

    hover = await client.text_document_hover_async(lsp.HoverParams(lsp.TextDocumentIdentifier(uri), lsp.Position(6, 3)))
    assert "optimization_level" in hover.contents.value and "tactic" in hover.contents.value
    hover = await client.text_document_hover_async(
        lsp.HoverParams(lsp.TextDocumentIdentifier(uri), lsp.Position(3, 52))
    )
    assert "read_write" in hover.contents.value and "never write" in hover.contents.value

    items = await client.text_document_completion_async(
        lsp.CompletionParams(lsp.TextDocumentIdentifier(uri), lsp.Position(7, 0))
    )
    labels = {i.label for i in items.items}
    assert {"max_aux_streams", "tiling_level", "compute_capabilities"} <= labels and "optimization_level" not in labels


async def test_value_completion_offers_enum_values(client: LanguageClient, tmp_path: Path) -> None:
    write_static_onnx(tmp_path / "m.onnx")
    text = RECIPE + "tiling_level = "
    uri = open_doc(client, tmp_path / "trtls.toml", text)
    items = await client.text_document_completion_async(
        lsp.CompletionParams(lsp.TextDocumentIdentifier(uri), lsp.Position(7, 15))
    )
    assert {i.label for i in items.items} == {'"none"', '"fast"', '"moderate"', '"full"'}


async def test_bad_command_arguments_are_invalid_params(client: LanguageClient, tmp_path: Path) -> None:
    import pytest
    from pygls.exceptions import JsonRpcInvalidParams

    with pytest.raises(JsonRpcInvalidParams, match="expected one argument object"):
        await client.workspace_execute_command_async(
            lsp.ExecuteCommandParams(command="trtls.buildEngine", arguments=[{"uri": "x"}])
        )
    with pytest.raises(JsonRpcInvalidParams, match="not defined"):
        await client.workspace_execute_command_async(lsp.ExecuteCommandParams(command="trtls.nope", arguments=[]))
    with pytest.raises(JsonRpcInvalidParams, match="no build with id"):
        await client.workspace_execute_command_async(
            lsp.ExecuteCommandParams(command="trtls.cancelBuild", arguments=[{"buildId": "nope"}])
        )
