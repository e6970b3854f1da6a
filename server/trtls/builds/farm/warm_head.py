"""The warm local farm's head process (`trtls farm up` starts it; docs/farm.md "A warm local farm").

It starts an embedded Ray instance with the farm's quiet driver settings, writes the state file that runs discover
it by (trtls.builds.farm.warm_farm), and waits; SIGTERM or SIGINT shut the instance down — exactly the raylet,
GCS and workers it started — and remove the state file. Imports Ray: only run as `python -m` by `trtls farm up`.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import threading
import time

from trtls.builds.farm.cluster import QUIET_DRIVER
from trtls.builds.farm.warm_farm import WarmHead, read_state, state_path, write_state


def main() -> int:
    ap = argparse.ArgumentParser(prog="python -m trtls.builds.farm.warm_head")
    ap.add_argument("--num-cpus", type=int, required=True)
    ap.add_argument("--labels", default="{}", help="the node's labels as a JSON object")
    args = ap.parse_args()
    labels = json.loads(args.labels)
    for key, value in QUIET_DRIVER.items():
        os.environ.setdefault(key, value)
    os.environ.setdefault("RAY_raylet_start_wait_time_s", "180")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())

    import ray

    ray.init(
        address="local",
        num_cpus=args.num_cpus,
        labels=labels or None,
        include_dashboard=False,
        log_to_driver=False,
        logging_level=logging.WARNING,
        configure_logging=False,
    )
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
    )
    write_state(head)
    print(f"trtls farm: {head.describe()}", flush=True)
    while not stop.wait(1.0):
        pass
    current = read_state()
    if current is not None and current.pid == os.getpid():
        state_path().unlink(missing_ok=True)
    ray.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
