"""The engine store in the editor, over the real server on stdio: a build the store served (`reused`) is a finished run
like any other — one final `trtls/buildTree` row (finished, with its evidence), listed by trtls.listBuilds, opened by
trtls.showEvidence and trtls.buildReport — and the editor's Build Matrix looks every cell up before anything starts:
a matrix built twice unchanged starts no worker the second time (docs/store.md)."""

from __future__ import annotations

import atexit
import json
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest_lsp
from lsprotocol import types as lsp
from pytest_lsp import ClientServerConfig, LanguageClient

from tests.lsp.conftest import SERVER, accept_refresh, caps
from tests.lsp.lsp_helpers import execute, finished, last_of, open_recipe, record_trees, until
from tests.store.helpers import probe_env, probes, with_store
from tests.ts_replay import EXTENSION, replay
from trtls.core import wire

PROBE = Path(tempfile.mkdtemp(prefix="trtls-store-lsp-probe-"))  # every worker the server starts leaves a file here
atexit.register(shutil.rmtree, PROBE, True)  # made at import (collection too): gone with the process

DEMO_MATRIX = """
[engines.demo.matrix]
output = "build/demo-{optimization_level}.engine"
optimization_level = [0, 1]
"""


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER, server_env=probe_env(PROBE)))
async def client(lsp_client: LanguageClient):
    accept_refresh(lsp_client)
    await lsp_client.initialize_session(
        lsp.InitializeParams(capabilities=caps(), initialization_options={"buildTree": True})
    )
    yield
    await lsp_client.shutdown_session()


