"""A farm cell's builder starts with the node's environment, not the thread limit Ray gives its actors
(trtls.builds.farm.builder_env). Ray sets `OMP_NUM_THREADS` in an actor's process when the node had none (1 for an
actor that holds no CPU, as the node host does); TensorRT-RTX builds measurably slower with it (docs/farm.md). On the
real test cluster: a process the actor spawns the way a cell's worker is spawned (`spawn_worker`) has the node's
value — none on a node started without one, the node's own on a node started with one."""

from __future__ import annotations

import json
import os
import sys

PRINT_ENV = "import json, os; print(json.dumps(os.environ.get('OMP_NUM_THREADS')))"


def _seen_by_actor_and_worker(node_id: str) -> tuple[str | None, str | None]:
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    @ray.remote(num_cpus=0)
    class Probe:  # holds no CPU, as NodeHost does
        def seen(self) -> tuple[str | None, str | None]:
            from trtls.builds.farm.builder_env import spawn_worker

            proc = spawn_worker([sys.executable, "-c", PRINT_ENV])
            out, _ = proc.communicate(timeout=120)
            return os.environ.get("OMP_NUM_THREADS"), json.loads(out)

    actor = Probe.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False)).remote()
    try:
        return ray.get(actor.seen.remote(), timeout=300)
    finally:
        ray.kill(actor)


def test_the_worker_does_not_inherit_rays_thread_limit(ray_cluster) -> None:
    assert "OMP_NUM_THREADS" not in os.environ, "the test cluster's nodes start with this process's environment"
    actor, worker = _seen_by_actor_and_worker(ray_cluster.nodes["SM89"].node_id)
    assert actor == "1", "Ray limits an actor that holds no CPU to one OpenMP thread (what this guards against)"
    assert worker is None, "the build worker has the node's environment: no OMP_NUM_THREADS"


def test_a_node_that_sets_the_limit_keeps_it(ray_cluster) -> None:
    node = ray_cluster.add_node(num_cpus=1, env_vars={"OMP_NUM_THREADS": "3"})
    ray_cluster.wait_for_nodes()
    try:
        actor, worker = _seen_by_actor_and_worker(node.node_id)
        assert (actor, worker) == ("3", "3"), "the node's own value is the user's: kept"
    finally:
        ray_cluster.remove_node(node)
