"""A build's row turns from running to its outcome before its evidence is written (the outcome is set first; the
engine's sha is verified and summary.json written after, on a thread: builds/supervisor/build_end.py). A client that
saw the row end and asks for the evidence at once used to get "over, with no evidence written" (a full suite under a
CPU burner, 2026-12-05: tests/lsp/test_triage_lsp.py). Now `trtls.showEvidence` and `trtls.buildReport` wait for it.

A real server over stdio and a real `demo` build, held by the test hook `TRTLS_TEST_PAUSE=evidence:<folder>` in that
moment (the outcome set, the evidence not written): the row lists the build as over, the evidence request stays
unanswered while other requests are answered, and once the hold is released it answers with the written record."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.lsp.lsp_helpers import TIMEOUT, execute
from tests.lsp.test_recorded_answers_lsp import server_started_after as server


async def test_evidence_asked_as_the_row_ends_waits_for_the_record(workspace: Path, tmp_path: Path) -> None:
    hold = tmp_path / "hold"
    hold.mkdir()
    async with server(workspace, {"TRTLS_TEST_PAUSE": f"evidence:{hold}", "TRTLS_STORE": "off"}) as (client, uri):
        started = await execute(client, "trtls.buildEngine", {"uri": uri, "engine": "demo"})
        assert started["status"] == "started", started
        build_id = started["buildId"]
        loop = asyncio.get_running_loop()
        end = loop.time() + TIMEOUT
        while not (hold / f"{build_id}.evidence").exists():  # the build is over; its evidence is held
            assert loop.time() < end, "the build never reached its evidence"
            await asyncio.sleep(0.05)
        rows = (await execute(client, "trtls.listBuilds", {}))["builds"]
        (row,) = [r for r in rows if r["buildId"] == build_id]
        assert row["status"] == "built", row  # the row says it ended

        asked = asyncio.ensure_future(execute(client, "trtls.showEvidence", {"buildId": build_id}))
        report = asyncio.ensure_future(execute(client, "trtls.buildReport", {"buildId": build_id}))
        await execute(client, "trtls.listBuilds", {})  # a later request is answered meanwhile
        assert not asked.done() and not report.done(), "answered before the evidence was written"

        (hold / f"{build_id}.go").touch()
        shown = await asyncio.wait_for(asked, TIMEOUT)
        assert shown["summary"]["outcome"] == "built" and shown["summary"]["buildId"] == build_id
        assert Path(shown["path"]).is_file()
        page = await asyncio.wait_for(report, TIMEOUT)
        assert build_id in page["html"]
