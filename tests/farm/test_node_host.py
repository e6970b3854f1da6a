"""One node-worker actor per node runs every CPU-only cell placed there (trtls.builds.farm.node_host), while Ray still
reserves and queues each cell's CPUs with a placement group of one bundle. On the real test cluster (no mocks):

- three cells on a node of two CPUs run in ONE actor (no NodeWorker actor at all), and the third is placed only
  after a bundle came free — Ray's queue, not ours;
- no placement group is left after a matrix built, a cell was cancelled (running, or waiting in the queue), timed out
  in the queue, or failed (the stop tests check the same after theirs: tests/farm/test_stop_on_cluster.py).

States and orders, never durations."""

from __future__ import annotations

from pathlib import Path

from tests.farm.conftest import LABEL, engine_table, farm_recipe
from trtls.builds.farm.host_slot import HOSTS, LINGER_S
from trtls.builds.farm.submit import prepare
from trtls.builds.supervisor.matrix import plan, start_matrix
from trtls.builds.supervisor.supervisor import Supervisor
from trtls.core.recipe import load_recipe

THREE = """
[engines.demo.matrix]
output = "build/demo-{optimization_level}.engine"
optimization_level = [0, 1, 2]
"""


def no_placement_group_left() -> bool:
    """Every placement group the farm made on the test cluster was removed (none CREATED or PENDING)."""
    import ray

    return all(pg["state"] == "REMOVED" for pg in ray.util.placement_group_table().values())


def actors(class_name: str, node_id: str | None = None, alive_only: bool = True) -> list[dict]:
    """Actors of `class_name` on the test cluster (on `node_id` when given; alive ones unless `alive_only` is off),
    from the GCS's own actor table (this driver's connection). Ray's state API (`ray.util.state.list_actors`) asks
    the dashboard, which on a loaded machine was not up within its 40 s of retries ("Could not read 'dashboard'
    from GCS"): the question is the cluster's, not the dashboard's."""
    from ray._private.state import actors as actor_table

    return [
        a
        for a in actor_table().values()
        if a["ActorClassName"] == class_name
        and (not alive_only or a["State"] == "ALIVE")
        and (node_id is None or a["Address"]["NodeID"] == node_id)
    ]


async def test_three_cells_on_a_two_cpu_node_share_one_actor_and_the_third_waits_for_a_bundle(
    ray_cluster, tmp_path: Path
) -> None:
    from tests.farm.test_stop_on_cluster import eventually

    ray_cluster.add_node(num_cpus=2, labels={LABEL: "pair"})
    ray_cluster.wait_for_nodes()
    path = farm_recipe(tmp_path, ray_cluster.address, engine_table("demo", "demo", f'{{ "{LABEL}" = "pair" }}'))
    path.write_text(path.read_text() + THREE)
    loaded = load_recipe(path)
    planned = plan(loaded, ["demo"], True, {})
    assert len(planned) == 3
    specs = await prepare(loaded, planned)
    assert isinstance(specs, dict), specs
    order: list[tuple[str, str, int | None]] = []  # (cell, event, actor pid) in the order the driver saw them

    def seen(m, b, ev) -> None:
        if b is None or ev is None:
            return
        if ev.type == "placed":
            order.append((b.cell, "placed", ev.actor_pid))
        elif ev.type == "build_finished":
            order.append((b.cell, "finished", None))

    mb = start_matrix(Supervisor(), loaded, planned, "demo (matrix)", lambda p: specs[p.key])
    mb.listeners.append(seen)
    summary = await mb.wait()
    assert summary.outcome == "built", [(c.cell, c.summary["error"]) for c in mb.cells]

    # one actor ran the three cells: one process, and no per-cell NodeWorker actor at any placement
    placed = [e for e in order if e[1] == "placed"]
    assert len(placed) == 3 and len({pid for _, _, pid in placed}) == 1, order
    notes = mb.summary["cluster"]["cells"]
    assert len({notes[c.id]["actorPid"] for c in mb.cells}) == 1
    assert all(c.summary["node"]["labels"][LABEL] == "pair" for c in mb.cells)
    # two bundles of one CPU fit the node: never more than two cells between placed and finished, and the third was
    # placed only after one of the first two ended (it waited in Ray's queue for a bundle)
    running, most = 0, 0
    for _, what, _ in order:
        running += 1 if what == "placed" else -1
        most = max(most, running)
    assert most <= 2, order
    third = [i for i, e in enumerate(order) if e[1] == "placed"][2]
    assert any(e[1] == "finished" for e in order[:third]), order
    await eventually(no_placement_group_left, "a cell's placement group was left after the matrix built")
    node_id = mb.cells[0].summary["node"]["nodeId"]
    assert len(actors("NodeHost", node_id)) <= 1  # the node's one host (it lingers a few seconds for a next cell)
    # no per-cell NodeWorker actor was ever made on the node: asked once the run ended, alive or dead (the state API
    # keeps dead actors), instead of at each placement from the event listener, where a slow state API under load
    # raised inside the listener and left the list empty
    assert actors("NodeWorker", node_id, alive_only=False) == []


