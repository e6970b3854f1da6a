"""The language server drives a matrix on a real Ray cluster: one parent with a child per cell in trtls/buildTree,
Stop on a cell stops that cell, Stop on the parent stops every other cell, diagnostics aggregated per engine; a
label no node has is a located diagnostic and nothing is submitted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lsprotocol import types as lsp
from pytest_lsp import LanguageClient

from tests.farm.conftest import LABEL, engine_table, farm_recipe
from tests.lsp.conftest import client  # noqa: F401  (the real server over stdio)
from tests.lsp.lsp_helpers import execute, open_recipe, plain, until

MATRIX = """
[engines.large.matrix]
output = "build/large-{compute_capabilities}-{optimization_level}.engine"
compute_capabilities = ["SM89", "SM120"]
optimization_level = [2, 3]
"""


def latest(trees: list[dict[str, Any]], build_id: str) -> dict[str, Any] | None:
    return next((t for t in reversed(trees) if t.get("buildId") == build_id), None)


async def test_matrix_from_the_editor_stop_a_cell_then_the_parent(
    client: LanguageClient,  # noqa: F811
    ray_cluster,
    tmp_path: Path,
) -> None:
    trees: list[dict[str, Any]] = []
    client.feature("trtls/buildTree")(lambda params: trees.append(plain(params)))
    farm_recipe(
        tmp_path, ray_cluster.address, engine_table("large", "large", f'{{ "{LABEL}" = "{{compute_capabilities}}" }}')
    )
    (tmp_path / "trtls.toml").write_text((tmp_path / "trtls.toml").read_text() + MATRIX)
    uri = open_recipe(client, tmp_path)
    res = await execute(client, "trtls.buildMatrix", {"uri": uri, "engine": "large"})
    assert res["status"] == "started" and len(res["cells"]) == 4, res
    parent_id = res["buildId"]

    def running_cell_with_phases() -> dict[str, Any] | None:
        parent = latest(trees, parent_id)
        for row in (parent or {}).get("cells", []):
            cell = latest(trees, row["buildId"]) if row["buildId"] else None
            if cell and cell["status"] == "running" and cell["phases"] and cell["node"].get("nodeId"):
                return cell
        return None

    await until(lambda: running_cell_with_phases() is not None, timeout=300)
    first = running_cell_with_phases()
    # (pygls' test client turns notification objects into namedtuples: label keys like trtls/target get renamed)
    assert first["parentId"] == parent_id and first["node"]["hostname"] and first["cell"] in first["buildId"]
    parent = latest(trees, parent_id)
    assert parent["kind"] == "matrix" and len(parent["cells"]) == 4
    # two nodes of one CPU: two cells build, two wait for a node
    await until(lambda: any(r["status"] == "waiting for a node" for r in latest(trees, parent_id)["cells"]))

    stop_cell = await execute(client, "trtls.cancelBuild", {"buildId": first["buildId"], "source": "ide_stop"})
    assert stop_cell["accepted"] is True
    await until(lambda: (latest(trees, first["buildId"]) or {}).get("status") == "cancelled", timeout=300)
    assert latest(trees, parent_id)["status"] == "running"  # the other cells go on

    stop_all = await execute(client, "trtls.cancelBuild", {"buildId": parent_id, "source": "ide_stop"})
    assert stop_all["accepted"] is True
    await until(lambda: latest(trees, parent_id)["status"] not in ("running", "stopping"), timeout=300)
    final = latest(trees, parent_id)
    assert final["status"] == "cancelled", final
    assert {r["status"] for r in final["cells"]} <= {"cancelled", "not started"}
    assert all(r["cancelSource"] == "ide_stop" for r in final["cells"] if r["buildId"])
    assert not list((tmp_path / "build").glob("large-*.engine")) if (tmp_path / "build").exists() else True

    def engine_diagnostics() -> list[lsp.Diagnostic]:
        return [d for d in client.diagnostics.get(uri, []) if d.code == "TRT201"]

    await until(lambda: bool(engine_diagnostics()))
    (diag,) = engine_diagnostics()  # one per engine and code, naming the cells
    assert diag.message.startswith("cells ") and "cancelled by ide_stop" in diag.message
    # a running cell's tree went as deltas after its first notification (matrix_relay), the end as a whole tree
    cell_trees = [t for t in trees if t.get("parentId") == parent_id]
    assert any(t.get("phasesDelta") for t in cell_trees)
    assert not latest(trees, first["buildId"]).get("phasesDelta")
    listed = await execute(client, "trtls.listBuilds", {})
    assert any(b.get("kind") == "matrix" and b["buildId"] == parent_id for b in listed["builds"])


async def test_missing_label_is_a_located_diagnostic_and_nothing_runs(
    client: LanguageClient,  # noqa: F811
    ray_cluster,
    tmp_path: Path,
) -> None:
    path = farm_recipe(tmp_path, ray_cluster.address, engine_table("demo", "demo", f'{{ "{LABEL}" = "SM75" }}'))
    line = next(i for i, t in enumerate(path.read_text().splitlines()) if t.startswith("labels = "))
    uri = open_recipe(client, tmp_path)
    res = await execute(client, "trtls.buildEngine", {"uri": uri, "engine": "demo"})
    assert res["status"] == "refused" and "TRT230" in res["errors"][0]
    await until(lambda: any(d.code == "TRT230" for d in client.diagnostics.get(uri, [])))
    diag = next(d for d in client.diagnostics.get(uri, []) if d.code == "TRT230")
    assert diag.range.start.line == line and diag.range.start.character == 28  # the label's value
    assert "SM89" in diag.message and "SM120" in diag.message
    assert not (tmp_path / ".trtls" / "runs").exists()
