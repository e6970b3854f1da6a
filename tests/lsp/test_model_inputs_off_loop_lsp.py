"""The hover's declared inputs are read off the event loop (issue 33): a real language server over stdio, the
quickstart recipe open, its model's inputs read in a thread held by the test hook
`TRTLS_TEST_PAUSE=model_inputs:<folder>` (it records the reading thread's name). While that hover waits, the server
still answers other requests (code lenses, a completion); once the reading is let go, the hover shows the model's
declared inputs. Before, the model was opened and walked on the event loop, and every request waited behind it."""

from __future__ import annotations

import asyncio
from pathlib import Path

from lsprotocol import types as lsp

from tests.lsp.lsp_helpers import TIMEOUT
from tests.lsp.test_recorded_answers_lsp import _line
from tests.lsp.test_recorded_answers_lsp import server_started_after as server


async def _until(what: str, check) -> None:  # type: ignore[no-untyped-def]
    loop = asyncio.get_running_loop()
    end = loop.time() + TIMEOUT
    while not check():
        assert loop.time() < end, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)


async def test_the_hover_reads_the_models_inputs_in_a_thread_and_the_server_answers_meanwhile(
    workspace: Path, tmp_path: Path
) -> None:
    text = (workspace / "trtls.toml").read_text()
    onnx_line = _line(text, "engines.demo", "onnx")
    hold = tmp_path / "hold"
    hold.mkdir()
    async with server(workspace, {"TRTLS_TEST_PAUSE": f"model_inputs:{hold}"}) as (client, uri):
        doc = lsp.TextDocumentIdentifier(uri)
        hovering = asyncio.ensure_future(
            client.text_document_hover_async(lsp.HoverParams(doc, lsp.Position(onnx_line, 1)))
        )
        await _until("the hover's reading to start", (hold / "model_inputs.thread").exists)
        assert (hold / "model_inputs.thread").read_text() != "MainThread"
        assert not hovering.done()
        # held in its thread, the hover blocks nothing: lenses and a completion are answered meanwhile
        lenses = await asyncio.wait_for(client.text_document_code_lens_async(lsp.CodeLensParams(doc)), TIMEOUT)
        assert any(lens.command is not None and "Build" in lens.command.title for lens in lenses or [])
        items = await asyncio.wait_for(
            client.text_document_completion_async(lsp.CompletionParams(doc, lsp.Position(onnx_line + 1, 0))),
            TIMEOUT,
        )
        assert items is not None and items.items, "no key offered under [engines.demo]"
        assert not hovering.done(), "the hover answered while its reading was held"
        (hold / "model_inputs.go").touch()
        answer = await asyncio.wait_for(hovering, TIMEOUT)
    assert answer is not None and isinstance(answer.contents, lsp.MarkupContent)
    assert "demo.onnx" in answer.contents.value and "inputs:" in answer.contents.value, answer.contents.value
