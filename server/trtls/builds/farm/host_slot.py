"""A CPU-only cell's place on its node's shared host, as the driver holds it (driver side: the supervisor's process,
on the remote path; the host itself, `node_host.NodeHost`, is an actor on the node).

A cell's way (`HostSlot`): a placement group `[{"CPU": num_cpus, "memory": …}]` with the cell's labels as
`bundle_label_selector` — Ray queues it until a node has the room, exactly as it queued a cell's own actor; once it
is ready (bounded by queue_timeout_s) the bundle's node is read from the placement-group table, and the cell runs on
that node's shared host, keyed by a cell id (`CellHandle`: the host's methods bound to that id, which the relay calls
as its actor). Whatever the end (built, failed, cancelled, lost, the driver's exit: Ray removes a job's placement
groups with it), the group is removed and the cell closed.

`HOSTS` is this driver's view of the hosts: one per node — its own (`node_host.new_host`, made as the run's cells are
placed, ended LINGER_S after its last cell), or, connected to the warm local farm, the farm's named host there.

Imported only on the remote path (a recipe with `[cluster]`): this module imports Ray.
"""

from __future__ import annotations

import asyncio
import secrets
import threading
from typing import Any

import ray

from trtls.builds.farm.cell_runner import driver_token
from trtls.builds.farm.cluster import mark
from trtls.builds.farm.node_host import NAMESPACE, host_name, new_host
from trtls.builds.farm.placement import Placement
from trtls.builds.farm.warm_actors import kill_actor
from trtls.core.display import ago

LINGER_S = 5.0  # a driver's host with no cell waits this long (at least keep_warm_s) for the next before it ends
WARM_UP_TIMEOUT_S = 10.0  # a farm host that has not answered by then is left to the cell's own call


def shares_host(placement: Placement) -> bool:
    """A CPU-only cell runs on its node's shared host. One that holds a GPU keeps an actor of its own
    (node_worker.NodeWorker): Ray sets CUDA_VISIBLE_DEVICES for the actor that holds the GPU, and only then."""
    return not placement.num_gpus and placement.request.num_cpus > 0


class _Bound:
    def __init__(self, method: Any, cell_id: str) -> None:
        self.method, self.cell_id = method, cell_id

    def remote(self, *args: Any) -> Any:
        return self.method.remote(self.cell_id, *args)


class CellHandle:
    """What the relay calls as its actor: every method of the host, bound to one cell id."""

    def __init__(self, host: Any, cell_id: str) -> None:
        self.host, self.cell_id = host, cell_id

    def __getattr__(self, name: str) -> _Bound:
        return _Bound(getattr(self.host, name), self.cell_id)


