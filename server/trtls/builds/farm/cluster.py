"""The connection to the Ray cluster a recipe's `[cluster]` names, and its node inventory.

Ray is process-global: one connection per process (the CLI's run, or the language server's life), made on a
thread so an event loop never blocks on it. `address = "local"` starts an embedded instance that ends with
this process — on 127.0.0.1 only, with token authentication on and its token in a 0600 file of a private scratch
folder (`local_guard`) — or joins the warm farm with the farm's token. Ray is imported here lazily: this module is
only reached when a recipe has `[cluster]`.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import hashlib
import logging
import os
import queue
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trtls import fs
from trtls.builds.farm import local_guard, node_scratch, proc_tree
from trtls.builds.farm.lean_node import lean_node
from trtls.builds.farm.placement import Node
from trtls.core.cgroups import usable_cpus
from trtls.core.farm import LOCAL, ClusterTable
from trtls.fs import Kind, read_bytes
from trtls.fs.lineage import Witnessed, witness


class FarmUnavailable(RuntimeError):
    """Ray is missing (TRT234) or the cluster cannot be reached (TRT235); `code` says which."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


# Ray's driver-side telemetry, off unless the user's environment says otherwise. Measured (docs/farm.md): the
# task-event buffer's flush (TaskEventBufferImpl::Stop) and the OpenTelemetry recorder's shutdown made ray.shutdown
# of the CLI take 10-15 s after a Ctrl-C on this loaded 2-core machine; the farm reads neither (its events are
# the worker's own protocol lines), and both cost CPU on every node while cells build.
QUIET_DRIVER = {
    "RAY_task_events_report_interval_ms": "0",
    "RAY_enable_metrics_collection": "0",
    "RAY_enable_open_telemetry": "0",
}

_lock = threading.Lock()
_owner_lock = threading.Lock()
_owner: queue.Queue | None = None
_connected: str | None = None
connection: dict[str, Any] = {}  # how this process reached its cluster: {"how": sentence, "warm": bool}
job_runtime_env: dict[str, Any] = {}  # this process's Ray job runs in it (a warm farm's actors do not)
_onnx_refs: dict[str, Any] = {}  # sha256 → ObjectRef: each ONNX is put in the object store once per process
_hashed: dict[tuple[str, int, int], str] = {}  # (path, size, mtime) → sha256
_token_dir: list[Path] = []  # the embedded instance's private folder (0700) holding its token file (0600)


# Where a run's fixed cost goes (the matrix summary's `cluster.fixedCost`): seconds since this process started, each
# stage when it first happened in the run — runStart (the run asked for the cluster), connected, placed (every cell
# placed), reserved (a CPU-only cell's bundle reserved by Ray on a node), actorReady (the first cell's node worker
# answered: a new actor, or a warm one claimed), workerPreloaded
# (its worker had TensorRT imported: negative when that was before this process started — a warm farm's worker),
# onnxOnNode, buildStarted and firstPhaseStart (the first cell's builder). Node-side stages come as wall-clock
# times: exact on one machine (the local and warm farm), subject to clock skew across machines.
STAGES = (
    "runStart",
    "connected",
    "placed",
    "reserved",
    "actorReady",
    "workerPreloaded",
    "onnxOnNode",
    "buildStarted",
    "firstPhaseStart",
)


def process_started_at() -> float:
    """Wall-clock time this process started (/proc: its start in clock ticks since boot, 10 ms resolution)."""
    me = proc_tree.read(os.getpid())
    if me is None:
        return time.time()
    return time.time() - (time.clock_gettime(time.CLOCK_BOOTTIME) - me.start / proc_tree.TICKS)


_process_t0 = process_started_at()


def begin_run() -> None:
    """A new run (a matrix, or one cell): its fixed-cost breakdown starts empty."""
    connection["fixedCost"] = {"driverStart": 0.0}
    connection["cells"] = {}
    mark("runStart")


