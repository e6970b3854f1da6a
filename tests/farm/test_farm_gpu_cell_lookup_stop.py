"""A stop of a matrix whose cell holds a GPU, while that cell's node looks its key up in the remote store, cuts the
lookup at once: the cell's own actor (builds/farm/node_worker.NodeWorker) looks the key up as it is made, before
any method of it can be called, so the stop reaches it the only way it can — the driver kills the actor
(remote_process `_on_own_actor` → `_queue_ended`), and the lookup's connection dies with it. The cell ends
`cancelled`, saying it was stopped while it waited for a node or for that lookup; nothing is built or written.

The CPU-only cells' path (the node's shared host) is tests/farm/test_farm_node_lookup_stop.py; this is the path of a
cell that asks for a GPU (`run_on.num_gpus = 1`), on the real test cluster with a node that advertises one (Ray
schedules the resource; the node has no GPU, and TensorRT-RTX builds ahead of time on the CPU). The same loopback
remote: the driver's lookup answered 404, the node's held while the test sends the command its SIGINT, then a byte a
second until the node lets the connection go (or 20 s pass: what a stop that did not reach the lookup waits for)."""

from __future__ import annotations

from pathlib import Path

from tests.farm.conftest import LABEL, gpu_node
from tests.farm.test_farm_node_lookup_stop import StallsTheNodesLookup, stopped_during_the_nodes_lookup
from tests.farm.test_farm_remote_store import forget_node_stores
from tests.farm.test_farm_store import _recipe
from tests.store.helpers import with_store
from tests.store.scripted_remote import ScriptedServer


def test_a_ctrl_c_cuts_a_gpu_cells_stalled_node_lookup_and_builds_nothing(ray_cluster, tmp_path: Path) -> None:
    gpu_node(ray_cluster)
    answer = StallsTheNodesLookup()
    server = ScriptedServer(answer)
    ws = tmp_path / "ws"
    path = _recipe(ws, ray_cluster.address, f'{{ "{LABEL}" = "gpu" }}')
    text = path.read_text().replace("[engines.demo]\n", '[engines.demo]\nbuilder_module = "tensorrt_rtx"\n', 1)
    text = text.replace("[engines.demo.run_on]\n", "[engines.demo.run_on]\nnum_gpus = 1\n", 1)
    assert "num_gpus = 1" in text, text
    path.write_text(text + '\n[engines.demo.matrix]\noutput = "build/demo-{optimization_level}.engine"\n'
                    "optimization_level = [2]\n")  # fmt: skip
    with_store(ws, tmp_path / "store", remote=server.url)
    forget_node_stores()
    cell = stopped_during_the_nodes_lookup(ws, tmp_path / "store", server, answer)
    said = "cancelled while waiting for a node or for its node's lookup of its key in the remote store"
    assert any(n.startswith(said) for n in cell["notes"]), cell["notes"]
