"""The editor's build tree for a cell its farm node served from the remote store (docs/store.md, "A farm node and
the remote store"): the language server runs a one-cell matrix on the real test cluster with a real nginx, the
cell's key is published to the remote while the cell waits for its node (held by the test), and the cell's row says
`reused` with a reuse's words — never `built`, never a rebuild."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any

from pytest_lsp import LanguageClient

from tests.farm.test_farm_lsp import latest
from tests.farm.test_farm_remote_store import _workspace, built_elsewhere, hold_sm89
from tests.lsp.conftest import client  # noqa: F401  (the real server over stdio)
from tests.lsp.lsp_helpers import execute, open_recipe, plain, until
from tests.store.nginx_dav import DavServer, nginx_dav  # noqa: F401  (a fixture: a real nginx WebDAV server)


async def test_the_tree_row_of_a_cell_its_node_served_from_the_remote_says_reused(
    client: LanguageClient,  # noqa: F811
    ray_cluster,
    nginx_dav: DavServer,  # noqa: F811
    tmp_path: Path,
) -> None:
    import ray

    trees: list[dict[str, Any]] = []
    client.feature("trtls/buildTree")(lambda params: trees.append(plain(params)))
    elsewhere = await asyncio.to_thread(built_elsewhere, ray_cluster.address, nginx_dav, tmp_path)
    held = await asyncio.to_thread(hold_sm89)
    ws = tmp_path / "ws2"
    _workspace(ws, tmp_path / "store2", ray_cluster.address, nginx_dav.url, tmp_path / "probe2")
    shutil.copytree(elsewhere.models, ws / "models", dirs_exist_ok=True)
    uri = open_recipe(client, ws)
    try:
        res = await execute(client, "trtls.buildMatrix", {"uri": uri, "engine": "demo"})
        assert res["status"] == "started" and len(res["cells"]) == 1, res
        parent_id = res["buildId"]

        def waiting() -> bool:
            return any(r["status"] == "waiting for a node" for r in (latest(trees, parent_id) or {}).get("cells", []))

        await until(waiting, timeout=300)  # looked up here (a miss), submitted, waiting for the held node
        elsewhere.publish(nginx_dav)
    finally:
        await asyncio.to_thread(ray.util.remove_placement_group, held)
    await until(lambda: (latest(trees, parent_id) or {}).get("status") not in (None, "running", "stopping"), 600)
    final = latest(trees, parent_id)
    assert final is not None and final["status"] == "built" and final["outcomeMessage"] == "1 reused", final
    (row,) = final["cells"]
    cell = latest(trees, row["buildId"])
    assert cell is not None and cell["outcome"] == "reused" and cell["outcomeKind"] == "ok", cell
    said = f"up to date — engine from build {elsewhere.producer} "
    assert (
        cell["outcomeMessage"].startswith(said) and "(from the remote store, served by node " in cell["outcomeMessage"]
    )
    assert cell["rebuiltBecause"] is None and cell["description"].startswith("reused · "), cell
    assert cell["node"]["nodeId"] and cell["evidencePath"], cell
    assert (ws / "build" / "demo-SM89.engine").read_bytes() == elsewhere.blob
