"""The environment a farm cell's builder starts with: the node's own, not the thread limit Ray gives its actors.

Ray sets `OMP_NUM_THREADS` in every worker process whose environment has none (`ray._private.utils.
set_omp_num_threads_if_unset`: the CPUs the task holds, and 1 for an actor that holds none, as the node host does),
and a build worker the node host spawns would inherit it. A build by hand on that machine does not have it, and
TensorRT-RTX's builder runs slower with it: 16 `large` builds side by side on the 16-core host, alternated in one
run (2026-12-04, `benchmarks/results/farm-omp-threads-16core-2026-12-04.txt`), took 3–15 % more wall and 4–13 % more
CPU with `OMP_NUM_THREADS=1` — the farm's whole gap to 16 builds by hand was of that size. So the worker gets the
environment of the node's raylet (this actor's parent, which Ray started with the node's environment) for that key:
unset when the node had it unset, the node's value when it had one. Anything else Ray set is left as it is.

Runs in the node host actor (and the node worker actor), never in the driver.
"""

from __future__ import annotations

import os
import subprocess
import sys

from trtls.fs import read_bytes

RAY_SET = ("OMP_NUM_THREADS",)  # what Ray sets in an actor's process when the node's environment did not


def _node_environment(pid: int) -> dict[str, str] | None:
    """The environment `pid` (the raylet) started with, or None when it cannot be read or is not a raylet's."""
    try:
        cmdline = read_bytes(f"/proc/{pid}/cmdline", limit=None, follow=True)
        if b"raylet" not in cmdline.split(b"\0")[0]:
            return None
        raw = read_bytes(f"/proc/{pid}/environ", limit=None, follow=True)
    except OSError:
        return None
    pairs = (entry.partition(b"=") for entry in raw.split(b"\0") if entry)
    return {k.decode(errors="replace"): v.decode(errors="replace") for k, _, v in pairs}


def builder_environment() -> dict[str, str] | None:
    """The environment for a build worker spawned here: None (inherit this process's) when nothing differs from
    the node's, or this process's with Ray's own `OMP_NUM_THREADS` taken back to the node's."""
    if not any(key in os.environ for key in RAY_SET):
        return None
    node = _node_environment(os.getppid())
    if node is None:
        return None
    env = dict(os.environ)
    for key in RAY_SET:
        if key in node:
            env[key] = node[key]
        else:
            env.pop(key, None)
    return None if env == dict(os.environ) else env


def spawn_worker(args: list[str]) -> subprocess.Popen:
    """Our worker (no args), or an external worker command when `args` is one, in the builder's environment."""
    return subprocess.Popen(
        args or [sys.executable, "-m", "trtls.builds.worker"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,  # its own process group: escalation kills the group
        env=builder_environment(),
    )
