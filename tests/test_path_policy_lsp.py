"""The path policy in the editor (issue 22): the real language server over stdio shows a refused write as a located
diagnostic on the key that names it, and pressing Build refuses before any worker starts; a 400-deep recipe is a
located TRT120, and the server still answers afterwards."""

from __future__ import annotations

from pathlib import Path

from lsprotocol import types as lsp
from pytest_lsp import LanguageClient

from tests.lsp.conftest import client  # noqa: F401  (the fixture: the real server over stdio)
from tests.lsp.lsp_helpers import write_static_onnx
from tests.lsp.test_editor_features import open_doc, wait_for

RECIPE = """\
[engines.demo]
onnx = "m.onnx"
output = "trtls.toml"
"""


async def test_a_refused_write_is_a_diagnostic_on_its_key_and_build_refuses(client: LanguageClient, tmp_path: Path):  # noqa: F811
    write_static_onnx(tmp_path / "m.onnx")
    (tmp_path / "trtls.toml").write_text(RECIPE)
    uri = open_doc(client, tmp_path / "trtls.toml", RECIPE)
    await wait_for(lambda: bool(client.diagnostics.get(uri)))
    (diag,) = [d for d in client.diagnostics[uri] if d.code == "TRT109"]
    assert (diag.range.start.line, diag.range.start.character) == (2, 9)  # the value of `output`
    assert "recipe" in diag.message and diag.severity == lsp.DiagnosticSeverity.Error
    before = (tmp_path / "trtls.toml").read_bytes()
    try:  # the Build lens is always offered; pressing it must refuse, before any worker starts
        reply = await client.workspace_execute_command_async(
            lsp.ExecuteCommandParams("trtls.buildEngine", [{"uri": uri, "engine": "demo"}])
        )
    except Exception as exc:  # an invalid-params / refused reply
        reply = str(exc)
    assert "TRT109" in str(reply), reply
    assert (tmp_path / "trtls.toml").read_bytes() == before and not (tmp_path / ".trtls" / "runs").exists()


async def test_deep_nesting_is_located_and_the_server_keeps_answering(client: LanguageClient, tmp_path: Path):  # noqa: F811
    write_static_onnx(tmp_path / "m.onnx")
    deep = RECIPE.replace('"trtls.toml"', '"out/demo.engine"') + "x = " + "{a = " * 400 + "1" + "}" * 400 + "\n"
    uri = open_doc(client, tmp_path / "trtls.toml", deep)
    await wait_for(lambda: bool(client.diagnostics.get(uri)))
    (diag,) = client.diagnostics[uri]
    assert diag.code == "TRT120" and diag.range.start.line == 3
    hover = await client.text_document_hover_async(
        lsp.HoverParams(lsp.TextDocumentIdentifier(uri), lsp.Position(line=1, character=2))
    )
    assert hover is None or hover.contents is not None  # an answer, not an error
