"""The node side of a remote cell that holds a GPU: a Ray actor of its own, which runs the cell's worker
(`cell_runner.CellRun`) in a process on its node and relays its protocol lines.

Why an actor per such cell, when every CPU-only cell of a node shares one actor (`node_host.NodeHost`): Ray sets
CUDA_VISIBLE_DEVICES for the process of the actor that holds the GPU, and the build's worker inherits it — so
TensorRT sees exactly the GPU Ray reserved for this cell. A shared actor holds no GPU and could not do that.

- if this actor dies (its driver died, it was killed), the worker's stdin closes: the worker cancels itself
  (docs/protocol.md), so no build outlives the driver that wanted it;
- an actor whose cell built may serve the next cell of the same shape (`warm_actors.WARM`): each `run` is a new
  `CellRun`.

Imported only on the remote path (a recipe with `[cluster]`): this module imports Ray.
"""

from __future__ import annotations

import os
import socket
from typing import Any

import ray

from trtls.builds.farm.cell_runner import CellRun, Preloaded, log_line, node_scratch

__all__ = ["NodeWorker", "log_line", "node_scratch", "where_info"]


def where_info(node_id: str) -> dict[str, Any]:
    """Where a cell landed (for the evidence), answered by the actor that runs it on its node."""
    ctx = ray.get_runtime_context()
    labels = dict(ctx.get_node_labels() or {})
    return {
        "node_id": node_id,
        "hostname": socket.gethostname(),
        "labels": labels,
        "accelerator_type": labels.get("ray.io/accelerator-type"),
        "gpu_ids": [str(g) for g in ray.get_gpu_ids()],
        "actor_pid": os.getpid(),
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),  # what the worker process inherits
    }


@ray.remote(max_concurrency=4)
class NodeWorker:
    def __init__(self, preload: str | None = None, store: dict[str, Any] | None = None) -> None:
        self.node_id = ray.get_runtime_context().get_node_id()
        # The build's worker starts now and imports TensorRT (its largest fixed cost) while the driver learns
        # where this actor landed and the ONNX arrives, instead of after (as a local CLI build does: spawn.py) —
        # unless the remote store holds the cell's key (`store`: the driver's plan, looked up first): then none does.
        self.cell = CellRun(self.node_id, None, ray.get)
        if preload and not (store is not None and self.cell.look_up(store)):
            self.cell.early = Preloaded(preload)
        self.used = False

    def where(self) -> dict[str, Any]:
        return where_info(self.node_id)

    def run(self, *cell_args: Any):
        """One cell's build: `CellRun.run`'s arguments (that method owns their list), as the driver sends them."""
        if self.used:  # a warm actor runs one build after another: nothing of the last one carries over
            self.cell = CellRun(self.node_id, None, ray.get)
        self.used = True
        yield from self.cell.run(*cell_args)

    def control(self, line: str) -> bool:
        return self.cell.control(line)

    def close_stdin(self) -> None:
        self.cell.close_stdin()

    def signal_group(self, signum: int) -> bool:
        return self.cell.signal_group(signum)

    def engine_chunks(self, path: str):
        yield from self.cell.engine_chunks(path)

    def cleanup(self) -> None:
        self.cell.cleanup()
