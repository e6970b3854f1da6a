"""What a remote cell's failed transport was: its node lost, its actor dead, or the transport itself (the relay in
remote_process.py records it as `lost`; the supervisor ends the build `killed` with it)."""

from __future__ import annotations

import asyncio
import signal
import time

from trtls.builds.farm import cluster

KILLED = int(signal.SIGKILL)
NODE_DEATH_NOTICE_S = 30.0  # how long a failed actor's node has to be declared dead before we call it a node loss


async def loss_of(exc: Exception, node: str | None, hostname: str | None) -> tuple[str, bool, int]:
    """(why the cell was lost, whether its actor died: a shared host that died is not reused, the exit code the cell
    ends with: -SIGKILL when its node or actor died under it, 1 when the actor's method raised — a failure there,
    such as a write the node refused, not a death)."""
    import ray

    if isinstance(exc, ray.exceptions.RayTaskError):  # the actor lives; its method raised: say why, at once
        cause = getattr(exc, "cause", None)  # (its node is not waited for: that took NODE_DEATH_NOTICE_S)
        why = f"{type(cause).__name__}: {cause}" if cause is not None else str(exc).strip().splitlines()[-1]
        return f"the cell failed on {hostname or 'its node'}: {why}", False, 1
    died = isinstance(exc, ray.exceptions.RayError)  # ActorDied, ActorUnavailable, NodeDied, WorkerCrashed …
    actor_dead = isinstance(exc, ray.exceptions.RayActorError)
    if died and node and await node_gone(node):
        return f"node lost: {hostname} ({node[:12]}) died during the build", actor_dead, -KILLED
    if died:
        return f"the build's actor died on {hostname or 'its node'}: {type(exc).__name__}", actor_dead, -KILLED
    return f"remote transport error: {type(exc).__name__}: {exc}", actor_dead, -KILLED


async def node_gone(node_id: str, within_s: float = NODE_DEATH_NOTICE_S) -> bool:
    """The actor failed: was it its node? The cluster may take a few seconds to declare a node dead."""
    deadline = time.monotonic() + within_s
    while True:
        if not await asyncio.to_thread(cluster.node_alive, node_id):
            return True
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.25)
