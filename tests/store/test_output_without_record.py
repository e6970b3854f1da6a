"""An engine at `output` that no build of the table recorded (built elsewhere, copied in, left by an older trtls)
is flagged as `make` would: TRT337 on `output`, in the function every face renders and in the editor's
diagnostics over real LSP. Nothing at `output` and no record: never built, no finding."""

from __future__ import annotations

import shutil
from pathlib import Path

from lsprotocol import types as lsp
from pytest_lsp import LanguageClient

from tests.builds.helpers import loaded
from tests.lsp.lsp_helpers import until
from tests.store.helpers import entries
from tests.store.test_editor import client, lens_titles  # noqa: F401 (the LSP client fixture)
from trtls.builds.avoidance.freshness import engine_freshness, freshness_findings


def _engine_from_elsewhere(seeded: tuple[Path, dict], ws: Path) -> Path:
    """A real engine (the seed's, built in another workspace) copied to `ws`'s demo output."""
    out = ws / "build" / "demo.engine"
    out.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(entries(seeded[0])[0] / "engine", out)
    return out


def test_engine_at_output_with_no_record_is_flagged(seeded: tuple[Path, dict], seed_ws: Path) -> None:
    rec = loaded(seed_ws)
    assert engine_freshness(rec, "demo").state == "never_built" and freshness_findings(rec) == []
    _engine_from_elsewhere(seeded, seed_ws)
    fresh = engine_freshness(rec, "demo")
    assert fresh.state == "output_differs" and fresh.last is None
    assert fresh.lens_title == "▶ Build Engine · no build recorded for the engine at output"
    (finding,) = freshness_findings(rec)
    assert finding.code == "TRT337" and finding.path == ("engines", "demo", "output")
    assert "no build of this engine table is recorded" in finding.message
    assert engine_freshness(rec, "large").state == "never_built"  # nothing at its output: nothing to flag


async def test_editor_flags_an_engine_at_output_with_no_record(
    client: LanguageClient,  # noqa: F811
    seeded: tuple[Path, dict],
    seed_ws: Path,
) -> None:
    _engine_from_elsewhere(seeded, seed_ws)
    recipe = seed_ws / "trtls.toml"
    uri = recipe.as_uri()
    client.text_document_did_open(
        lsp.DidOpenTextDocumentParams(
            lsp.TextDocumentItem(uri=uri, language_id="toml", version=1, text=recipe.read_text())
        )
    )
    await until(lambda: any(d.code == "TRT337" for d in client.diagnostics.get(uri, [])))
    (flag,) = [d for d in client.diagnostics[uri] if d.code == "TRT337"]
    lines = recipe.read_text().splitlines()
    line = next(i for i, t in enumerate(lines) if t.startswith('output = "build/demo.engine"'))
    assert flag.range.start.line == line and "no build of this engine table is recorded" in flag.message
    assert (await lens_titles(client, uri))[0] == "▶ Build Engine · no build recorded for the engine at output"
