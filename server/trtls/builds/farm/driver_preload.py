"""The driver side of a farm run imports what it needs after `ray.init` while `ray.init` waits (driver side).

Why: between "connected" and the first cell's bundle and host, the driver imported the cell path's modules —
`host_slot`, `node_host`, `cell_runner`, `remote_process`, `farm_actors` — and, at its first actor's creation, Ray's
serialization imported pydantic's v1 layer (`ray.util.serialization_addons` → `ray._common.pydantic_compat`): ~40 ms
here, on the critical path of a cold run's start (docs/farm.md). `ray.init` spends most of its time waiting for the
node it starts or joins (the raylet waits ~0.6–1 s for its agents), with the GIL free: the imports run then.

Only trtls's own modules and pydantic's are imported here, never a Ray module that `ray.init` might be importing on
its thread (two threads importing modules that import each other could deadlock); by the time this runs, `import
ray` has loaded every Ray module those trtls modules import.
"""

from __future__ import annotations

import threading

_started = threading.Event()


def start() -> None:
    """Once per process, after `import ray` and before `ray.init` (`cluster.connect`'s `while_waiting`): the imports
    on a daemon thread."""
    if _started.is_set():
        return
    _started.set()
    threading.Thread(target=_import_all, name="trtls-farm-preload", daemon=True).start()


def _import_all() -> None:
    try:  # pydantic.v1: Ray's serialization imports it at the first actor's creation (ray._common.pydantic_compat)
        import pydantic.v1  # noqa: F401

        from trtls.builds.farm import farm_actors, host_slot, remote_process  # noqa: F401
    except Exception:  # an import that fails here fails again where it is needed, and is reported there
        return
