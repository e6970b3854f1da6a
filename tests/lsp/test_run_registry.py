"""One registry of runs behind every id-taking command (issue 18 §3), over the real server's stdio: a matrix's
timeline and evidence by its id, a failed matrix's progress end that says so, bounded retention, and a build whose
supervisor hits an internal error still ends."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest_lsp
from lsprotocol import types as lsp
from pytest_lsp import ClientServerConfig, LanguageClient

from .conftest import SERVER, accept_refresh, caps
from .lsp_helpers import execute, open_recipe, raw_progress_ends, until

FAILING = """
[engines.broken]
onnx = "models/demo.onnx"
output = "build/broken.engine"
worker = ["/bin/false"]                     # an external worker that dies at once

[[engines.broken.profiles]]
input = "input"
min = [1, 3, 32, 32]
opt = [1, 3, 32, 32]
max = [1, 3, 32, 32]

[engines.broken.matrix]
output = "build/broken-{optimization_level}.engine"
optimization_level = [0, 1]
"""

DEMO_MATRIX = """
[engines.demo.matrix]
output = "build/demo-{optimization_level}.engine"
optimization_level = [0, 1]
"""


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER))
async def keep_one(lsp_client: LanguageClient):
    """A server that keeps a single finished run (initializationOptions.keepFinishedRuns)."""
    accept_refresh(lsp_client)
    await lsp_client.initialize_session(
        lsp.InitializeParams(capabilities=caps(), initialization_options={"keepFinishedRuns": 1})
    )
    yield
    await lsp_client.shutdown_session()


def matrix_token(client: LanguageClient, title: str) -> str | None:
    for token, reports in client.progress_reports.items():
        if reports and isinstance(reports[0], lsp.WorkDoneProgressBegin) and reports[0].title == f"Building {title}":
            return str(token)
    return None


async def test_a_failed_matrix_ends_failed_and_its_page_opens(client: LanguageClient, workspace: Path) -> None:
    (workspace / "trtls.toml").write_text((workspace / "trtls.toml").read_text() + FAILING)
    ends = raw_progress_ends(client)
    uri = open_recipe(client, workspace)
    res = await execute(client, "trtls.buildMatrix", {"uri": uri, "engine": "broken"})
    assert res["status"] == "started", res
    await until(lambda: matrix_token(client, "broken matrix") in ends)
    end = ends[str(matrix_token(client, "broken matrix"))]
    assert end["outcomeKind"] == "failed" and end["outcome"] not in ("built", "cancelled"), end
    listed = {b["buildId"]: b for b in (await execute(client, "trtls.listBuilds", {}))["builds"]}
    assert listed[res["buildId"]]["kind"] == "matrix" and len(listed[res["buildId"]]["cells"]) == 2
    evidence = await execute(client, "trtls.showEvidence", {"buildId": res["buildId"]})
    assert evidence["summary"]["kind"] == "matrix"
    page = await execute(client, "trtls.buildReport", {"buildId": res["buildId"]})
    assert 'data-report="matrix"' in page["html"] and Path(page["path"]).read_text() == page["html"]
    assert page["html"].count("<tr><td>") == 2


async def test_show_build_timeline_on_a_matrix_draws_each_cell(client: LanguageClient, workspace: Path) -> None:
    (workspace / "trtls.toml").write_text((workspace / "trtls.toml").read_text() + DEMO_MATRIX)
    ends = raw_progress_ends(client)
    uri = open_recipe(client, workspace)
    res = await execute(client, "trtls.buildMatrix", {"uri": uri, "engine": "demo"})
    await until(lambda: matrix_token(client, "demo matrix") in ends, timeout=600)
    end = ends[str(matrix_token(client, "demo matrix"))]
    assert (end["outcome"], end["outcomeKind"]) == ("built", "ok"), end
    page = await execute(client, "trtls.buildReport", {"buildId": res["buildId"]})
    assert page["html"].count("data-cell=") == 2 and 'class="phase-bar"' in page["html"]
    # a cell is a build of its own: its timeline opens by its id too
    evidence = await execute(client, "trtls.showEvidence", {"buildId": res["buildId"]})
    cell_id = next(c["buildId"] for c in evidence["summary"]["cells"])
    cell_page = await execute(client, "trtls.buildReport", {"buildId": cell_id})
    assert 'data-report="build"' in cell_page["html"]


async def test_finished_runs_beyond_the_limit_are_forgotten_but_their_evidence_stays(
    keep_one: LanguageClient, workspace: Path
) -> None:
    client = keep_one
    text = (workspace / "trtls.toml").read_text()
    (workspace / "trtls.toml").write_text(text + FAILING.split("[engines.broken.matrix]")[0])
    ends = raw_progress_ends(client)
    uri = open_recipe(client, workspace)
    ids = []
    for _ in range(2):
        res = await execute(client, "trtls.buildEngine", {"uri": uri, "engine": "broken"})
        ids.append(res["buildId"])
        await until(lambda: len(ends) == len(ids))
    listed = [b["buildId"] for b in (await execute(client, "trtls.listBuilds", {}))["builds"]]
    assert listed == [ids[1]]
    try:
        await execute(client, "trtls.showEvidence", {"buildId": ids[0]})
        raise AssertionError("an evicted run still answered")
    except Exception as exc:  # JsonRpcException from the client
        assert "unknown" in str(exc)
    assert (workspace / ".trtls" / "runs" / ids[0] / "summary.json").is_file(), "evidence stays on disk"
    assert (await execute(client, "trtls.showEvidence", {"buildId": ids[1]}))["summary"]["buildId"] == ids[1]


async def test_a_supervisor_error_still_ends_the_build(client: LanguageClient, workspace: Path) -> None:
    """The supervisor's internal-error guard: the evidence folder cannot be made (`.trtls/runs` is a file), yet the
    build ends `failed`, its progress ends, and the server goes on answering."""
    (workspace / ".trtls").mkdir()
    (workspace / ".trtls" / "runs").write_text("not a folder")
    ends = raw_progress_ends(client)
    uri = open_recipe(client, workspace)
    res = await execute(client, "trtls.buildEngine", {"uri": uri, "engine": "demo"})
    assert res["status"] == "started", res
    await until(lambda: len(ends) == 1)
    (end,) = ends.values()
    assert (end["outcome"], end["outcomeKind"]) == ("failed", "failed"), end
    (row,) = [b for b in (await execute(client, "trtls.listBuilds", {}))["builds"] if b["buildId"] == res["buildId"]]
    assert row["status"] == "failed"
    shutil.rmtree(workspace / ".trtls")
    targets = await execute(client, "trtls.listTargets", {"uri": uri})
    assert "demo" in targets["engines"]
