"""A matrix of four cells over two labelled nodes of a real Ray cluster, built for real with TensorRT-RTX; a label
no node has is refused at once, before anything is submitted."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from tests.farm.conftest import LABEL, engine_table, farm_recipe
from trtls.builds.farm.submit import prepare
from trtls.builds.supervisor.matrix import plan, start_matrix
from trtls.builds.supervisor.supervisor import Supervisor
from trtls.core.recipe import load_recipe

MATRIX = """
[engines.demo.matrix]
output = "build/demo-{compute_capabilities}-{optimization_level}.engine"
compute_capabilities = ["SM89", "SM120"]
optimization_level = [0, 1]
"""


async def test_four_cells_over_two_labelled_nodes(ray_cluster, tmp_path: Path) -> None:
    path = farm_recipe(
        tmp_path, ray_cluster.address, engine_table("demo", "demo", f'{{ "{LABEL}" = "{{compute_capabilities}}" }}')
    )
    path.write_text(path.read_text().replace("keep_warm_s = 0", "keep_warm_s = 30") + MATRIX)
    loaded = load_recipe(path)
    assert loaded.recipe is not None, loaded.findings
    planned = plan(loaded, ["demo"], True, {})
    assert len(planned) == 4
    specs = await prepare(loaded, planned)
    assert isinstance(specs, dict), specs
    seen: list[tuple[str, str]] = []
    mb = start_matrix(Supervisor(), loaded, planned, "demo (matrix)", lambda p: specs[p.key])
    mb.listeners.append(lambda m, b, ev: seen.append((b.cell, ev.type)) if b is not None and ev is not None else None)
    summary = await mb.wait()

    assert summary.outcome == "built", [(c.cell, c.outcome) for c in summary.cells]
    nodes = {}
    for cell in mb.cells:
        s = cell.summary
        assert s["outcome"] == "built", (cell.cell, s["error"], s["stderrTail"])
        target = s["effectiveSettings"]["compute_capabilities"][0]
        assert s["node"]["labels"][LABEL] == target  # the cell ran on the node labelled for its target
        nodes.setdefault(target, set()).add(s["node"]["nodeId"])
        engine = Path(s["engineArtifact"]["path"])
        assert engine == cell.output and engine.is_file()
        assert hashlib.sha256(engine.read_bytes()).hexdigest() == s["engineArtifact"]["sha256"]  # end to end
        assert not list(engine.parent.glob("*.trtls-tmp-*"))
        assert s["node"]["queueWaitS"] is not None and s["node"]["hostname"]
        assert (cell.evidence_dir / "events.jsonl").is_file()
        assert any(t == "phase_start" for c, t in seen if c == cell.cell)  # the live tree streamed back
    assert len(nodes) == 2 and all(len(v) == 1 for v in nodes.values()) and nodes["SM89"] != nodes["SM120"]
    # one build per slot: each node has one CPU, so two of the four cells waited for their node
    waits = sorted(c.summary["node"]["queueWaitS"] for c in mb.cells)
    assert waits[2] > waits[0]
    parent = json.loads((mb.evidence_dir / "summary.json").read_text())
    assert [c["outcome"] for c in parent["cells"]] == ["built"] * 4 and all(c["node"] for c in parent["cells"])
    # the ONNX crossed to each node once: the second cell on a node found it there
    logs = [m["msg"] for c in mb.cells for m in c.summary["logs"] if "trtls farm: ONNX" in m["msg"]]
    assert sum("received" in m for m in logs) <= 2 and sum("already on this node" in m for m in logs) >= 2
    # one node-worker actor per node ran both of its cells (node_host): the second found it there (no new Ray worker
    # process), and the two nodes' actors are two processes
    notes = parent["cluster"]["cells"]
    pids = {
        t: {notes[c.id]["actorPid"] for c in mb.cells if c.summary["node"]["nodeId"] in v} for t, v in nodes.items()
    }
    assert all(len(p) == 1 for p in pids.values()) and pids["SM89"] != pids["SM120"], pids
    # (warmWorker: no actor was started for the cell; a host an earlier test left lingering on a node counts too)
    assert sum(bool(c.summary["node"]["warmWorker"]) for c in mb.cells) >= 2
    from tests.farm.test_node_host import no_placement_group_left
    from tests.farm.test_stop_on_cluster import eventually

    await eventually(no_placement_group_left, "a cell's placement group was left after the matrix built")


async def test_a_label_no_node_has_is_refused_at_once(ray_cluster, tmp_path: Path) -> None:
    path = farm_recipe(tmp_path, ray_cluster.address, engine_table("demo", "demo", f'{{ "{LABEL}" = "SM75" }}'))
    loaded = load_recipe(path)
    planned = plan(loaded, ["demo"], False, {})
    got = await prepare(loaded, planned)
    assert isinstance(got, list) and len(got) == 1
    f = got[0]
    assert f.code == "TRT230" and f.path == ("engines", "demo", "run_on", "labels", LABEL)
    line = next(i for i, t in enumerate(path.read_text().splitlines(), 1) if t.startswith("labels = "))
    assert loaded.location(f).endswith(f":{line}:29")  # the label's value in the recipe
    assert "SM75" in f.message and "SM89" in f.message and "SM120" in f.message  # names the labels that exist
    assert not (tmp_path / ".trtls" / "runs").exists()  # nothing was submitted


async def test_more_cpus_than_any_node_has_is_refused(ray_cluster, tmp_path: Path) -> None:
    body = engine_table("demo", "demo", f'{{ "{LABEL}" = "SM89" }}').replace("num_cpus = 1", "num_cpus = 4")
    loaded = load_recipe(farm_recipe(tmp_path, ray_cluster.address, body))
    got = await prepare(loaded, plan(loaded, ["demo"], False, {}))
    assert isinstance(got, list) and got[0].code == "TRT236" and got[0].path[-1] == "num_cpus"
    assert "4 CPU" in got[0].message and "most any has: 1" in got[0].message


async def test_shared_dir_nodes_write_the_engine_there(ray_cluster, tmp_path: Path) -> None:
    """With [cluster] shared_dir, the node writes the engine straight to shared storage (atomically); nothing is
    sent back. (Here the 'shared' folder is on the one machine all test nodes run on.)"""
    path = farm_recipe(tmp_path, ray_cluster.address, engine_table("demo", "demo", f'{{ "{LABEL}" = "SM120" }}'))
    path.write_text(path.read_text().replace("queue_timeout_s = 600", 'queue_timeout_s = 600\nshared_dir = "shared"'))
    loaded = load_recipe(path)
    specs = await prepare(loaded, plan(loaded, ["demo"], False, {}))
    build = Supervisor().start(loaded, "demo", remote=specs["demo"])
    s = await build.wait()
    assert s.outcome == "built", s.error
    engine = tmp_path / "shared" / "build" / "demo.engine"
    assert Path(s.engineArtifact["path"]) == engine and engine.is_file()
    assert hashlib.sha256(engine.read_bytes()).hexdigest() == s.engineArtifact["sha256"]
    assert "node_path" not in s.engineArtifact and not (tmp_path / "build" / "demo.engine").exists()
