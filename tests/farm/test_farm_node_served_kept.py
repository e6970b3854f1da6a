"""A cell its farm node served from the remote store is kept on the submitting machine as a local reuse is (issue 32;
docs/store.md, "A farm node and the remote store"): one hit in `trtls store stats` (`node`, never a miss), the
engine in this machine's store under the cell's key with the producing build's record, and the table's known-good
record — so the next build here is a local hit that asks neither the remote nor a node.

On the real two-node labelled test cluster and a real nginx WebDAV server, as tests/farm/test_farm_remote_store.py:
another machine's engine is published to the remote while the cell waits for its node (held by the test), the node
finds it there, and the cell ends `reused`. The build that produced that engine (a cell built on a node) is checked
too: counted once as a miss, kept in its own store and known-good history."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.farm.test_farm_remote_store import _wait_for, _workspace, built_elsewhere, hold_sm89
from tests.farm.test_farm_store import _run
from tests.store.helpers import probes, summaries
from tests.store.nginx_dav import DavServer, nginx_dav  # noqa: F401  (a fixture: a real nginx WebDAV server)


def _stats(ws: Path) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-m", "trtls", "store", "stats", str(ws), "--json"], capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return dict(json.loads(done.stdout))


def _known_good(ws: Path, history: str) -> list[dict[str, Any]]:
    from trtls.store.known_good import KnownGood

    return KnownGood(ws / ".trtls", history).records()


def test_a_node_served_cell_is_one_hit_a_local_entry_and_a_known_good_record(
    ray_cluster,
    nginx_dav: DavServer,  # noqa: F811
    tmp_path: Path,
) -> None:
    import ray

    elsewhere = built_elsewhere(ray_cluster.address, nginx_dav, tmp_path)
    key, sha, blob, producer = elsewhere.key, elsewhere.sha, elsewhere.blob, elsewhere.producer
    # the producing run (a cell built on its node): one miss, counted once, and its engine kept here
    counted = _stats(tmp_path / "ws1")
    assert counted["misses"]["total"] == 1 and counted["hits"]["total"] == 0, counted
    assert counted["misses"]["byReason"] == {"first build of this engine table": 1}, counted
    (built,) = _known_good(tmp_path / "ws1", "demo.SM89")
    assert built["key"] == key and built["sha256"] == sha and built["stored"] is True and built["buildId"] == producer

    held = hold_sm89()  # the SM89 node is busy: the cell misses here, is submitted, and waits for it
    ws2, probe2, store2 = tmp_path / "ws2", tmp_path / "probe2", tmp_path / "store2"
    env2 = _workspace(ws2, store2, ray_cluster.address, nginx_dav.url, probe2)
    shutil.copytree(elsewhere.models, ws2 / "models", dirs_exist_ok=True)
    cmd = [sys.executable, "-m", "trtls", "build", str(ws2), "--engine", "demo", "--matrix"]
    cli = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env2)
    try:
        queued = lambda: any('"queued"' in p.read_text() for p in (ws2 / ".trtls" / "runs").glob("*/events.jsonl"))  # noqa: E731
        _wait_for("the cell waits for a node", queued, cli)
        elsewhere.publish(nginx_dav)  # another machine publishes the key while the cell waits
    finally:
        ray.util.remove_placement_group(held)
    out, err = cli.communicate(timeout=900)
    assert cli.returncode == 0, out + err
    (cell,) = [s for s in summaries(ws2) if s.get("cell")]
    assert cell["outcome"] == "reused" and cell["reusedFrom"]["servedByNode"], (cell["outcome"], cell["notes"])
    assert probes(probe2, "worker") == [] and probes(probe2, "tensorrt") == []
    assert not cell["store"]["warnings"], cell["store"]

    # counted once, as a hit its node served (the submitting machine's own lookup missed it: not a miss)
    counted = _stats(ws2)
    assert counted["hits"] == {"total": 1, "restored": 0, "kept": 0, "fast": 0, "node": 1}, counted
    assert counted["misses"]["total"] == 0, counted
    assert counted["timeSavedS"] > 0 and counted["perEngine"]["demo"]["hits"] == 1, counted

    # kept in this machine's store: the engine's bytes, under the key, with the producing build's record
    entry = store2 / "entries" / key
    assert (entry / "engine").read_bytes() == blob
    record = json.loads((entry / "entry.json").read_text())
    assert record["key"] == key and record["engine"] == {"sha256": sha, "size": len(blob)}
    assert record["build"]["buildId"] == producer and record["build"]["publishedBy"]["node"], record["build"]
    # … and in the table's known-good history: the producing build, restored as this cell
    (known,) = _known_good(ws2, "demo.SM89")
    assert known["key"] == key and known["sha256"] == sha and known["size"] == len(blob)
    assert known["buildId"] == producer and known["restoredAs"] == cell["buildId"]
    assert known["stored"] is True and known["reused"] is True

    # the next build here is a local hit: no node, no remote asked for the key again, nothing built
    asked = nginx_dav.access_log().count(f"/cache/ac/{key} ")
    again, _ = _run(ws2, env2, "--matrix")
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"demo/SM89: up to date — engine from build {producer}" in again.stdout, again.stdout
    assert "connecting to the Ray cluster" not in again.stderr, again.stderr
    assert nginx_dav.access_log().count(f"/cache/ac/{key} ") == asked, nginx_dav.access_log()
    assert probes(probe2, "worker") == [] and probes(probe2, "tensorrt") == []
    (reused,) = [s for s in summaries(ws2) if s.get("buildId") != cell["buildId"] and s.get("outcome") == "reused"]
    assert reused["reusedFrom"]["storeEntry"] == str(entry), reused["reusedFrom"]
    assert _stats(ws2)["hits"]["kept"] == 1