def mark(stage: str, wall: float | None = None) -> None:
    """The first time `stage` happened in this run (later cells do not move it)."""
    fixed = connection.setdefault("fixedCost", {"driverStart": 0.0})
    if stage not in fixed:
        fixed[stage] = round((time.time() if wall is None else wall) - _process_t0, 3)


# Where a cell's tail goes (`cluster.cells[build id].tail`, seconds since this process started, as fixedCost): its
# builder returned (the worker's `builder_returned` reached the driver), the node's worker finished (engine written
# and fsynced on the node, hashed), the engine is at the requested output here (sent back and written, or written in
# place by a worker on this machine), and the cell is done (the driver's evidence written, the engine re-read and,
# with a store, published with its known-good record). The run's summary stamp is `summaryS`.
TAIL = ("builderReturned", "finishedOnNode", "engineLocal", "done")


def seconds_since_start() -> float:
    return round(time.time() - _process_t0, 3)


def cell_mark(build_id: str, stage: str) -> None:
    """When `stage` of the tail happened for this cell (the first time)."""
    tail = connection.setdefault("cells", {}).setdefault(build_id, {}).setdefault("tail", {})
    tail.setdefault(stage, seconds_since_start())


def cell_note(build_id: str, **fields: Any) -> None:
    """Per-cell facts for the matrix summary (`cluster.cells[build id]`): which actor, whether warm, its worker."""
    connection.setdefault("cells", {}).setdefault(build_id, {}).update(fields)


def connect(cluster: ClusterTable, while_waiting: Callable[[], None] | None = None) -> None:
    """Blocking (run it on a thread). Idempotent for one address; a second address in one process is refused.
    `while_waiting` is called once Ray is imported, before `ray.init` (it must not block: start a thread)."""
    global _connected
    warm = None
    if cluster.address == LOCAL and not _connected:
        problem = local_guard.version_problem(local_guard.installed_ray())
        if problem is not None:
            raise FarmUnavailable("TRT237", problem)
        from trtls.builds.farm import warm_farm

        warm, why = warm_farm.find(cluster.labels)
        connection.update(how=why, warm=warm is not None)
    # before Ray is imported: it reads its RAY_* configuration from the environment
    for key, value in QUIET_DRIVER.items():
        os.environ.setdefault(key, value)
    if warm is not None:  # explicitly: Ray turns token auth on for a driver that names an address only when told to
        local_guard.use_token(Path(warm.token_path))
    try:
        import ray
    except ImportError as exc:
        raise FarmUnavailable(
            "TRT234", f"the recipe has [cluster] but Ray is not installed ({exc}): pip install 'trtls[farm]'"
        ) from None
    if while_waiting is not None:  # Ray imported, its configuration read: the caller's work beside ray.init's wait
        while_waiting()
    with _lock:
        if ray.is_initialized():
            if _connected not in (None, cluster.address):
                raise FarmUnavailable(
                    "TRT235", f"this process is already connected to {_connected}; restart it to use {cluster.address}"
                )
            mark("connected")
            return
        kwargs: dict[str, Any] = {
            "include_dashboard": False,
            "log_to_driver": False,
            "logging_level": logging.WARNING,
            "configure_logging": False,
        }
        if cluster.runtime_env:
            kwargs["runtime_env"] = cluster.runtime_env
        if warm is not None:  # `trtls farm up`'s head: its node has the CPUs and labels it was started with
            kwargs["address"] = warm.address
        elif cluster.address == LOCAL:
            # a busy machine can take longer than Ray's default to register the embedded node's raylet
            os.environ.setdefault("RAY_raylet_start_wait_time_s", "180")
            try:
                local_guard.use_token(_new_token())
            except OSError as exc:
                _drop_token()
                raise FarmUnavailable("TRT237", f"cannot write the embedded instance's token file: {exc}") from None
            kwargs["address"] = "local"  # always a new instance: never join someone else's `ray start` by accident
            kwargs["num_cpus"] = cluster.num_cpus or usable_cpus()  # what this process may use, not the machine
            if cluster.labels:
                kwargs["labels"] = dict(cluster.labels)
        else:
            connection.update(how=f"the Ray cluster at {cluster.address}", warm=False)
            kwargs["address"] = cluster.address
        lean = warm is None and cluster.address == LOCAL
        try:
            _on_owner_thread(lambda: lean_node(ray, lambda: ray.init(**kwargs)) if lean else ray.init(**kwargs))
        except Exception as exc:  # ConnectionError, TimeoutError, ValueError from a bad address …
            _drop_token()
            raise FarmUnavailable("TRT235", f"cannot connect to the Ray cluster at {cluster.address}: {exc}") from None
        _connected = cluster.address
        # a local instance reachable from elsewhere, or one that does not authenticate, is never used
        problem = local_guard.started_problem(ray) if cluster.address == LOCAL else None
        if problem is None:
            job_runtime_env.clear()
            job_runtime_env.update(cluster.runtime_env or {})
            mark("connected")
            # after ray.init: atexit runs handlers last-registered first, so this one ends the connection before
            # Ray's own hook would (which sleeps 0.5 s first, and waits unbounded for a busy head)
            atexit.register(disconnect)
            # Ray's modules and client state live as long as the process: out of the collector's sight, a full
            # collection in a language server driving 32 cells took ~100 ms (hover waited behind it), not a few.
            gc.freeze()
    if problem is not None:
        disconnect()
        raise FarmUnavailable("TRT237", problem)


