"""Taking a warm node worker for a cell that holds a GPU (an actor of its own: node_worker.NodeWorker), instead of
starting a Ray actor for it: an idle actor of this run's pool (`warm_actors.WARM`) whose cell of the same shape just
built. CPU-only cells need none of this: they run on their node's shared host (node_host), started once per node, or
the warm farm's (`trtls farm up`), whose workers already imported TensorRT. What happens to the actor after the build
(back to the pool, or killed) stays with `remote_process`, which owns it.
"""

from __future__ import annotations

import asyncio
from typing import Any

from trtls.builds.farm.warm_actors import WARM


async def awaited(ref: Any) -> Any:
    """A Ray object ref as a coroutine (for asyncio.wait_for / ensure_future)."""
    return await ref


async def take_warm(shape: str) -> tuple[Any, dict[str, Any]] | None:
    """Reuse an idle node worker of this run's pool of this shape (checked alive with one round trip): (actor, where
    it runs), or None."""
    while (warm := WARM.take(shape)) is not None:
        actor, where = warm
        try:
            await asyncio.wait_for(awaited(actor.where.remote()), 5.0)
        except Exception:
            continue  # it died while idle (its node left): try another, or start a new one
        return actor, {**where, "warm": True}
    return None
