"""One node-worker actor per node runs every CPU-only cell placed on that node; Ray still reserves and queues each
cell's CPUs (memory, labels) with a placement group of one bundle.

Why: a Ray actor's main thread wakes every 10 ms for Ray's signal check (`CoreWorker.CheckSignal`, hard-coded), ~6 ms
of CPU per second per actor whether it does anything or not — at 16 cells on 2 cores, two thirds of the farm's
overhead CPU was one actor per running cell (docs/farm.md "Where the overhead CPU goes"). Now a node has one.

A cell's way (driver side, `HostSlot`): a placement group `[{"CPU": num_cpus, "memory": …}]` with the cell's labels as
`bundle_label_selector` — Ray queues it until a node has the room, exactly as it queued a cell's own actor; once it
is ready (bounded by queue_timeout_s) the bundle's node is read from the placement-group table, and the cell runs on
that node's shared `NodeHost` (num_cpus=0, pinned with NodeAffinitySchedulingStrategy(soft=False), threaded), keyed
by a cell id for run/control/close_stdin/signal_group/engine_chunks. Whatever the end (built, failed, cancelled,
lost, the driver's exit: Ray removes a job's placement groups with it), the group is removed and the cell closed.

The host is this driver's (it dies with the driver: every worker's stdin closes and the worker cancels itself), or,
connected to the warm local farm, the farm's named host (`trtls-host-<node>` in `trtls-farm`, started by `trtls farm
up` with N preloaded workers that have TensorRT imported): that one outlives drivers, so it watches each cell's driver.

Imported only on the remote path (a recipe with `[cluster]`): this module imports Ray.
"""

from __future__ import annotations

import asyncio
import secrets
import socket
import threading
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from trtls.builds.farm.cell_runner import CellRun, Preloaded, discard, driver_token
from trtls.builds.farm.node_worker import where_info
from trtls.builds.farm.placement import Placement
from trtls.builds.farm.warm_actors import kill_actor
from trtls.core.display import ago

NAMESPACE = "trtls-farm"
CALLS_PER_CPU = 8  # a cell's run + engine_chunks + control calls at once, and cells of fractional CPUs
LINGER_S = 5.0  # a driver's host with no cell waits this long (at least keep_warm_s) for the next before it ends


def host_name(node_id: str) -> str:
    return f"trtls-host-{node_id[:16]}"


def shares_host(placement: Placement) -> bool:
    """A CPU-only cell runs on its node's shared host. One that holds a GPU keeps an actor of its own
    (node_worker.NodeWorker): Ray sets CUDA_VISIBLE_DEVICES for the actor that holds the GPU, and only then."""
    return not placement.num_gpus and placement.request.num_cpus > 0


