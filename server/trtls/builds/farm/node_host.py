"""One node-worker actor per node runs every CPU-only cell placed on that node; Ray still reserves and queues each
cell's CPUs (memory, labels) with a placement group of one bundle. This code runs in that actor (the node host actor,
a Ray worker process on the node), except `new_host`, which the driver or the farm's head calls to start it.

Why: a Ray actor's main thread wakes every 10 ms for Ray's signal check (`CoreWorker.CheckSignal`, hard-coded), ~6 ms
of CPU per second per actor whether it does anything or not — at 16 cells on 2 cores, two thirds of the farm's
overhead CPU was one actor per running cell (docs/farm.md "Where the overhead CPU goes"). Now a node has one.

`NodeHost` (num_cpus=0, pinned with NodeAffinitySchedulingStrategy(soft=False), threaded: `new_host`) runs each cell
(`cell_runner.CellRun`), keyed by a cell id for run/control/close_stdin/signal_group/engine_chunks, until the cell is
closed. A cell's side on the driver — its placement group, which host it runs on, its end — is `host_slot.HostSlot`.

The host is a driver's (it dies with the driver: every worker's stdin closes and the worker cancels itself), or,
connected to the warm local farm, the farm's named host (`trtls-host-<node>` in `trtls-farm`, started by `trtls farm
up` with N preloaded workers that have TensorRT imported): that one outlives drivers, so it watches each cell's driver.

Imported only on the remote path (a recipe with `[cluster]`): this module imports Ray.
"""

from __future__ import annotations

import socket
import threading
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from trtls.builds.farm.cell_runner import CellRun, Preloaded, discard
from trtls.builds.farm.node_worker import where_info

NAMESPACE = "trtls-farm"
CALLS_PER_CPU = 8  # a cell's run + engine_chunks + control calls at once, and cells of fractional CPUs
EARLY_CANCELS = 256  # cancels of cells not open (yet) kept, oldest dropped first: a late one for a closed cell too


def host_name(node_id: str) -> str:
    return f"trtls-host-{node_id[:16]}"


@ray.remote(num_cpus=0, max_restarts=0)
class NodeHost:
    def __init__(self, farm: str | None = None, preload: str | None = None, keep: int = 0) -> None:
        self.node_id = ray.get_runtime_context().get_node_id()
        self.farm, self.preload, self.keep = farm, preload, keep
        self.cells: dict[str, CellRun] = {}
        self.ended: dict[str, threading.Event] = {}
        self.early_cancels: dict[str, str] = {}  # cell id → a cancel line that came before its `open` (`control`)
        self.ready: list[Preloaded] = []  # the farm's idle workers, TensorRT imported (or importing)
        self.lock = threading.Lock()
        self.served = 0
        self._fill()

    def where(self) -> dict[str, Any]:
        return where_info(self.node_id)

    def open(
        self,
        cell_id: str,
        module: str | None,
        driver: dict[str, Any] | None = None,
        store: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """A cell placed on this node: its worker is a preloaded one (the farm's), or starts now and imports
        `module` while the ONNX comes (None: an external worker, started with its job). `store`: the driver's plan
        for the remote store — the key is looked up first, and a hit starts no worker (builds/farm/node_store.py).
        The cell is registered before that lookup: a stop of the cell (the driver's cancel line, its input closed, its
        close, its driver's death) reaches it there and cuts it (`CellRun.stop`); a stopped cell starts no worker.
        Registered after it, no stop could reach the lookup, which a stalled remote held to its bound after the person
        pressed Ctrl-C."""
        cell = CellRun(self.node_id, None, ray.get, self.farm)
        ended = threading.Event()
        with self.lock:
            self.cells[cell_id], self.ended[cell_id] = cell, ended
            early_cancel = self.early_cancels.pop(cell_id, None)
        if early_cancel is not None:
            cell.control(early_cancel)
        if self.farm and driver and driver.get("host") == socket.gethostname() and driver.get("pid"):
            threading.Thread(target=self._watch, args=(cell_id, cell, driver, ended), daemon=True).start()
        hit = store is not None and cell.look_up(store)
        wanted = bool(module) and not hit and not cell.stop.is_set
        with self.lock:
            early = self._take(str(module)) if wanted else None
            self.served += 1
            served = self.served
        warm = early is not None
        if early is None and wanted:
            early = Preloaded(str(module))
        with self.lock:
            open_still = self.cells.get(cell_id) is cell
            if open_still:
                cell.early = early
        if not open_still and early is not None:  # closed while it looked up: its worker is nobody's
            discard(early.proc)
            early = None
        return {
            "where": where_info(self.node_id),
            "worker": early.report() if early else None,
            "preloaded": warm,
            "served": served,
            "cells": len(self.cells),
            "storeHit": hit,
        }

    def run(self, cell_id: str, *cell_args: Any):
        """One cell's build: `CellRun.run`'s arguments (that method owns their list), as the driver sends them."""
        yield from self.cells[cell_id].run(*cell_args)

    def control(self, cell_id: str, line: str) -> bool:
        with self.lock:
            cell = self.cells.get(cell_id)
            if cell is None and '"cancel"' in line:
                # an actor's calls run on its threads in no set order: a cancel the driver sent just after `open` may
                # come before `open` registered its cell, and is applied there
                self.early_cancels[cell_id] = line
                while len(self.early_cancels) > EARLY_CANCELS:
                    self.early_cancels.pop(next(iter(self.early_cancels)))
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
