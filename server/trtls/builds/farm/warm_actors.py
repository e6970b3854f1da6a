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

DRAIN_AFTER_S = 0.5


class WarmActors:
    def __init__(self) -> None:
        self.idle: dict[str, list[tuple[Any, dict[str, Any], asyncio.TimerHandle | None]]] = {}

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
            _kill(actor)
            return
        timer = asyncio.get_running_loop().call_later(keep_s, self._expire, key, actor)
        self.idle.setdefault(key, []).append((actor, where, timer))

    def _expire(self, key: str, actor: Any) -> None:
        entries = self.idle.get(key, [])
        for i, (a, _, _) in enumerate(entries):
            if a is actor:
                entries.pop(i)
                _kill(actor)
                return

    def drain(self) -> int:
        """Release every idle actor (their slots may be what a waiting cell needs)."""
        n = 0
        for entries in self.idle.values():
            for actor, _, timer in entries:
                if timer is not None:
                    timer.cancel()
                _kill(actor)
                n += 1
        self.idle.clear()
        return n

    def count(self) -> int:
        return sum(len(v) for v in self.idle.values())


def _kill(actor: Any) -> None:
    import ray

    try:
        ray.kill(actor, no_restart=True)
    except Exception:
        pass


WARM = WarmActors()  # one per process, like its Ray connection
