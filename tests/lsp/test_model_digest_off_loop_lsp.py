"""The `onnx` hover's freshness never hashes a big model on the event loop (issue 33): a real `trtls build` from the
CLI of a 100 MB model, then a real language server over stdio started afterwards.

Unchanged, the model is a stat and the digest cache's entry (the build's key hashed it there): "unchanged" at once,
no hashing at all. Edited after the build, it has no known digest: before, the hover hashed all 100 MB on the event
loop (and every request waited behind it); now it is hashed in a thread — held here by the test hook
`TRTLS_TEST_PAUSE=model_digest:<folder>`, which records the hashing thread's name — while the hover answers "being
checked", never the stale "unchanged"; once the hashing lands, the hover says "changed since this build"."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import onnx

from tests.lsp.lsp_helpers import TIMEOUT
from tests.lsp.test_failed_build_freshness_lsp import hover_at
from tests.lsp.test_recorded_answers_lsp import _build, _line, evidence_lenses
from tests.lsp.test_recorded_answers_lsp import server_started_after as server
from tests.store.helpers import summaries

BIG = 100 << 20  # bytes of doc string: the model is over 100 MB, hashed in about a tenth of a second or more
CHECKING = "Whether the model changed since this build is being checked"
UNCHANGED = "Model unchanged: it is the one that build read (same sha256)"
CHANGED = "not re-checked now: the model changed since this build"


def _big_model(path: Path, fill: str) -> None:
    """The quickstart model with a doc string of BIG bytes of `fill` (same size whatever the fill)."""
    model = onnx.load(str(path))
    model.doc_string = fill * BIG
    onnx.save(model, str(path))


async def test_the_hover_hashes_an_edited_big_model_off_the_event_loop(workspace: Path, tmp_path: Path) -> None:
    model = workspace / "models" / "demo.onnx"
    _big_model(model, "a")
    os.utime(model, (1_000_000_000, 1_000_000_000))  # long written: the build's key keeps its digest in the cache
    assert model.stat().st_size > BIG
    built = _build(workspace, "demo")
    assert built.returncode == 0, built.stderr
    [record] = summaries(workspace)
    text = (workspace / "trtls.toml").read_text()
    header, onnx_line = text.splitlines().index("[engines.demo]"), _line(text, "engines.demo", "onnx")
    hold = tmp_path / "hold"
    hold.mkdir()
    async with server(workspace, {"TRTLS_TEST_PAUSE": f"model_digest:{hold}"}) as (client, uri):
        await evidence_lenses(client, uri, {header: record["buildId"]})
        said = await hover_at(client, uri, onnx_line)
        assert UNCHANGED in said, said  # a stat and the digest cache's entry:
        assert not (hold / "model_digest.reading").exists(), "an unchanged model was hashed"

        _big_model(model, "b")  # edited after the build: the same size, another sha256
        said = await hover_at(client, uri, onnx_line)
        assert CHECKING in said and UNCHANGED not in said, said
        assert record["buildId"] in said and "What TensorRT said at the build of" in said, said
        loop = asyncio.get_running_loop()
        end = loop.time() + TIMEOUT
        while not (hold / "model_digest.reading").exists():  # the hashing runs, in its thread, and is held
            assert loop.time() < end, "the edited model was never hashed"
            await asyncio.sleep(0.05)
        assert (hold / "model_digest.reading").read_text() == str(model.resolve())
        thread = (hold / "model_digest.thread").read_text()
        assert thread and thread != "MainThread", thread  # the server's event loop runs on its main thread
        said = await hover_at(client, uri, onnx_line)  # answered while the hashing is still held
        assert CHECKING in said and UNCHANGED not in said, said

        (hold / "model_digest.go").touch()  # the hashing lands; a hover after it has the answer
        while CHECKING in said:
            assert UNCHANGED not in said, said
            assert loop.time() < end, "the hashing never landed"
            await asyncio.sleep(0.1)
            said = await hover_at(client, uri, onnx_line)
        assert CHANGED in said and UNCHANGED not in said, said