async def test_a_failed_cell_leaves_no_placement_group(ray_cluster, tmp_path: Path) -> None:
    from tests.farm.test_stop_on_cluster import eventually

    path = farm_recipe(tmp_path, ray_cluster.address, engine_table("demo", "demo", f'{{ "{LABEL}" = "SM89" }}'))
    path.write_text(path.read_text().replace("models/demo.onnx", "models/broken.onnx"))
    (tmp_path / "models" / "broken.onnx").write_bytes(b"this is not an ONNX model")
    loaded = load_recipe(path)
    specs = await prepare(loaded, plan(loaded, ["demo"], False, {}))
    assert isinstance(specs, dict), specs
    s = await Supervisor().start(loaded, "demo", remote=specs["demo"]).wait()
    assert s.outcome == "failed", s
    assert s.node["labels"][LABEL] == "SM89"  # it reached its node, and failed there
    await eventually(no_placement_group_left, "the failed cell's placement group was left")


async def test_a_cell_waiting_for_its_bundle_finds_its_nodes_host_already_made_and_runs_on_it(
    ray_cluster, tmp_path: Path
) -> None:
    """The host is made as the cells are placed (`host_slot.Hosts.start_own`), not once a bundle is reserved: its Ray
    worker starts while the cell waits in Ray's queue (cold fixed cost, issue 31). The node's one CPU is held by a
    placement group of this test's until the host is seen alive; then the cell gets the bundle and runs on that host."""
    import ray

    from tests.farm.test_stop_on_cluster import eventually

    ray_cluster.add_node(num_cpus=1, labels={LABEL: "ahead"})
    ray_cluster.wait_for_nodes()
    holder = ray.util.placement_group([{"CPU": 1.0}], bundle_label_selector=[{LABEL: "ahead"}])
    ray.get(holder.ready(), timeout=60)
    node_id = str(ray.util.placement_group_table(holder)["bundles_to_node_id"][0])
    path = farm_recipe(tmp_path, ray_cluster.address, engine_table("demo", "demo", f'{{ "{LABEL}" = "ahead" }}'))
    path.write_text(path.read_text().replace("keep_warm_s = 0", "keep_warm_s = 6"))  # longer than LINGER_S
    loaded = load_recipe(path)
    planned = plan(loaded, ["demo"], False, {})
    specs = await prepare(loaded, planned)
    assert isinstance(specs, dict), specs
    placed: list[int | None] = []

    def seen(m, b, ev) -> None:
        if ev is not None and ev.type == "placed":
            placed.append(ev.actor_pid)

    mb = start_matrix(Supervisor(), loaded, planned, "demo", lambda p: specs[p.key])
    mb.listeners.append(seen)
    try:
        await eventually(lambda: len(actors("NodeHost", node_id)) == 1, "no host on the node while the cell waited")
        assert placed == []  # the cell still waits for its bundle: the node's only CPU is the test's
        host_pid = actors("NodeHost", node_id)[0]["Pid"]
        # unclaimed, it lingers as a host whose last cell left: the farm's keep_warm_s, not a shorter rule of its own
        with HOSTS.lock:  # start_own holds it while it makes the host and sets its timer
            linger = HOSTS.own[node_id][2]
        assert linger is not None and linger.interval == max(LINGER_S, loaded.recipe.cluster.keep_warm_s) > LINGER_S
    finally:
        ray.util.remove_placement_group(holder)
    summary = await mb.wait()
    assert summary.outcome == "built", [(c.cell, c.summary["error"]) for c in mb.cells]
    assert placed == [host_pid]  # it ran on the host made ahead of it, not on one made for it
    assert mb.cells[0].summary["node"]["nodeId"] == node_id
