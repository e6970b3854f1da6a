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
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
    forget_node_stores()  # a node's folder that held the key would send an earlier build's record of these bytes
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


@dataclass
class Elsewhere:
    """An engine and its record as another machine publishes them to the remote (built once on the farm, then
    taken off the remote and off the nodes' own store folders: a node must find it on the remote, not its copy)."""

    key: str
    sha: str
    record: bytes
    blob: bytes
    producer: str  # the build the record names (the one that built it here, or an earlier one of the same bytes)
    models: Path

    def publish(self, dav: DavServer) -> None:
        """PUT on the remote as another runner would: the engine first, then its record."""
        for name, body in ((f"cas/{self.sha}", self.blob), (f"ac/{self.key}", self.record)):
            urllib.request.urlopen(urllib.request.Request(f"{dav.url}/{name}", data=body, method="PUT"), timeout=30)


def forget_node_stores() -> None:
    """The nodes' own store folders emptied: what an earlier test built there is not this test's."""
    import ray

    from trtls.builds.farm.cell_runner import node_scratch

    for node in ray.nodes():
        shutil.rmtree(node_scratch(node["NodeID"]) / "store", ignore_errors=True)


def built_elsewhere(address: str, dav: DavServer, tmp_path: Path) -> Elsewhere:
    """The engine as another machine built it: built on a node from nodes' stores emptied first (an earlier test's
    node may keep this very key, and would serve the build instead of building it), then taken off the remote."""
    forget_node_stores()
    ws1 = tmp_path / "ws1"
    env1 = _workspace(ws1, tmp_path / "store1", address, dav.url, tmp_path / "probe1")
    first, _ = _run(ws1, env1, "--matrix")
    assert first.returncode == 0, first.stdout + first.stderr
    (built,) = [s for s in summaries(ws1) if s.get("cell")]
    key, sha = built["engineKey"], built["engineArtifact"]["sha256"]
    record, blob = (dav.files / "ac" / key).read_bytes(), (dav.files / "cas" / sha).read_bytes()
    (dav.files / "ac" / key).unlink()
    (dav.files / "cas" / sha).unlink()
    forget_node_stores()
    return Elsewhere(key, sha, record, blob, json.loads(record)["build"]["buildId"], ws1 / "models")


def hold_sm89() -> Any:
    """A placement group of the test's own on the SM89 node's one CPU: a cell placed there waits for a node."""
    import ray

    held = ray.util.placement_group([{"CPU": 1}], bundle_label_selector=[{LABEL: "SM89"}])
    ray.get(held.ready(), timeout=120)
    return held


def _wait_for(what: str, found: Callable[[], bool], proc: subprocess.Popen[str]) -> None:
    """Until `found()` (no timed assertion: the CLI's own end, or 10 minutes, ends the wait)."""
    deadline = time.monotonic() + 600
    while not found():
        assert proc.poll() is None, f"the build ended before {what}: {proc.communicate()}"
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.1)


def test_a_node_serves_an_engine_published_while_its_cell_waited_for_it(
    ray_cluster,
    nginx_dav: DavServer,  # noqa: F811
    tmp_path: Path,
) -> None:
    """Another machine publishes the cell's key to the remote AFTER the submitting machine looked it up (the cell
    waits for its node, which the test holds with a placement group of its own): the node looks the key up before
    any worker starts, fetches the verified entry, and the cell ends `reused` — no worker, no TensorRT import on the
    node, the engine byte-identical, the producing build named, nothing learnt as a build time."""
    import ray

    elsewhere = built_elsewhere(ray_cluster.address, nginx_dav, tmp_path)
    key, sha, blob, producer = elsewhere.key, elsewhere.sha, elsewhere.blob, elsewhere.producer
    # the SM89 node is busy: the cell is looked up on this machine (a miss), submitted, and waits for it
    held = hold_sm89()
    ws2, probe2 = tmp_path / "ws2", tmp_path / "probe2"
    env2 = _workspace(ws2, tmp_path / "store2", ray_cluster.address, nginx_dav.url, probe2)
    shutil.copytree(elsewhere.models, ws2 / "models", dirs_exist_ok=True)
    cmd = [sys.executable, "-m", "trtls", "build", str(ws2), "--engine", "demo", "--matrix"]
    cli = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env2)
    try:
        queued = lambda: any('"queued"' in p.read_text() for p in (ws2 / ".trtls" / "runs").glob("*/events.jsonl"))  # noqa: E731
        _wait_for("the cell waits for a node", queued, cli)
        assert f'"GET /cache/ac/{key} HTTP/1.1" 404' in nginx_dav.access_log()  # the submitting machine missed it
        elsewhere.publish(nginx_dav)  # … and meanwhile another machine publishes it
    finally:
        ray.util.remove_placement_group(held)
    out, err = cli.communicate(timeout=900)
    assert cli.returncode == 0, out + err

    (cell,) = [s for s in summaries(ws2) if s.get("cell")]
    node_id = cell["node"]["nodeId"]
    assert cell["outcome"] == "reused", (cell["outcome"], cell["error"], cell["notes"])
    assert cell["node"]["labels"][LABEL] == "SM89" and cell["workerPid"] is None and cell["engineKey"] == key
    # no worker and no TensorRT on the node (a preloaded worker counts as a worker): nothing was built
    assert probes(probe2, "worker") == [] and probes(probe2, "tensorrt") == []
    output = ws2 / "build" / "demo-SM89.engine"
    assert output.read_bytes() == blob and hashlib.sha256(output.read_bytes()).hexdigest() == sha
    assert cell["engineArtifact"]["action"] == "restored" and cell["engineArtifact"]["sha256"] == sha
    node = f"{socket.gethostname()} ({node_id[:12]})"
    assert cell["reusedFrom"]["buildId"] == producer and cell["reusedFrom"]["remote"] == nginx_dav.url
    assert cell["reusedFrom"]["servedByNode"] == node
    assert cell["message"].startswith(f"up to date — engine from build {producer} "), cell["message"]
    assert cell["message"].endswith(f"(from the remote store, served by node {node})"), cell["message"]
    assert cell["retryPolicy"] == "not_needed" and cell["language"] == "not_applicable"
    assert cell["store"]["key"] == key and cell["rebuiltBecause"] is None
    assert any(f"node {node} found key {key[:12]} in the remote store" in m["msg"] for m in cell["logs"]), cell["logs"]
    # the node fetched it from the remote (record, then the engine by content); the submitting machine never did
    log = nginx_dav.access_log()
    assert (
        log.count(f'"GET /cache/ac/{key} HTTP/1.1" 200') == 1 and log.count(f'"GET /cache/cas/{sha} HTTP/1.1" 200') == 1
    )
    # every face: the terminal's line, the matrix's summary, the tree's row; no build time learnt
    said = f"up to date — engine from build {producer}"
    assert f"[SM89] {said}" in out and any(ln.strip().startswith("✓ SM89 · ") and said in ln for ln in out.splitlines())
    (matrix,) = [s for s in summaries(ws2) if s.get("kind") == "matrix"]
    assert matrix["outcome"] == "built" and [c["outcome"] for c in matrix["cells"]] == ["reused"]
    history = ws2 / ".trtls" / "history.json"
    assert not history.exists() or cell["buildId"] not in history.read_text(), history.read_text()
