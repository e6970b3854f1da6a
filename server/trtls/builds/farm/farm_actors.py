"""The warm local farm's node host: one named actor per node (`trtls-host-<node>` in namespace `trtls-farm`) that
`trtls farm up`'s head owns and keeps alive between runs, with N worker processes that have already imported TensorRT
(cell_runner.Preloaded) waiting for a job.

- The head (`FarmHost`, in trtls.builds.farm.warm_head) starts it with `workers` preloaded workers (default: one per
  CPU of the farm). The host holds no CPU: each cell of a run reserves its own with a placement group (host_slot), so
  a farm's idle workers never hold a slot another cell needs. Every HEALTH_EVERY_S the head asks the host to drop
  idle workers that died (never handed out) and start their replacements; a host that died is started again.
- A run (host_slot.HostSlot, on the driver) connected to the warm farm sends a cell that fits (`fits`) to the farm's
  host of the node its bundle landed on: the host hands it an idle preloaded worker (one round trip), and starts the
  next when the cell ends. A driver that dies while its cell builds is noticed by the host (it watches the driver's
  pid): the cell's worker cancels itself as if its stdin had closed.
- The farm goes down (`trtls farm down`): the head asks the host to end its processes, then shuts Ray down.

Imported by the head and lazily by a run connected to a warm farm: imports Ray.
"""

from __future__ import annotations

import time
from typing import Any

from trtls.fs import kill_ray_actor

HEALTH_EVERY_S = 2.0


def fits(options: dict[str, Any], command: list[str] | None, runtime_env: dict[str, Any] | None) -> bool:
    """A cell may run on the farm's host: our worker, no GPU, no runtime_env of its own (the farm's host runs in the
    head's environment). Its CPUs and memory are its placement group's, whatever they are."""
    return command is None and not runtime_env and not float(options.get("num_gpus") or 0)


class FarmHost:
    """The head's side: the node host of the farm's one node, kept alive with `workers` preloaded workers."""

    def __init__(self, workers: int, cpus: float, preload: str = "auto") -> None:
        self.workers, self.cpus, self.preload = workers, cpus, preload
        self.actor: Any = None
        self.replaced = 0

    def start(self) -> None:
        import ray

        from trtls.builds.farm.node_host import NAMESPACE, host_name, new_host

        node_id = ray.get_runtime_context().get_node_id()
        name = host_name(node_id)
        self.actor = new_host(
            node_id, self.cpus, name=name, namespace=NAMESPACE, farm=name, preload=self.preload, keep=self.workers
        )

    def wait_ready(self, within_s: float) -> bool:
        """Block until every idle worker has TensorRT imported (or `within_s` passed): `farm up` returns warm."""
        import ray

        deadline = time.monotonic() + within_s
        while time.monotonic() < deadline:
            try:
                h = ray.get(self.actor.health.remote(), timeout=max(1.0, deadline - time.monotonic()))
                if h["preloaded"] >= h["target"]:
                    return True
            except Exception:
                pass
            time.sleep(0.5)
        return False

    def check(self) -> None:
        """Idle workers that died are replaced (by the host); a host that died is started again."""
        import ray

        try:
            ray.get(self.actor.health.remote(), timeout=30.0)
        except ray.exceptions.GetTimeoutError:
            return  # the machine is loaded: look again next time
        except Exception:
            try:
                kill_ray_actor(ray, self.actor)
            except Exception:
                pass
            self.replaced += 1
            try:
                self.start()
            except Exception:  # its name is not free yet: next time
                pass

    def shutdown(self) -> None:
        import ray

        try:
            ray.get(self.actor.shutdown.remote(), timeout=10.0)
        except Exception:
            pass