@ray.remote(num_cpus=0, max_restarts=0)
class NodeHost:
    def __init__(self, farm: str | None = None, preload: str | None = None, keep: int = 0) -> None:
        self.node_id = ray.get_runtime_context().get_node_id()
        self.farm, self.preload, self.keep = farm, preload, keep
        self.cells: dict[str, CellRun] = {}
        self.ended: dict[str, threading.Event] = {}
        self.ready: list[Preloaded] = []  # the farm's idle workers, TensorRT imported (or importing)
        self.lock = threading.Lock()
        self.served = 0
        self._fill()

    def where(self) -> dict[str, Any]:
        return where_info(self.node_id)

    def open(self, cell_id: str, module: str | None, driver: dict[str, Any] | None = None,
             store: dict[str, Any] | None = None) -> dict[str, Any]:  # fmt: skip
        """A cell placed on this node: its worker is a preloaded one (the farm's), or starts now and imports
        `module` while the ONNX comes (None: an external worker, started with its job). `store`: the driver's plan
        for the remote store — the key is looked up first, and a hit starts no worker (builds/farm/node_store.py)."""
        cell = CellRun(self.node_id, None, ray.get, self.farm)
        hit = store is not None and cell.look_up(store)
        with self.lock:
            early = self._take(module) if module and not hit else None
            self.served += 1
            served = self.served
        warm = early is not None
        if early is None and module and not hit:
            early = Preloaded(module)
        cell.early = early
        ended = threading.Event()
        with self.lock:
            self.cells[cell_id], self.ended[cell_id] = cell, ended
        if self.farm and driver and driver.get("host") == socket.gethostname() and driver.get("pid"):
            threading.Thread(target=self._watch, args=(cell_id, cell, driver, ended), daemon=True).start()
        return {
            "where": where_info(self.node_id),
            "worker": early.report() if early else None,
            "preloaded": warm,
            "served": served,
            "cells": len(self.cells),
            "storeHit": hit,
        }

    def run(
        self,
        cell_id: str,
        job: dict[str, Any],
        sha: str,
        box: list,
        shared: bool,
        command: list[str] | None,
        store: dict[str, Any] | None = None,
    ):
        yield from self.cells[cell_id].run(job, sha, box, shared, command, store)

    def control(self, cell_id: str, line: str) -> bool:
        cell = self.cells.get(cell_id)
        return cell.control(line) if cell else False

    def close_stdin(self, cell_id: str) -> None:
        if cell := self.cells.get(cell_id):
            cell.close_stdin()

    def signal_group(self, cell_id: str, signum: int) -> bool:
        cell = self.cells.get(cell_id)
        return cell.signal_group(signum) if cell else False

    def engine_chunks(self, cell_id: str, path: str):
        yield from self.cells[cell_id].engine_chunks(path)

    def cleanup(self, cell_id: str) -> None:
        if cell := self.cells.get(cell_id):
            cell.cleanup()

    def close(self, cell_id: str) -> None:
        """The cell is over: what is left of its process group ends, its job folder goes; a farm starts its next
        preloaded worker."""
        with self.lock:
            cell = self.cells.pop(cell_id, None)
            ended = self.ended.pop(cell_id, None)
        if ended is not None:
            ended.set()
        if cell is not None:
            cell.end()
        self._fill()

    def health(self) -> dict[str, Any]:
        """The farm's check: dead idle workers are dropped (never handed out) and replaced."""
        self._fill()
        with self.lock:
            ready = list(self.ready)
        return {
            "idle": len(ready),
            "preloaded": sum(1 for p in ready if p.info is not None),
            "target": max(0, self.keep - len(self.cells)),
            "cells": len(self.cells),
            "served": self.served,
        }

    def shutdown(self) -> None:
        """The farm goes down: end every process of this host (running cells, idle workers)."""
        with self.lock:
            cells, self.cells = list(self.cells.values()), {}
            ready, self.ready = self.ready, []
            self.keep = 0
        for cell in cells:
            cell.end()
        for p in ready:
            discard(p.proc)

    def _watch(self, cell_id: str, cell: CellRun, driver: dict[str, Any], ended: threading.Event) -> None:
        if cell.watch_driver(driver, ended):  # its driver died: the cell is closed here, the next worker starts
            self.close(cell_id)

    def _take(self, module: str) -> Preloaded | None:
        while self.ready:
            p = self.ready.pop(0)
            if p.alive() and p.fits(module):
                return p
            discard(p.proc)
        return None

    def _fill(self) -> None:
        if not (self.farm and self.preload):
            return
        with self.lock:
            dead = [p for p in self.ready if not p.alive()]
            self.ready = [p for p in self.ready if p.alive()]
            while len(self.ready) < self.keep - len(self.cells):
                self.ready.append(Preloaded(self.preload))
        for p in dead:
            discard(p.proc)


def new_host(node_id: str, cpus: float, **named: Any) -> Any:
    """Blocking: a NodeHost pinned to `node_id` (a farm's takes name/namespace/lifetime in `named`)."""
    cls: Any = NodeHost  # an actor class (mypy does not apply class decorators)
    return cls.options(
        scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
        max_concurrency=int(cpus * CALLS_PER_CPU) + 16,
        **{k: v for k, v in named.items() if k in ("name", "namespace", "lifetime")},
    ).remote(**{k: v for k, v in named.items() if k in ("farm", "preload", "keep")})


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
            entry = self.own.get(node_id)
            if entry is None:
                cpus = next((n["Resources"].get("CPU", 1.0) for n in ray.nodes() if n["NodeID"] == node_id), 1.0)
                entry = self.own[node_id] = [new_host(node_id, cpus), 0, None]
            if entry[2] is not None:
                entry[2].cancel()
                entry[2] = None
            entry[1] += 1
            return entry[0], None

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
                timer = threading.Timer(max(LINGER_S, linger_s), self._expire, args=(node_id, actor))
                timer.daemon = True
                entry[2] = timer
                timer.start()

    def _expire(self, node_id: str, actor: Any) -> None:
        with self.lock:
            entry = self.own.get(node_id)
            if entry is None or entry[0] is not actor or entry[1] > 0:
                return
            self.own.pop(node_id)
        kill_actor(actor)


HOSTS = Hosts()


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
        return True

    async def open_cell(
        self, job: dict[str, Any], command: list[str] | None, farm_ok: bool, store: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """The cell on its node's host: {"where", "worker", "preloaded", "served", "cells", "storeHit"}."""
        assert self.node_id is not None
        self.host, self.farm_name = await asyncio.to_thread(HOSTS.acquire, self.node_id, farm_ok)
        self.handle = CellHandle(self.host, self.cell_id)
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
