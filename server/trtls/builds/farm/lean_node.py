"""A local Ray instance as trtls starts it (the embedded instance of an `address = "local"` run, and `trtls farm up`'s
head): on 127.0.0.1 only, and without the processes a farm never uses — the log monitor, the autoscaler monitor, the
head's API server, the idle workers its raylet would prestart — nor the dashboard agent's servers (it runs minimal).
Each was measured costing CPU for nobody, or time before the first build (docs/farm.md "Measured here" and "The
tail: after the builds"). Imports nothing of Ray: the caller passes it.
"""

from __future__ import annotations

import os
from typing import Any

from trtls.builds.farm import local_guard

# A local instance's raylet, as trtls starts it (the embedded one and `trtls farm up`'s). By default the raylet
# prestarts one idle Python worker per CPU when the first driver connects (`prestart_worker_first_driver`), for tasks
# a farm never submits: its cells run on one host actor per node. Measured on the 16-core host (2026-12-02), the 15
# prestarted workers that no actor claimed cost 18.5 CPU-s of a cold 16-cell run — each imports Ray while the builds
# start — and then idled. Off, the raylet starts a worker only for an actor that asks for one (the node's host).
LEAN_NODE_ENV = {"RAY_prestart_worker_first_driver": "0"}


def lean_node(ray: Any, start: Any) -> Any:
    """`start()` (a `ray.init` that starts a local instance) on 127.0.0.1 only, and without the two head processes a
    farm never reads: the log monitor (it tails every worker's log files to forward them to drivers; ours say
    `log_to_driver=False`) and the autoscaler monitor (a local instance has a fixed size). Measured on this 2-core
    host: ~10 and ~1.5 ms of CPU per second of the run, for as long as the instance lives (docs/farm.md "Measured
    here"). Nor the head's API server (`dashboard.py`, started even with `include_dashboard=False` for Ray's job
    submission and state APIs, which trtls never calls): 1.7 CPU-s of a cold run on the 16-core host, and `ray.init`
    took 2.9-3.0 s without it here, 3.8-4.2 s with it. Nor the idle workers its raylet would prestart
    (LEAN_NODE_ENV). `ray.init` does not take these options (and turns a `_node_ip_address` of 127.0.0.1 into the
    machine's routable address), so they are set on the `Node` it makes; `local_guard.started_problem` checks the
    address took. And its dashboard agent minimal (`_minimal_agent`)."""
    for key, value in LEAN_NODE_ENV.items():  # read by the raylet this call starts (it inherits our environment)
        os.environ.setdefault(key, value)
    node_cls = getattr(getattr(ray, "_private", None), "node", None)
    node_cls = getattr(node_cls, "Node", None)
    original = getattr(node_cls, "__init__", None)
    if node_cls is None or original is None:
        return start()

    def init(self: Any, ray_params: Any, *args: Any, **kwargs: Any) -> None:
        if kwargs.get("head", args[0] if args else False):
            ray_params.include_log_monitor = False
            ray_params.no_monitor = True
            ray_params.node_ip_address = local_guard.LOOPBACK  # every server of the node listens on loopback only
            self.start_api_server = _no_api_server  # this node's only: `start_head_processes` calls it
        original(self, ray_params, *args, **kwargs)

    node_cls.__init__ = init
    utils: Any = getattr(getattr(ray, "_private", None), "utils", None)
    deps_check = getattr(utils, "get_dashboard_dependency_error", None)
    if deps_check is not None:
        utils.get_dashboard_dependency_error = _minimal_agent
    try:
        return start()
    finally:
        node_cls.__init__ = original
        if deps_check is not None:
            utils.get_dashboard_dependency_error = deps_check


def _minimal_agent() -> ImportError:
    """What `ray._private.utils.get_dashboard_dependency_error` answers while trtls starts a local instance: "the
    dashboard's dependencies are missing", so its raylet starts the dashboard agent `--minimal` (as with `pip install
    ray` alone) — no gRPC or HTTP server of its own, no metrics — and the driver skips importing them to find out:
    Ray imports `ray.dashboard.optional_deps` (aiohttp, grpc, prometheus, OpenTelemetry) before it starts the raylet,
    ~0.18 s of the cold start here (`ray.init` 1.45 → 1.28 s, 3 of 3 alternated runs; docs/farm.md)."""
    return ImportError("trtls starts a local farm's Ray agents minimal (no dashboard, no metrics)")


def _no_api_server(**_: Any) -> None:
    """A local instance's head without Ray's API server: its web URL stays None (as when that server fails to start,
    which Ray tolerates with `include_dashboard=False`), and the raylet is told no dashboard address."""
    return None