def _new_token() -> Path:
    """A token for the embedded instance, in a new private folder (0700) as a 0600 file; removed at disconnect."""
    folder = fs.scratch_dir(prefix="trtls-ray-")
    _token_dir.append(folder)
    token = folder / "auth_token"
    local_guard.write_token(token, folder)
    return token


def _on_owner_thread(fn: Any) -> Any:
    """Run `fn` on one daemon thread that lives as long as the process. Why: Ray starts an embedded instance's GCS
    and raylet with PR_SET_PDEATHSIG, which fires when the *thread* that started them ends. Started from a worker
    thread of asyncio's executor (joined when `asyncio.run` returns), the raylet was killed before this process
    disconnected: its agents were left running and `ray.shutdown()` waited on a dead node."""
    global _owner
    with _owner_lock:
        if _owner is None:
            _owner = queue.Queue()
            threading.Thread(target=_serve_owner, args=(_owner,), name="trtls-ray-owner", daemon=True).start()
    done: queue.Queue = queue.Queue()
    _owner.put((fn, done))
    ok, value = done.get()
    if not ok:
        raise value
    return value


def _serve_owner(q: queue.Queue) -> None:
    while True:
        fn, done = q.get()
        try:
            done.put((True, fn()))
        except BaseException as exc:
            done.put((False, exc))


def nodes() -> list[Node]:
    """Alive nodes with their labels and total resources."""
    import ray

    out = []
    for n in ray.nodes():
        if not n.get("Alive"):
            continue
        out.append(
            Node(
                n["NodeID"],
                dict(n.get("Labels") or {}),
                dict(n.get("Resources") or {}),
                n.get("NodeManagerHostname", ""),
            )
        )
    return out


def get_object(ref: Any) -> Any:
    """Blocking: the value of a Ray object (a node's batch of lines: `node_stream`, which does not import Ray)."""
    import ray

    return ray.get(ref)


def node_alive(node_id: str) -> bool:
    import ray

    return any(n["NodeID"] == node_id and n.get("Alive") for n in ray.nodes())


def onnx_ref(path: Path) -> tuple[str, Any]:
    """(sha256, ObjectRef) of an ONNX file, put into the object store once per content hash."""
    import ray

    st = path.stat()
    stamp = (str(path), st.st_size, st.st_mtime_ns)  # a model is hashed once, not once per cell
    with _lock:
        known = _hashed.get(stamp)
        if known is not None and known in _onnx_refs:
            return known, _onnx_refs[known]
    data = read_bytes(path, limit=None, follow=True)  # the user's model: it may live in a cache through a link
    sha = hashlib.sha256(data).hexdigest()
    with _lock:
        _hashed[stamp] = sha
        ref = _onnx_refs.get(sha)
        if ref is None:
            ref = _onnx_refs[sha] = ray.put(data)
    return sha, ref


