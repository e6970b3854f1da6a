"""The warm local farm's node workers: named actors that `trtls farm up`'s head owns and keeps alive between runs,
each with a worker process that has already imported TensorRT (node_worker.Preloaded).

- The head (`Pool`, in trtls.builds.farm.warm_head) starts `workers` of them (default: one per CPU of the farm),
  each holding one CPU — the shape of a default cell (`num_cpus = 1`, no GPU, no memory reservation) — and checks
  them every HEALTH_EVERY_S: an actor that died (a driver's escalation kills it) or whose preloaded worker died while
  idle is killed and replaced by a new one under a new name; it is never handed out.
- A run (`claim`, on the driver) connected to the warm farm takes an idle one for a cell that fits that shape: one
  round trip (`NodeWorker.claim`, refused when busy or when its worker died), then the job. At the end the driver
  `release`s it: the actor ends what is left of the build's process group and starts its next worker at once.
  A driver that dies while holding one is noticed by the actor itself (it watches the driver's pid): the build's
  worker cancels itself as if its stdin had closed, and the actor is free again.
- The farm goes down (`trtls farm down`): the head asks every actor to end its processes, then shuts Ray down.

Imported only on the remote path (lazily, when a run is connected to a warm farm) and by the head: imports Ray.
"""

from __future__ import annotations

import os
import secrets
import socket
import time
from typing import Any

NAMESPACE = "trtls-farm"
PREFIX = "trtls-warm-"
HEALTH_EVERY_S = 2.0
CLAIM_TIMEOUT_S = 10.0
LIST_EVERY_S = 1.0  # a driver re-lists the farm's actors at most this often

_listed: tuple[float, list[str]] = (0.0, [])
_handles: dict[str, Any] = {}


def fits(options: dict[str, Any], command: list[str] | None, runtime_env: dict[str, Any] | None) -> bool:
    """A cell may run on a farm actor: our worker, the default shape, no runtime_env of its own (the farm's actors
    run in the head's environment)."""
    return (
        command is None
        and not runtime_env
        and float(options.get("num_cpus", 1)) == 1.0
        and not float(options.get("num_gpus") or 0)
        and not options.get("memory")
    )


def driver_token(build_id: str) -> dict[str, Any]:
    from trtls.builds.farm.proc_tree import read

    me = read(os.getpid())
    return {
        "token": f"{build_id}-{secrets.token_hex(4)}",
        "pid": os.getpid(),
        "start": me.start if me else 0,
        "host": socket.gethostname(),
        "build": build_id,
    }


def _names() -> list[str]:
    import ray

    global _listed
    t, names = _listed
    if time.monotonic() - t > LIST_EVERY_S:
        listed = ray.util.list_named_actors(all_namespaces=True)
        names = sorted(a["name"] for a in listed if a.get("namespace") == NAMESPACE and a["name"].startswith(PREFIX))
        _listed = (time.monotonic(), names)
    return names


def claim(driver: dict[str, Any]) -> tuple[Any, str, dict[str, Any]] | None:
    """Blocking (run it on a thread): (actor, name, its answer) of an idle farm actor now held by `driver`, or None."""
    import ray

    for name in _names():
        try:
            actor = _handles.get(name) or ray.get_actor(name, namespace=NAMESPACE)
            _handles[name] = actor
            got = ray.get(actor.claim.remote(driver), timeout=CLAIM_TIMEOUT_S)
        except Exception:  # gone (the head replaces it) or too slow to answer: not this one
            _handles.pop(name, None)
            continue
        if got.get("ok"):
            return actor, name, got
    return None


def lend_one(driver: dict[str, Any]) -> str | None:
    """A cell of another shape waits for a slot that an idle farm actor holds: end that actor (the head starts a new
    one once a CPU is free again). The name of the actor ended, or None."""
    import ray

    got = claim(driver)
    if got is None:
        return None
    actor, name, _ = got
    try:
        ray.get(actor.shutdown.remote(), timeout=CLAIM_TIMEOUT_S)
    except Exception:
        pass
    ray.kill(actor, no_restart=True)
    _handles.pop(name, None)
    return name


class Pool:
    """The head's side: `size` named actors kept alive and preloaded."""

    def __init__(self, size: int, preload: str = "auto") -> None:
        self.size, self.preload = size, preload
        self.slots: dict[int, tuple[str, Any] | None] = dict.fromkeys(range(size))
        self.generation = 0
        self.replaced = 0

    def _start(self, slot: int) -> None:

        from trtls.builds.farm.node_worker import NodeWorker

        self.generation += 1
        name = f"{PREFIX}{slot}-{self.generation}"
        cls: Any = NodeWorker  # an actor class (mypy does not apply class decorators)
        actor = cls.options(name=name, namespace=NAMESPACE, num_cpus=1, max_restarts=0).remote(self.preload, name)
        self.slots[slot] = (name, actor)

    def fill(self) -> None:
        for slot in self.slots:
            self._start(slot)

    def wait_ready(self, within_s: float) -> bool:
        """Block until every actor's worker has TensorRT imported (or `within_s` passed): `farm up` returns warm."""
        import ray

        deadline = time.monotonic() + within_s
        while time.monotonic() < deadline:
            refs = [held[1].health.remote() for held in self.slots.values() if held is not None]
            try:
                if all(h["preloaded"] for h in ray.get(refs, timeout=max(1.0, deadline - time.monotonic()))):
                    return True
            except Exception:
                pass
            time.sleep(0.5)
        return False

    def check(self) -> None:
        """Replace every actor that died, or whose preloaded worker died while nobody held it."""
        import ray

        for slot, held in list(self.slots.items()):
            if held is None:
                if ray.available_resources().get("CPU", 0.0) >= 1.0:  # a lent slot is free again
                    self._start(slot)
                continue
            name, actor = held
            try:
                h = ray.get(actor.health.remote(), timeout=30.0)
            except ray.exceptions.GetTimeoutError:
                continue  # still starting, or the machine is loaded: look again next time
            except Exception:
                h = None  # dead (killed by a driver's escalation, or lent)
            if h is not None and (h["claimed"] or h["worker"] == "alive"):
                continue
            if h is not None:
                try:
                    ray.kill(actor, no_restart=True)
                except Exception:
                    pass
            self.replaced += 1
            self.slots[slot] = None
            if ray.available_resources().get("CPU", 0.0) >= 1.0:
                self._start(slot)

    def shutdown(self) -> None:
        import ray

        refs = [held[1].shutdown.remote() for held in self.slots.values() if held is not None]
        try:
            ray.wait(refs, num_returns=len(refs), timeout=10.0)
        except Exception:
            pass