class Hosts:
    """This driver's view of the hosts: one per node (its own, or the warm farm's), counted by the cells using it.
    Process-global like the connection; a timer thread (not an event loop) ends an own host left without cells."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.own: dict[str, list[Any]] = {}  # node id → [actor, cells using it, linger timer]
        self.farm: dict[str, Any] = {}  # node id → the warm farm's host there
        self.cpus: dict[str, float] = {}  # node id → its CPUs, as last asked of the cluster (`_new_own`)

    def acquire(self, node_id: str, farm_ok: bool) -> tuple[Any, str | None]:
        """Blocking: (the host for a cell on `node_id`, the farm host's name or None)."""
        if farm_ok:
            name = host_name(node_id)
            actor = self.farm.get(node_id)
            if actor is None:
                try:
                    actor = self.farm[node_id] = ray.get_actor(name, namespace=NAMESPACE)
                except ValueError:
                    actor = None
            if actor is not None:
                return actor, name
        with self.lock:
            entry = self.own.get(node_id) or self._new_own(node_id)
            if entry[2] is not None:
                entry[2].cancel()
                entry[2] = None
            entry[1] += 1
            return entry[0], None

    def warm_up(self, node_ids: list[str]) -> None:
        """Blocking (a daemon thread, started as the run's cells are placed): the warm farm's host on each node looked
        up and answered once, so a cell's first call to it does not also pay the name's lookup and this process's
        first connection to the actor — it overlaps the cells' placement groups instead (warm fixed cost, issue 31).
        A node with no farm host (or one that does not answer) is left to `acquire`, which says why."""
        for node_id in node_ids:
            if node_id in self.farm:
                continue
            try:
                actor = ray.get_actor(host_name(node_id), namespace=NAMESPACE)
                ray.get(actor.where.remote(), timeout=WARM_UP_TIMEOUT_S)
            except Exception:
                continue
            self.farm.setdefault(node_id, actor)

    def start_own(self, node_ids: list[str], linger_s: float) -> None:
        """Blocking (a daemon thread, started as the run's cells are placed on an instance this driver did not find
        warm): this driver's host made on each node now, so Ray starts its worker process (a Python that imports Ray,
        ~0.5 s on the 16-core host) while the cells' bundles are reserved, not after the first one is (cold fixed
        cost, issue 31: `reserved` then `actorReady` had run one after the other). A host no cell claims lingers as
        one its last cell left (`release`: the farm's keep_warm_s, at least LINGER_S) — one rule for every own host, so
        a cell whose bundle waits that long behind other work still finds the host made for it."""
        try:
            cpus = _node_cpus()  # asked once for every node (a cluster-wide call)
        except Exception:  # the cluster refused: each cell's own `acquire` says why
            return
        with self.lock:
            self.cpus.update(cpus)
        for node_id in node_ids:
            with self.lock:
                if node_id in self.own:
                    continue
                try:
                    entry = self._new_own(node_id)
                except Exception:  # the node went, or the cluster refused: the cell's own `acquire` says why
                    continue
                entry[2] = self._linger(node_id, entry[0], linger_s)

    def _new_own(self, node_id: str) -> list[Any]:
        """Under self.lock: a new host of this driver's on `node_id`, claimed by no cell yet. The cluster is asked for
        the nodes' CPUs (a cluster-wide call) only for a node this driver has not seen yet: a node's CPUs do not change
        while it lives, and a node that joined later is not in the last answer."""
        if node_id not in self.cpus:
            self.cpus.update(_node_cpus())
        entry = self.own[node_id] = [new_host(node_id, self.cpus.get(node_id, 1.0)), 0, None]
        return entry

    def _linger(self, node_id: str, actor: Any, linger_s: float) -> threading.Timer:
        timer = threading.Timer(max(LINGER_S, linger_s), self._expire, args=(node_id, actor))
        timer.daemon = True
        timer.start()
        return timer

    def release(self, node_id: str, actor: Any, linger_s: float, dead: bool = False) -> None:
        with self.lock:
            if self.farm.get(node_id) is actor:
                if dead:
                    self.farm.pop(node_id, None)
                return
            entry = self.own.get(node_id)
            if entry is None or entry[0] is not actor:
                return
            entry[1] -= 1
            if dead:
                self.own.pop(node_id, None)
                kill_actor(actor)
            elif entry[1] <= 0:
                entry[2] = self._linger(node_id, actor, linger_s)

    def _expire(self, node_id: str, actor: Any) -> None:
        with self.lock:
            entry = self.own.get(node_id)
            if entry is None or entry[0] is not actor or entry[1] > 0:
                return
            self.own.pop(node_id)
        kill_actor(actor)


HOSTS = Hosts()


def _node_cpus() -> dict[str, float]:
    """Each node's CPUs, as the cluster states them (node id → count; 1 where it states none)."""
    return {n["NodeID"]: n["Resources"].get("CPU", 1.0) for n in ray.nodes()}


def _remove_when_made(made: Any) -> None:
    if not made.cancelled() and made.exception() is None:
        threading.Thread(target=ray.util.remove_placement_group, args=(made.result(),), daemon=True).start()


async def _awaited(ref: Any) -> Any:
    return await ref


class HostSlot:
    """One cell's reservation (a placement group) and its place on its node's host."""

    def __init__(self, placement: Placement, build_id: str) -> None:
        self.placement = placement
        self.cell_id = f"{build_id}-{secrets.token_hex(3)}"
        self.pg: Any = None
        self.node_id: str | None = None
        self.host: Any = None
        self.farm_name: str | None = None
        self.handle: CellHandle | None = None

    def bundle(self) -> dict[str, float]:
        req = self.placement.request
        out = {"CPU": float(req.num_cpus)}
        if req.memory_mib:
            out["memory"] = float(req.memory_mib * 1024 * 1024)
        return out

    async def reserve(self, cancelled: asyncio.Event, timeout_s: float) -> bool:
        """True once Ray reserved the cell's bundle on a node; False when a cancel or the timeout came first."""
        labels = dict(self.placement.request.labels)
        made = asyncio.get_running_loop().run_in_executor(
            None,
            lambda: ray.util.placement_group(
                [self.bundle()], strategy="PACK", bundle_label_selector=[labels] if labels else None
            ),
        )
        try:
            self.pg = await asyncio.shield(made)
        except asyncio.CancelledError:  # stopped while the group was being made: it is removed once it exists
            made.add_done_callback(_remove_when_made)
            raise
        ready = asyncio.ensure_future(_awaited(self.pg.ready()))
        waiter = asyncio.ensure_future(cancelled.wait())
        done, _ = await asyncio.wait([ready, waiter], timeout=max(0.0, timeout_s), return_when=asyncio.FIRST_COMPLETED)
        waiter.cancel()
        if ready not in done:
            ready.cancel()
            return False
        table = await asyncio.to_thread(ray.util.placement_group_table, self.pg)
        self.node_id = str(table["bundles_to_node_id"][0])
        mark("reserved")
        return True

    async def open_cell(
        self,
        job: dict[str, Any],
        command: list[str] | None,
        farm_ok: bool,
        cancelled: asyncio.Event,
        store: dict[str, Any] | None = None,
    ) -> dict[str, Any] | None:
        """The cell on its node's host: {"where", "worker", "preloaded", "served", "cells", "storeHit"}; None when a
        cancel came while the host was found (the cell is not opened). From `handle`'s being set, a cancel goes to the
        host too (`remote_process`): `open` looks the key up there, and the cell's stop cuts that lookup."""
        assert self.node_id is not None
        self.host, self.farm_name = await asyncio.to_thread(HOSTS.acquire, self.node_id, farm_ok)
        self.handle = CellHandle(self.host, self.cell_id)
        if cancelled.is_set():
            return None
        module = None if command else str(job.get("builder_module") or "auto")
        driver = driver_token(job["build_id"]) if self.farm_name else None
        return await _awaited(self.host.open.remote(self.cell_id, module, driver, store))

    def describe(self, answer: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], str]:
        """From the host's answer to `open`: where the cell runs (the `placed` event; `warm`: no actor started for
        it), the matrix summary's note on it, and a log line when it runs on the warm farm (else "")."""
        worker = answer.get("worker") or {}
        where = {**answer["where"], "warm": bool(answer["preloaded"]) or answer["served"] > 1}
        note: dict[str, Any] = {
            "actor": self.farm_name or "host",
            "actorPid": where.get("actor_pid"),
            "warm": where["warm"],
            "claims": answer["served"],
            "workerPid": worker.get("pid"),
        }
        if not self.farm_name or answer.get("storeHit"):  # a hit: no worker to speak of (the node's own line says it)
            return where, note, ""
        note["workerPreloadedAtClaim"] = worker.get("t") is not None
        state = "still importing its builder"
        if not answer["preloaded"]:
            state = "started for this cell (no idle preloaded worker)"
        elif worker.get("t") is not None:
            mods = ", ".join(worker.get("modules") or []) or "its builder"
            state = f"imported {mods} {ago(float(worker['t']))}"
        msg = (
            f"trtls farm: cell on the warm local farm's node host {self.farm_name} (actor pid "
            f"{where.get('actor_pid')}); its worker (pid {worker.get('pid')}) {state}"
        )
        return where, note, msg

    def end(self, linger_s: float, dead: bool = False) -> None:
        """Every end: the cell closed on its host (its group ended), the host released, the bundle freed. Blocking
        calls to the cluster go to a thread, never the event loop."""
        host, pg, self.host, self.pg = self.host, self.pg, None, None
        if host is None and pg is None:
            return

        def run() -> None:
            if host is not None:
                if not dead:
                    try:
                        host.close.remote(self.cell_id)
                    except Exception:
                        pass
                assert self.node_id is not None
                HOSTS.release(self.node_id, host, linger_s, dead)
            if pg is not None:
                try:
                    ray.util.remove_placement_group(pg)
                except Exception:
                    pass

        try:
            asyncio.get_running_loop().run_in_executor(None, run)
        except RuntimeError:
            run()