def ts_view(notifications: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each top-level row's view as the real BuildTreeModel (extension/src/buildTree.ts, compiled) makes it: icon,
    context value, status — what replay.ts's rows leave out."""
    replay([])  # compiles the extension once (tests/ts_replay.py)
    script = (
        "const {BuildTreeModel} = require(process.argv[1]);"
        "const m = new BuildTreeModel();"
        "for (const n of JSON.parse(require('fs').readFileSync(process.argv[2], 'utf8'))) m.update(n);"
        "process.stdout.write(JSON.stringify(m.all().map((b) => ({status: b.status, outcomeMessage: b.outcomeMessage,"
        " evidencePath: b.evidencePath, ...m.view({kind: 'build', buildId: b.buildId})}))));"
    )
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
        json.dump(notifications, fh)
    try:
        node = shutil.which("node")
        assert node
        out = subprocess.run(
            [node, "-e", script, str(EXTENSION / "out" / "src" / "buildTree.js"), fh.name],
            check=True, capture_output=True, text=True,
        )  # fmt: skip
    finally:
        Path(fh.name).unlink()
    return list(json.loads(out.stdout))


async def test_a_reused_build_is_a_finished_row_with_evidence(
    client: LanguageClient, workspace: Path, tmp_path: Path
) -> None:
    with_store(workspace, tmp_path / "store")
    trees = record_trees(client)
    uri = open_recipe(client, workspace)
    first = await execute(client, "trtls.buildEngine", {"uri": uri, "engine": "demo"})
    assert first["status"] == "started", first
    await until(lambda: finished(trees, first["buildId"]), timeout=600)
    assert last_of(trees, first["buildId"])["outcome"] == "built"  # type: ignore[index]
    await until(lambda: any((tmp_path / "store" / "entries").glob("*/engine")))  # published after the end

    again = await execute(client, "trtls.buildEngine", {"uri": uri, "engine": "demo"})
    assert again["status"] == "reused", again
    assert again["message"].startswith(f"up to date — engine from build {first['buildId']}")
    rid = again["buildId"]
    await until(lambda: last_of(trees, rid) is not None)  # sent before the reply; read here to be sure
    tree = last_of(trees, rid)
    assert tree is not None
    wire.BuildTree.model_validate(tree)  # what the protocol declares
    assert tree["running"] is False and tree["outcome"] == "reused" and tree["outcomeKind"] == "ok", tree
    assert tree["outcomeMessage"] == again["message"] and tree["phases"] == []
    assert tree["evidencePath"] == again["evidencePath"] and Path(tree["evidencePath"]).is_file()
    assert tree["description"].startswith("reused · ")

    listed = {b["buildId"]: b for b in (await execute(client, "trtls.listBuilds", {}))["builds"]}
    assert listed[rid]["status"] == "reused" and listed[rid]["evidencePath"] == again["evidencePath"]
    wire.ListBuildsReply.model_validate({"builds": list(listed.values())})
    evidence = await execute(client, "trtls.showEvidence", {"buildId": rid})
    assert evidence["summary"]["outcome"] == "reused" and evidence["summary"]["workerPid"] is None
    page = await execute(client, "trtls.buildReport", {"buildId": rid})
    assert Path(page["path"]).is_file() and page["html"]
    cancel = await execute(client, "trtls.cancelBuild", {"buildId": rid})
    assert cancel["accepted"] is False

    # the VS Code tree: the reply's row is drawn finished (ok icon, Show Evidence), never a spinning one
    ours = [t for t in trees if t["buildId"] in (first["buildId"], rid)]
    rows = {r["label"] + r["description"]: r for r in ts_view(ours)}
    (reused,) = [r for r in rows.values() if r["status"] == "reused"]
    assert reused["icon"] == "ok" and reused["contextValue"] == "trtls.build.finished" and reused["openEvidence"]
    assert reused["description"] == tree["description"] and reused["outcomeMessage"] == again["message"]
    tree_rows = replay(ours)["tree"]
    assert [r["description"] for r in tree_rows if r["id"] == rid] == [tree["description"]]


async def test_build_matrix_looks_cells_up_in_the_store(
    client: LanguageClient, workspace: Path, tmp_path: Path
) -> None:
    recipe = workspace / "trtls.toml"
    recipe.write_text(recipe.read_text() + DEMO_MATRIX)
    with_store(workspace, tmp_path / "store")
    trees = record_trees(client)
    uri = open_recipe(client, workspace)
    first = await execute(client, "trtls.buildMatrix", {"uri": uri, "engine": "demo"})
    assert first["status"] == "started" and len(first["cells"]) == 2 and first["reused"] == [], first
    await until(lambda: finished(trees, first["buildId"]), timeout=900)
    assert last_of(trees, first["buildId"])["outcome"] == "built"  # type: ignore[index]
    await until(lambda: len(list((tmp_path / "store" / "entries").glob("*/engine"))) == 2)
    workers = probes(PROBE, "worker")
    assert workers, "the first matrix ran its cells in workers"

    again = await execute(client, "trtls.buildMatrix", {"uri": uri, "engine": "demo"})
    wire.BuildMatrixReply.model_validate(again)
    assert again["status"] == "reused" and again["buildId"] is None and again["cells"] == [], again
    assert len(again["reused"]) == 2 and all(c["cell"].startswith("demo/") for c in again["reused"]), again
    assert probes(PROBE, "worker") == workers, "no worker started for cells the store holds"
    listed = {b["buildId"]: b for b in (await execute(client, "trtls.listBuilds", {}))["builds"]}
    for c in again["reused"]:
        assert c["message"].startswith("up to date — engine from build ")
        assert listed[c["buildId"]]["status"] == "reused" and listed[c["buildId"]]["cell"]
        tree = last_of(trees, c["buildId"])
        assert tree is not None and tree["running"] is False and tree["evidencePath"] == c["evidencePath"]
        summary = (await execute(client, "trtls.showEvidence", {"buildId": c["buildId"]}))["summary"]
        assert summary["workerPid"] is None and summary["outcome"] == "reused"
    assert not any(b.get("kind") == "matrix" and b["buildId"] != first["buildId"] for b in listed.values())
