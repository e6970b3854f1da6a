"""Capability when the ONNX file changes, over real LSP (stdio): the client watches the models (VS Code's client
registers lsp/watched_files.WATCHED_GLOBS, extension/src/client.ts), and a model rewritten in place — one TensorRT
takes replaced by one it refuses — re-checks every recipe whose engines read it, so the capability diagnostics
(lsp/capability_diagnostics.py) appear at that engine's `onnx` key without touching the recipe."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from lsprotocol import types as lsp
from pytest_lsp import LanguageClient

from tests.builds.test_capability import IRIS
from trtls.lsp.watched_files import WATCHED_GLOBS

from .lsp_helpers import open_recipe, until, write_static_onnx

EXTENSION = Path(__file__).resolve().parents[2] / "extension" / "src" / "client.ts"
# `m` (a model TensorRT takes) is asked before `iris` (one it refuses): iris's diagnostics say m's answer is in
RECIPE = (
    '[engines.m]\nonnx = "models/m.onnx"\noutput = "build/m.engine"\n\n'
    '[engines.iris]\nonnx = "iris.onnx"\noutput = "build/iris.engine"\n'
)
M_LINE, IRIS_LINE = 1, 5


def _lines(client: LanguageClient, uri: str) -> list[tuple[str, int]]:
    return sorted((str(d.code), d.range.start.line) for d in client.diagnostics.get(uri, []))


async def test_a_model_rewritten_in_place_is_asked_about_again(client: LanguageClient, tmp_path: Path) -> None:
    (tmp_path / "models").mkdir()
    model = write_static_onnx(tmp_path / "models" / "m.onnx")
    shutil.copyfile(IRIS, tmp_path / "iris.onnx")
    (tmp_path / "trtls.toml").write_text(RECIPE)
    uri = open_recipe(client, tmp_path)
    await until(lambda: [line for _, line in _lines(client, uri)] == [IRIS_LINE] * 3)  # ZipMap & co: TRT130
    assert all(code == "TRT130" for code, _ in _lines(client, uri))

    # the model is rewritten in place (same file, same inode): now one TensorRT's parser refuses
    with model.open("r+b") as f:
        f.truncate(0)
        f.write(IRIS.read_bytes())
    client.workspace_did_change_watched_files(
        lsp.DidChangeWatchedFilesParams([lsp.FileEvent(uri=model.as_uri(), type=lsp.FileChangeType.Changed)])
    )
    await until(lambda: [line for _, line in _lines(client, uri)] == [M_LINE] * 3 + [IRIS_LINE] * 3)
    zipmap = [d for d in client.diagnostics[uri] if d.range.start.line == M_LINE][2]
    assert "node 2 'ZipMap' (ZipMap)" in zipmap.message and "Plugin not found" in zipmap.message

    # and back: the supported model again, its diagnostics withdrawn
    write_static_onnx(model)
    client.workspace_did_change_watched_files(
        lsp.DidChangeWatchedFilesParams([lsp.FileEvent(uri=model.as_uri(), type=lsp.FileChangeType.Changed)])
    )
    await until(lambda: [line for _, line in _lines(client, uri)] == [IRIS_LINE] * 3)


def test_the_extension_watches_what_the_server_re_checks_for() -> None:
    text = EXTENSION.read_text()
    block = re.search(r"export const WATCHED_GLOBS = \[(.*?)\];", text, re.S)
    assert block is not None
    globs = re.findall(r"'([^']+)'", block.group(1))
    assert block.group(1).lstrip().startswith("RECIPE_GLOB,") and "export const RECIPE_GLOB = '**/trtls.toml';" in text
    assert ["**/trtls.toml", *globs] == list(WATCHED_GLOBS)
