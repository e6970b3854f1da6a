"""The warm local farm's head process (`trtls farm up` starts it; docs/farm.md "A warm local farm").

It starts an embedded Ray instance with the farm's quiet driver settings and its node host (one named actor that
runs every cell of a connected run, with N workers that have TensorRT already imported: trtls.builds.farm.farm_actors),
writes the state file that runs discover it by (trtls.builds.farm.warm_farm), and keeps the host healthy; SIGTERM or
SIGINT end the host's processes, shut the instance down — exactly the raylet, GCS and workers it started — end
whatever of those is left and remove the state file. Imports Ray: only run as `python -m` by `trtls farm up`.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import threading
import time

from trtls.builds.farm import proc_tree
from trtls.builds.farm.cluster import QUIET_DRIVER, lean_node
from trtls.builds.farm.warm_farm import WarmHead, read_state, state_path, write_state

READY_WITHIN_S = 300.0  # how long `farm up` waits for its workers to import TensorRT (a loaded machine: tens of s)


def main() -> int:
    ap = argparse.ArgumentParser(prog="python -m trtls.builds.farm.warm_head")
    ap.add_argument("--num-cpus", type=int, required=True)
    ap.add_argument("--labels", default="{}", help="the node's labels as a JSON object")
    ap.add_argument("--workers", type=int, default=None, help="preloaded workers to keep (default: --num-cpus)")
    args = ap.parse_args()
    labels = json.loads(args.labels)
    for key, value in QUIET_DRIVER.items():
        os.environ.setdefault(key, value)
    os.environ.setdefault("RAY_raylet_start_wait_time_s", "180")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())

    import ray

    lean_node(  # no log monitor, no autoscaler monitor: CPU every second the farm is up, read by nobody
        ray,
        lambda: ray.init(
            address="local",
            num_cpus=args.num_cpus,
            labels=labels or None,
            include_dashboard=False,
            log_to_driver=False,
            logging_level=logging.WARNING,
            configure_logging=False,
        ),
    )
    from trtls.builds.farm.farm_actors import HEALTH_EVERY_S, FarmHost

    workers = args.num_cpus if args.workers is None else max(0, min(args.workers, args.num_cpus))
    pool = FarmHost(workers, args.num_cpus)
    pool.start()
    ready = pool.wait_ready(READY_WITHIN_S)
    ctx = ray.get_runtime_context()
    session = getattr(ray._private.worker, "_global_node", None)
    head = WarmHead(
        ctx.gcs_address,
        os.getpid(),
        args.num_cpus,
        labels,
        time.time(),
        str(getattr(session, "get_session_dir_path", lambda: "")()),
        os.environ.get("RAY_AUTH_MODE", ""),  # a new local instance turns token auth on by default (Ray ≥ 2.5x)
        workers,
    )
    write_state(head)
    print(f"trtls farm: {head.describe()}" + ("" if ready else " (not every worker preloaded yet)"), flush=True)
    while not stop.wait(HEALTH_EVERY_S):
        try:
            pool.check()
        except Exception as exc:  # a loaded head answering late: look again next time
            print(f"trtls farm: health check failed: {type(exc).__name__}: {exc}", flush=True)
    current = read_state()
    if current is not None and current.pid == os.getpid():
        state_path().unlink(missing_ok=True)
    pool.shutdown()  # the host's preloaded workers live in their own sessions: ended by the host first
    ours = proc_tree.descendants(os.getpid())
    ray.shutdown()
    proc_tree.end(ours)  # anything of this instance that outlived its shutdown (agents, a worker mid-import)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
