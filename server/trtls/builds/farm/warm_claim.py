"""Taking a warm node worker for a cell, instead of starting a Ray actor for it.

Two kinds are warm: an idle actor of the warm local farm (`trtls farm up`; claimed for this driver, later released
to the farm, never killed), whose worker has already imported TensorRT; and an idle actor of this run's own pool
(`warm_actors.WARM`) whose cell of the same shape just built. A cell asks at submit and again while it waits for a
node; one of another shape that waits may end an idle farm actor to free the slot it needs. What happens to the
actor after the build (release, back to the pool, or killed) stays with `remote_process`, which owns it.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from trtls.builds.farm import cluster
from trtls.builds.farm.placement import Placement
from trtls.builds.farm.remote_lines import line
from trtls.builds.farm.warm_actors import WARM


async def awaited(ref: Any) -> Any:
    """A Ray object ref as a coroutine (for asyncio.wait_for / ensure_future)."""
    return await ref


def farm_fits(placement: Placement, command: list[str] | None) -> bool:
    """The run is connected to a warm farm and this cell may run on one of its actors."""
    from trtls.builds.farm import farm_actors

    opts = placement.ray_options()
    return bool(cluster.connection.get("warm")) and farm_actors.fits(opts, command, cluster.job_runtime_env)


async def claim_farm(
    job: dict[str, Any], placement: Placement, command: list[str] | None
) -> tuple[Any, dict[str, Any], dict[str, Any], bytes] | None:
    """Claim an idle node worker of the warm local farm: its worker already imported TensorRT. (actor, the claim to
    release it with, where it runs, the log line that says so), or None when none fits or none is free."""
    if not farm_fits(placement, command):
        return None
    from trtls.builds.farm import farm_actors

    driver = farm_actors.driver_token(job["build_id"])
    got = await asyncio.to_thread(farm_actors.claim, driver)
    if got is None:
        return None
    actor, name, answer = got
    where = {**answer["where"], "warm": True}
    worker = answer.get("worker") or {}
    before = worker.get("t") is not None
    note = {"actor": name, "warm": True, "claims": answer.get("claims"), "workerPid": worker.get("pid")}
    cluster.cell_note(job["build_id"], cell=placement.request.cell, workerPreloadedAtClaim=before, **note)
    if before:
        ago = time.time() - float(worker["t"])
        state = f"imported {', '.join(worker.get('modules') or []) or 'its builder'} {ago:.1f} s ago"
    else:
        state = "still importing its builder"
    msg = (
        f"trtls farm: claimed warm actor {name} of the warm local farm (actor pid "
        f"{answer['where'].get('actor_pid')}); its worker (pid {worker.get('pid')}) {state}"
    )
    return actor, driver, where, line("log", severity="INFO", msg=msg)


async def lend_farm_slot(build_id: str) -> bytes | None:
    """End an idle farm actor so that a waiting cell of another shape gets its slot: the log line, or None."""
    from trtls.builds.farm import farm_actors

    name = await asyncio.to_thread(farm_actors.lend_one, farm_actors.driver_token(build_id))
    if name:
        return line("log", severity="INFO", msg=f"trtls farm: ended idle warm actor {name} to free its slot")
    return None


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
