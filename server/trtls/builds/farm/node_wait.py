"""A remote cell's wait for a node, between its `queued` and `placed` lines (driver side: the supervisor's process,
beside `remote_process`'s relay, which owns the cell's actor and its stream).

A CPU-only cell waits for Ray to reserve its bundle (`host_slot.HostSlot.reserve`); a cell that holds a GPU waits for
its own new actor to land on a node (`wait_for_node`), or takes a warm actor of its shape that came free meanwhile
(`warm_claim`). Either wait ends early on a cancel (a control line written before any worker exists) or at
`queue_timeout_s`; what the stream then says is `cancelled_lines` (the cell ends cancelled) or `timeout_lines`
(TRT231: the cell fails).
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from trtls.builds.farm.remote_lines import line
from trtls.builds.farm.warm_actors import DRAIN_AFTER_S, WARM, kill_actor
from trtls.builds.farm.warm_claim import awaited, take_warm

WAIT_TICK_S = 0.25  # a waiting cell looks for a warm worker of its shape this often


def left_s(t_submit: int, queue_timeout_s: float) -> float:
    """What is left of the cell's queue timeout (submitted at `t_submit`, monotonic ns)."""
    return t_submit / 1e9 + queue_timeout_s - time.monotonic_ns() / 1e9


async def wait_for_node(
    actor: Any, shape: str, cancelled: asyncio.Event, t_submit: int, queue_timeout_s: float
) -> tuple[Any, dict[str, Any]] | None:
    """(the cell's actor, where it runs) once a node holds the cell: its new `actor`, or a warm one of its `shape`
    that came free (the new one is then withdrawn); None when a cancel or the queue timeout ended the wait (the
    caller still holds `actor`)."""
    where = asyncio.ensure_future(awaited(actor.where.remote()))
    while True:
        # woken by the node, a cancel or the queue deadline; every WAIT_TICK_S only to look for a warm worker
        # (a 50 ms poll per waiting cell was the driver's CPU while 14 of 16 cells waited)
        left = left_s(t_submit, queue_timeout_s)
        waiter = asyncio.ensure_future(cancelled.wait())
        done, _ = await asyncio.wait(
            [where, waiter], timeout=max(0.0, min(WAIT_TICK_S, left)), return_when=asyncio.FIRST_COMPLETED
        )
        waiter.cancel()
        done.discard(waiter)
        if done:
            return actor, where.result()
        if cancelled.is_set() or time.monotonic_ns() - t_submit > queue_timeout_s * 1e9:
            where.cancel()
            return None
        if WARM.count() and time.monotonic_ns() - t_submit > DRAIN_AFTER_S * 1e9:
            got = await take_warm(shape)  # a cell of this shape just finished: take its worker
            if got is not None:
                where.cancel()
                kill_actor(actor)  # withdraw the request for a new one
                return got
            WARM.drain()  # idle workers of other shapes may hold the slot this cell needs


def cancelled_lines(cancel_line: str | None, t_submit: int, doing: str = "while waiting for a node") -> list[bytes]:
    """A cancel ended the wait (or the cell's opening on its node: `doing`): acknowledged, and the cell finished
    cancelled with nothing to clean up."""
    ctl = json.loads(cancel_line or "{}")
    acknowledged = line("cancel_acknowledged", source=ctl.get("source", "api"), t_request_ns=ctl.get("t_request_ns"))
    return [
        acknowledged,
        line(
            "build_finished",
            outcome="cancelled",
            cleanup_status="not_needed",
            t_cleanup_ns=time.monotonic_ns(),
            notes=[f"cancelled {doing} ({(time.monotonic_ns() - t_submit) / 1e9:.1f} s)"],
        ),
    ]


def timeout_lines(queue_timeout_s: float, needs: dict[str, Any]) -> list[bytes]:
    """No node was free within the queue timeout: TRT231, and the cell failed (`needs`: its Ray options)."""
    msg = f"TRT231 no node was free for this cell within queue_timeout_s = {queue_timeout_s:g} s (it needs {needs})"
    return [
        line("log", severity="ERROR", msg=msg),
        line("build_finished", outcome="failed", error=msg, cleanup_status="not_needed"),
    ]
