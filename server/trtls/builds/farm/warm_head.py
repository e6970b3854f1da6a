"""The warm local farm's head process (`trtls farm up` starts it; docs/farm.md "A warm local farm").

It starts an embedded Ray instance with the farm's quiet driver settings and its node host (one named actor that
runs every cell of a connected run, with N workers that have TensorRT already imported: trtls.builds.farm.farm_actors),
writes the state file that runs discover it by (trtls.builds.farm.warm_farm), and keeps the host healthy; SIGTERM or
SIGINT end the host's processes, shut the instance down — exactly the raylet, GCS and workers it started — end
whatever of those is left and remove the state and token files. Imports Ray: only run as `python -m` by `trtls farm
up`, which passes the farm's token file (RAY_AUTH_MODE=token, RAY_AUTH_TOKEN_PATH) and the head's nonce in its
environment. The instance listens on 127.0.0.1 only (`local_guard`); one that does not, or does not authenticate,
is shut down and the head exits 1 (TRT237 in its log).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import threading
import time

from trtls.builds.farm import local_guard, node_scratch, proc_tree
from trtls.builds.farm.cluster import QUIET_DRIVER
from trtls.builds.farm.lean_node import lean_node
from trtls.builds.farm.warm_farm import WarmHead, forget, write_state
from trtls.fs import parse_json
from trtls.fs.kill import NONCE_ENV, process_start_id
from trtls.fs.lineage import witness

READY_WITHIN_S = 300.0  # how long `farm up` waits for its workers to import TensorRT (a loaded machine: tens of s)


def main() -> int:
    ap = argparse.ArgumentParser(prog="python -m trtls.builds.farm.warm_head")
    ap.add_argument("--num-cpus", type=int, required=True)
    ap.add_argument("--labels", default="{}", help="the node's labels as a JSON object")
    ap.add_argument("--workers", type=int, default=None, help="preloaded workers to keep (default: --num-cpus)")
    args = ap.parse_args()
    labels = parse_json(args.labels)
    problem = local_guard.version_problem(local_guard.installed_ray())
    if problem is not None or os.environ.get("RAY_AUTH_MODE") != "token":
        print(f"trtls farm: TRT237 {problem or 'started without its token (RAY_AUTH_MODE=token)'}", flush=True)
        return 1
    nonce = os.environ.pop(NONCE_ENV, "")  # /proc/<pid>/environ keeps it (the proof); our children do not inherit it
    for key, value in QUIET_DRIVER.items():
        os.environ.setdefault(key, value)
    os.environ.setdefault("RAY_raylet_start_wait_time_s", "180")
    stop = threading.Event()
    on_stop = lambda *_: stop.set()  # noqa: E731
    signal.signal(signal.SIGTERM, on_stop)
    signal.signal(signal.SIGINT, on_stop)

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
    # ray.init put Ray's own SIGTERM handler in place of ours (absl's failure handler: it logs a stack and the head
    # died there, so `trtls farm down` ended it before any of its cleanup below ran: its node's scratch was left)
    signal.signal(signal.SIGTERM, on_stop)
    problem = local_guard.started_problem(ray)
    if problem is not None:
        print(f"trtls farm: TRT237 {problem}", flush=True)
        _shut_down(ray)
        return 1
    from trtls.builds.farm.farm_actors import HEALTH_EVERY_S, FarmHost

    workers = args.num_cpus if args.workers is None else max(0, min(args.workers, args.num_cpus))
    pool = FarmHost(workers, args.num_cpus)
    pool.start()
    ready = pool.wait_ready(READY_WITHIN_S)
    ctx = ray.get_runtime_context()
    node_id = ctx.get_node_id()  # the head's own node: its scratch goes when the farm stops
    session = getattr(ray._private.worker, "_global_node", None)
    head = WarmHead(
        ctx.gcs_address,
        os.getpid(),
        args.num_cpus,
        labels,
        time.time(),
        str(getattr(session, "get_session_dir_path", lambda: "")()),
        "token",  # checked above: RAY_AUTH_MODE=token, and Ray says it authenticates
        workers,
        os.environ["RAY_AUTH_TOKEN_PATH"],
        process_start_id(os.getpid()) or "",
        nonce,
    )
    write_state(head)
    print(f"trtls farm: {head.describe()}" + ("" if ready else " (not every worker preloaded yet)"), flush=True)
    while not stop.wait(HEALTH_EVERY_S):
        try:
            pool.check()
        except Exception as exc:  # a loaded head answering late: look again next time
            print(f"trtls farm: health check failed: {type(exc).__name__}: {exc}", flush=True)
    forget(head)  # the state and token files, while they are this head's
    pool.shutdown()  # the host's preloaded workers live in their own sessions: ended by the host first
    _shut_down(ray)
    node_scratch.remove(node_id)  # the node has ended: its ONNX copies and job folders go with it
    return 0


def _shut_down(ray: object) -> None:
    """Shut the instance down and end whatever of it outlived that (agents, a worker mid-import)."""
    ours = witness([os.getpid()])
    ray.shutdown()  # type: ignore[attr-defined]
    proc_tree.end(ours)


if __name__ == "__main__":
    raise SystemExit(main())
