"""Capability as you type, over real LSP (stdio): TensorRT's parser and builder asked in a child after each check,
their answers published at the engine's `onnx` key (TRT130 per node the parser refuses, TRT131 when the builder
refuses the network, TRT133 when the trial build fails before its first timing), and withdrawn once the recipe names
a model TensorRT takes."""

from __future__ import annotations

import shutil
from pathlib import Path

from lsprotocol import types as lsp
from pytest_lsp import LanguageClient

from tests.builds.test_capability import IRIS, NMS_RECIPE, VAD_RECIPE
from tests.lsp.lsp_helpers import open_recipe, until
from tests.onnx_files.third_party import fetch_all


def _codes(client: LanguageClient, uri: str) -> list[tuple[str, int]]:
    return sorted((str(d.code), d.range.start.line) for d in client.diagnostics.get(uri, []))


async def test_unsupported_models_are_flagged_at_their_onnx_key_and_cleared_when_fixed(
    client: LanguageClient, tmp_path: Path, quickstart_models: Path
) -> None:
    shutil.copyfile(fetch_all()["silero_vad_if"], tmp_path / "vad.onnx")
    shutil.copyfile(IRIS, tmp_path / "iris.onnx")
    shutil.copyfile(quickstart_models / "demo.onnx", tmp_path / "demo.onnx")
    (tmp_path / "trtls.toml").write_text(VAD_RECIPE)
    uri = open_recipe(client, tmp_path)
    await until(lambda: _codes(client, uri) == [("TRT130", 9)] * 3 + [("TRT131", 1)])
    vad = next(d for d in client.diagnostics[uri] if d.code == "TRT131")
    assert "graphScope.cpp" in vad.message and vad.severity == lsp.DiagnosticSeverity.Error
    line = VAD_RECIPE.splitlines()[1]
    assert (vad.range.start.character, vad.range.end.character) == (line.index('"vad.onnx"'), len(line))
    zipmap = [d for d in client.diagnostics[uri] if d.code == "TRT130"][2]
    assert "node 2 'ZipMap' (ZipMap)" in zipmap.message and "Plugin not found" in zipmap.message
    assert not (tmp_path / "build").exists(), "flagged before any build"

    # the If engine now names the quickstart model (which builds) with its profile; iris is removed
    fixed = (
        '[engines.vad]\nonnx = "demo.onnx"\noutput = "build/vad.engine"\n\n[[engines.vad.profiles]]\n'
        'input = "input"\nmin = [1, 3, 32, 32]\nopt = [4, 3, 32, 32]\nmax = [8, 3, 32, 32]\n'
    )
    client.text_document_did_change(
        lsp.DidChangeTextDocumentParams(
            text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=2),
            content_changes=[lsp.TextDocumentContentChangeWholeDocument(text=fixed)],
        )
    )
    await until(lambda: _codes(client, uri) == [])


async def test_an_nms_model_both_queries_take_is_flagged_as_you_type_by_its_trial_build(
    client: LanguageClient, tmp_path: Path
) -> None:
    """osam's NonMaxSuppression model: the parser and `is_network_supported` take it, its build has no runner for the
    NMS layer; the trial build (stopped at its first tactic timing) says so at the `onnx` key before any build."""
    shutil.copyfile(fetch_all()["osam_nms"], tmp_path / "nms.onnx")
    (tmp_path / "trtls.toml").write_text(NMS_RECIPE)
    uri = open_recipe(client, tmp_path)
    await until(lambda: _codes(client, uri) == [("TRT133", 1)])
    (nms,) = client.diagnostics[uri]
    assert nms.severity == lsp.DiagnosticSeverity.Error
    assert "node_of_selected_indices_2 has no runners that implement it" in nms.message
    assert not (tmp_path / "build").exists() and not (tmp_path / ".trtls" / "runs").exists(), "no build ran"
