"""The `onnx` hover after a FAILED build, and the recorded runs read off the event loop (issue 33), over a real
language server on stdio started after real `trtls build` runs from the CLI.

A failed build's record names the model it read (`modelSha256`), so its hover says "model unchanged", then "changed
since this build" once the model is edited, and "not known" for a record of an older trtls (no such field). And a
recipe with 51 recorded runs: while the reading of them is held in its thread (the test hook
`TRTLS_TEST_PAUSE=recorded_runs:<folder>`), a hover, a completion and a lens sent right after didOpen are answered —
from no reading yet — and once it is released the lenses and the hover show the newest run."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import onnx
from lsprotocol import types as lsp
from pytest_lsp import LanguageClient

from tests.lsp.lsp_helpers import TIMEOUT
from tests.lsp.test_recorded_answers_lsp import UNKNOWN_ENGINE, _build, _line, _unknown_op_model, evidence_lenses
from tests.lsp.test_recorded_answers_lsp import server_started_after as server
from tests.store.helpers import summaries

COPIES = 50


async def hover_at(client: LanguageClient, uri: str, line: int) -> str:
    answer = await client.text_document_hover_async(
        lsp.HoverParams(lsp.TextDocumentIdentifier(uri), lsp.Position(line, 1))
    )
    assert answer is not None and isinstance(answer.contents, lsp.MarkupContent)
    return answer.contents.value


async def test_the_hover_after_a_failed_build_says_whether_the_model_changed_since(workspace: Path) -> None:
    model = workspace / "models" / "unknown.onnx"
    _unknown_op_model(model)
    recipe = workspace / "trtls.toml"
    recipe.write_text(recipe.read_text() + UNKNOWN_ENGINE)
    assert _build(workspace, "unknown").returncode != 0  # TensorRT-RTX's parser refuses the op
    [record] = summaries(workspace)
    assert record["outcome"] == "failed" and record["modelSha256"]
    text = recipe.read_text()
    onnx_line = _line(text, "engines.unknown", "onnx")
    async with server(workspace) as (client, uri):
        await evidence_lenses(client, uri, {text.splitlines().index("[engines.unknown]"): record["buildId"]})
        said = await hover_at(client, uri, onnx_line)
        assert "the parser refuses 1 node" in said and record["buildId"] in said
        assert "Model unchanged: it is the one that build read (same sha256)" in said, said

        edited = onnx.load(str(model))
        edited.doc_string = "edited after the failed build"
        onnx.save(edited, str(model))
        said = await hover_at(client, uri, onnx_line)
        assert "not re-checked now: the model changed since this build" in said, said
        assert "the parser refuses 1 node" in said, "the record's answer is still said, as a record"

        # a record an older trtls wrote names no model: nothing is claimed either way
        path = workspace / ".trtls" / "runs" / record["buildId"] / "summary.json"
        older = {k: v for k, v in json.loads(path.read_text()).items() if k not in ("modelPath", "modelSha256")}
        path.write_text(json.dumps(older))
        said = await hover_at(client, uri, onnx_line)
        assert "Whether the model changed since this build is not known: its record names no model sha256" in said
        assert "Model unchanged" not in said and "changed since this build (" not in said


def _copies(run: Path, count: int) -> str:
    """`count` more run folders of the engine beside `run`, each a copy of its real record, started later; the id of
    the newest."""
    record = json.loads((run / "summary.json").read_text())
    newest = ""
    for i in range(count):
        newest = f"demo-20991231-{i:06d}-{i:06x}"
        shutil.copytree(run, run.parent / newest)
        copy = {**record, "buildId": newest, "startedAt": record["startedAt"] + 60 + i}
        (run.parent / newest / "summary.json").write_text(json.dumps(copy))
    return newest


async def test_requests_after_did_open_are_answered_while_the_recorded_runs_are_read(
    workspace: Path, tmp_path: Path
) -> None:
    built = _build(workspace, "demo")
    assert built.returncode == 0, built.stderr
    [record] = summaries(workspace)
    newest = _copies(workspace / ".trtls" / "runs" / record["buildId"], COPIES)
    text = (workspace / "trtls.toml").read_text()
    header, onnx_line = text.splitlines().index("[engines.demo]"), _line(text, "engines.demo", "onnx")
    hold = tmp_path / "hold"
    hold.mkdir()
    async with server(workspace, {"TRTLS_TEST_PAUSE": f"recorded_runs:{hold}"}) as (client, uri):
        said = await hover_at(client, uri, onnx_line)  # right after didOpen: it starts the reading, held
        completed = await client.text_document_completion_async(
            lsp.CompletionParams(lsp.TextDocumentIdentifier(uri), lsp.Position(header + 1, 0))
        )
        lenses = await client.text_document_code_lens_async(lsp.CodeLensParams(lsp.TextDocumentIdentifier(uri)))
        # all answered before the reading could land (it waits for `go`): none of them waited for the records
        assert "What TensorRT said" not in said and "onnx" in said, said
        assert completed is not None and completed.items
        titles = [lens.command.title for lens in lenses or [] if lens.command and lens.range.start.line == header]
        assert titles and "Evidence" not in titles, titles
        loop = asyncio.get_running_loop()
        end = loop.time() + TIMEOUT
        while not (hold / "recorded_runs.reading").exists():  # the reading runs, in its thread, and is held
            assert loop.time() < end, "the recorded runs were never read"
            await asyncio.sleep(0.05)
        assert (hold / "recorded_runs.reading").read_text() == str(workspace / "trtls.toml")

        (hold / "recorded_runs.go").touch()  # the reading lands; the server asks for the lenses again
        await evidence_lenses(client, uri, {header: newest})
        said = await hover_at(client, uri, onnx_line)
        assert "What TensorRT said at the build of" in said and newest in said, said
