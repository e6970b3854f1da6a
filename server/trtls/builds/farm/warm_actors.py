"""Warm node workers: an actor whose cell built is kept for `keep_warm_s` and reused by the next cell of the same
shape (labels and resources), so a warm cluster starts a cell without starting a Ray worker process (~1–2 s here).

An idle actor still holds its slot (its CPUs/GPU). So that it never starves a cell of another shape, a cell that
has waited for a node for DRAIN_AFTER_S releases every idle actor; and only actors whose build ended `built` come
back (a cancelled, forced or lost cell's actor is killed). A dead driver takes its warm actors with it (Ray ends
the actors a driver owns).
"""

from __future__ import annotations

import asyncio
from typing import Any

from trtls.fs import kill_ray_actor

DRAIN_AFTER_S = 0.5


class WarmActors:
    def __init__(self) -> None:
        self.idle: dict[str, list[tuple[Any, dict[str, Any], asyncio.TimerHandle | None]]] = {}
        self.waiting: dict[str, int] = {}  # shape → cells of this process waiting for a node

    def take(self, key: str) -> tuple[Any, dict[str, Any]] | None:
        entries = self.idle.get(key) or []
        if not entries:
            return None
        actor, where, timer = entries.pop()
        if timer is not None:
            timer.cancel()
        return actor, where

    def put(self, key: str, actor: Any, where: dict[str, Any], keep_s: float) -> None:
        if keep_s <= 0:
            kill_actor(actor)
            return
        timer = asyncio.get_running_loop().call_later(keep_s, self._expire, key, actor)
        self.idle.setdefault(key, []).append((actor, where, timer))

    def _expire(self, key: str, actor: Any) -> None:
        entries = self.idle.get(key, [])
        for i, (a, _, _) in enumerate(entries):
            if a is actor:
                entries.pop(i)
                kill_actor(actor)
                return

    def drain(self) -> int:
        """Release the idle actors that no waiting cell of their own shape is about to take (their slots may be
        what a waiting cell of another shape needs)."""
        n = 0
        for shape in [s for s in self.idle if not self.waiting.get(s)]:
            for actor, _, timer in self.idle.pop(shape):
                if timer is not None:
                    timer.cancel()
                kill_actor(actor)
                n += 1
        return n

    def count(self) -> int:
        return sum(len(v) for v in self.idle.values())


def kill_actor(actor: Any) -> None:
    """ray.kill off the event loop: it is a call to the cluster's control store, which a loaded head answers in
    seconds — never on the loop that also answers the editor's hovers."""
    try:
        asyncio.get_running_loop().run_in_executor(None, _kill_now, actor)
    except RuntimeError:  # no loop in this thread
        _kill_now(actor)


def _kill_now(actor: Any) -> None:
    import ray

    try:
        kill_ray_actor(ray, actor)
    except Exception:
        pass


WARM = WarmActors()  # one per process, like its Ray connection
