"""A farm node publishing to the remote engine store itself (docs/store.md, "A farm node and the remote store").

On the real two-node labelled test cluster and a real nginx WebDAV server: `trtls build --matrix` (a real CLI
process) builds a one-cell matrix on a node, and the node — not the submitting process — sends the engine and its
record to the remote (the record's `publishedBy` is the node's process; the submitting process sends nothing again).
The same matrix on a fresh workspace with an empty local store is then served by the remote: no node, no worker, no
TensorRT import. One cell only: the machine has 2 cores."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import socket
from pathlib import Path

from tests.farm.conftest import LABEL
from tests.farm.test_farm_store import _probe_env, _recipe, _run
from tests.store.helpers import probes, summaries, with_store
from tests.store.nginx_dav import DavServer, nginx_dav  # noqa: F401  (a fixture: a real nginx WebDAV server)

ONE_CELL = """
[engines.demo.matrix]
output = "build/demo-{compute_capabilities}.engine"
compute_capabilities = ["SM89"]
"""


def _workspace(ws: Path, store: Path, address: str, url: str, probe: Path) -> dict[str, str]:
    env = _probe_env(probe)
    path = _recipe(ws, address, f'{{ "{LABEL}" = "{{compute_capabilities}}" }}',
                   {"PYTHONPATH": env["PYTHONPATH"], "TRTLS_TEST_PROBE_DIR": str(probe)})  # fmt: skip
    path.write_text(path.read_text() + ONE_CELL)
    with_store(ws, store)
    path.write_text(path.read_text() + f'remote = "{url}"\n')
    return env


def test_a_node_publishes_its_engine_to_the_remote_and_a_fresh_driver_reuses_it(
    ray_cluster,
    nginx_dav: DavServer,  # noqa: F811
    tmp_path: Path,
) -> None:
    ws, probe = tmp_path / "ws", tmp_path / "probe"
    env = _workspace(ws, tmp_path / "store", ray_cluster.address, nginx_dav.url, probe)
    first, cli_pid = _run(ws, env, "--matrix")
    assert first.returncode == 0, first.stdout + first.stderr
    (cell,) = [s for s in summaries(ws) if s.get("cell")]
    assert cell["outcome"] == "built" and cell["node"]["labels"][LABEL] == "SM89", (cell["error"], cell["stderrTail"])
    key, sha = cell["engineKey"], cell["engineArtifact"]["sha256"]
    node_id = cell["node"]["nodeId"]
    said = [n for n in cell["notes"] if n.startswith("published to the remote store from node")]
    assert said == [f"published to the remote store from node {socket.gethostname()} ({node_id[:12]}): key "
                    f"{key[:12]}, engine {sha[:12]}"], cell["notes"]  # fmt: skip
    assert not cell["store"]["warnings"], cell["store"]

    # the remote holds the engine and the node's record of it …
    output = ws / "build" / "demo-SM89.engine"
    blob = nginx_dav.files / "cas" / sha
    assert blob.read_bytes() == output.read_bytes() and hashlib.sha256(blob.read_bytes()).hexdigest() == sha
    record = json.loads((nginx_dav.files / "ac" / key).read_text())
    assert record["key"] == key and record["engine"] == {"sha256": sha, "size": output.stat().st_size}
    published_by = record["build"]["publishedBy"]
    assert published_by["pid"] not in (cli_pid, cell["workerPid"]), published_by  # the node's actor, not the CLI
    assert published_by["node"] == f"{socket.gethostname()} ({node_id[:12]})"
    assert record["build"]["buildId"] == cell["buildId"] and record["build"]["builderModule"] == cell["builderModule"]
    # … sent once, by the node: engine first, then its record; the submitting process did not send it again
    puts = re.findall(r'"PUT /cache/(ac|cas)/', nginx_dav.access_log())
    assert puts == ["cas", "ac"], puts
    # the submitting machine's own store has the entry too (from the output the engine was brought back to)
    assert (tmp_path / "store" / "entries" / key / "engine").read_bytes() == output.read_bytes()

    # a fresh workspace and an empty local store: the remote serves the cell, no node is asked, nothing builds
    ws2, probe2 = tmp_path / "ws2", tmp_path / "probe2"
    env2 = _workspace(ws2, tmp_path / "store2", ray_cluster.address, nginx_dav.url, probe2)
    shutil.copytree(ws / "models", ws2 / "models", dirs_exist_ok=True)
    again, _ = _run(ws2, env2, "--matrix")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "demo/SM89: up to date — engine from build " + cell["buildId"] in again.stdout, again.stdout
    assert "connecting to the Ray cluster" not in again.stderr, again.stderr  # no node was asked for
    assert probes(probe2, "worker") == [] and probes(probe2, "tensorrt") == []
    (reused,) = summaries(ws2)
    assert reused["outcome"] == "reused" and reused["workerPid"] is None and reused["engineKey"] == key
    assert f"fetched from the remote store {nginx_dav.url}" in reused["store"]["warnings"]
    assert (ws2 / "build" / "demo-SM89.engine").read_bytes() == output.read_bytes()


def test_a_node_does_not_publish_an_engine_of_another_builder_than_the_key(
    ray_cluster,
    nginx_dav: DavServer,  # noqa: F811
    tmp_path: Path,
) -> None:
    """The submitting machine keys with a tensorrt_rtx that reads 9.9.9; the node builds with the installed one: the
    node checks its worker's builder against the key and sends nothing to the remote; its note says why."""
    import os

    from tests.farm.test_farm_store import _fake_builder

    ws = tmp_path / "ws"
    path = _recipe(ws, ray_cluster.address, f'{{ "{LABEL}" = "SM89" }}')
    path.write_text(path.read_text() + ONE_CELL)
    with_store(ws, tmp_path / "store")
    path.write_text(path.read_text() + f'remote = "{nginx_dav.url}"\n')
    fake = _fake_builder(tmp_path / "fake", "tensorrt_rtx", "tensorrt_rtx_cu13", "9.9.9")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(fake), os.environ.get("PYTHONPATH")]))}
    done, _ = _run(ws, env, "--matrix")
    assert done.returncode == 0, done.stdout + done.stderr
    (cell,) = [s for s in summaries(ws) if s.get("cell")]
    assert cell["outcome"] == "built" and (ws / "build" / "demo-SM89.engine").is_file()
    (said,) = [n for n in cell["notes"] if n.startswith("not stored: builder tensorrt_rtx ")]
    assert "tensorrt_rtx 9.9.9 (the key's, on the submitting machine)" in said and "(from node " in said, said
    assert not any(n.startswith("published to the remote store") for n in cell["notes"])
    assert not (nginx_dav.files / "ac").exists() and not (nginx_dav.files / "cas").exists()
    assert "PUT /cache/" not in nginx_dav.access_log()