# How long `disconnect` waits for `ray.shutdown()`. It flushes the driver's state and stops the core worker, which
# waits on the raylet and GCS: on a loaded machine that took seconds (10-15 s measured on this 2-core host before
# QUIET_DRIVER), and nothing in Ray bounds it. Past the budget, the processes this command started are ended instead
# (the embedded instance's GCS, raylet, agents and workers), so a matrix's Ctrl-C exits in a bounded margin.
SHUTDOWN_BUDGET_S = 3.0
# The last disconnect: {"budgetS", "withinBudget", "ended": how many of the embedded instance's processes it ended}.
last_shutdown: dict[str, Any] = {}


def disconnect() -> None:
    """Leave the cluster. An embedded instance ends with it, and so does every process under its raylet and GCS:
    Ray's per-node agents (ray::DashboardAgent, RuntimeEnvAgent) otherwise outlive `ray.shutdown()` by seconds.
    `ray.shutdown()` gets SHUTDOWN_BUDGET_S; if it has not returned by then, it is left on its daemon thread, Ray's
    own exit hook (which would wait for it again) is dropped, the embedded instance's processes are ended and a
    line on stderr says so."""
    global _connected
    import ray

    with _lock:
        _onnx_refs.clear()
        _hashed.clear()
        ours = _embedded_processes() if connection.get("warm") is False and _connected == LOCAL else []
        node = None
        with contextlib.suppress(Exception):  # the node this driver runs on: the embedded instance's
            node = str(ray.get_runtime_context().get_node_id()) if ours and ray.is_initialized() else None
        within = True
        if ray.is_initialized():
            within = _bounded_shutdown(ray, SHUTDOWN_BUDGET_S)
        ended = proc_tree.end(ours)
        if node is not None:  # the node has ended with its processes: its cells' ONNX copies and job folders go
            node_scratch.remove(node)
        last_shutdown.clear()
        last_shutdown.update(budgetS=SHUTDOWN_BUDGET_S, withinBudget=within, ended=len(ended))
        if not within:
            what = (
                f"ended the {len(ended)} processes of the embedded instance"
                if ours
                else "the connection ends when this process exits"
            )
            print(
                f"trtls: Ray's shutdown did not end within {SHUTDOWN_BUDGET_S:g} s; {what}",
                file=sys.stderr,
                flush=True,
            )
        _connected = None
        _drop_token()


def _drop_token() -> None:
    """Remove the embedded instance's token folder (its processes are gone, or never started)."""
    while _token_dir:
        folder = _token_dir.pop()
        try:
            fs.remove_tree(folder, kind=Kind.scratch, within=folder.parent)
        except OSError:
            pass


def _bounded_shutdown(ray: Any, budget_s: float) -> bool:
    """`ray.shutdown()` on a daemon thread, waited for `budget_s`: True when it returned (or raised) in time."""
    done = threading.Event()

    def run() -> None:
        try:
            ray.shutdown()
        except Exception:  # a failing shutdown is still an ended one: what is left is ended by the caller
            pass
        finally:
            done.set()

    threading.Thread(target=run, name="trtls-ray-shutdown", daemon=True).start()
    if done.wait(budget_s):
        return True
    # Ray's atexit hook calls ray.shutdown() again, behind the lock the stuck call holds: it would wait unbounded
    atexit.unregister(ray._private.worker.shutdown)
    return False


def _embedded_processes() -> list[Witnessed]:
    """The embedded instance's processes (GCS, raylet, …: children of this process) and everything under them, as the
    door saw them (`fs.lineage`: they can be ended later even once re-parented)."""
    import ray

    node = getattr(ray._private.worker, "_global_node", None)
    if node is None:
        return []
    roots = [
        pid
        for infos in getattr(node, "all_processes", {}).values()
        for info in infos
        if isinstance(pid := getattr(getattr(info, "process", None), "pid", None), int)
    ]
    return witness(roots)
