"""Starting a worker process, with nothing imported beyond the standard library.

A CLI build starts its worker before it loads the recipe (pydantic, the event models, the ONNX checks), so
the worker's own start-up — Python, then TensorRT's import, the largest fixed cost of a build — runs while
the parent prepares the job, instead of after it (`early_worker`).

Every worker gets a fresh nonce in its environment (`trtls.fs.kill.NONCE_ENV`), known only to the process that
started it (`worker_nonce`) and to the build's `running.json` (0600): the proof orphan recovery asks of a live pid
before it kills it, so a planted record cannot aim the kill at anything else.
"""

from __future__ import annotations

import os
import subprocess
import sys
import weakref
from typing import TYPE_CHECKING, Any

from trtls.core.vocabulary import BUILDER_MODULES, BUILDER_PREFERENCES
from trtls.fs.kill import NONCE_ENV, end_child, end_child_async, new_nonce

if TYPE_CHECKING:
    import asyncio  # at run time in the functions that need it: a known miss starts its worker before asyncio loads
    from pathlib import Path  # the recipe readers below import what reads it (`start_ahead` runs before them)

BUILTIN_WORKER = [sys.executable, "-m", "trtls.builds.worker"]
SITE_ENV = "TRTLS_WORKER_SITE"  # "1": start the built-in worker with `site`, as any Python (`_launch`)
PRELOADABLE = BUILDER_PREFERENCES
_NONCES: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()  # worker process → its nonce
_TAKEN: weakref.WeakSet[Any] = weakref.WeakSet()  # early workers a build took (`taken_by_build`): the build's to end
_quieted = False  # reap_beside's filter is on the asyncio logger
_STARTED_NONCES: dict[int, str] = {}  # pid → the nonce of a worker `start_now` started, until it is adopted
_AHEAD: subprocess.Popen[bytes] | None = None  # the worker `start_ahead` started, until `take_ahead` or `drop_ahead`
AHEAD_PRELOAD = "auto"  # what a worker started ahead preloads: a recipe's engine that names no builder module


def worker_nonce(proc: Any) -> str | None:
    """The nonce `spawn_worker` put in this worker's environment (None for a process it did not start)."""
    try:
        return _NONCES.get(proc)
    except TypeError:  # not weak-referenceable: not ours
        return None


def _with_nonce() -> tuple[str, dict[str, str]]:
    """A fresh nonce and the worker's environment carrying it (see the module doc)."""
    nonce = new_nonce()
    return nonce, {**os.environ, NONCE_ENV: nonce}


def _launch(command: list[str], env: dict[str, str]) -> list[str]:
    """The argv that starts `command`: the built-in worker without `site` (`python -S`), its module path carried in
    PYTHONPATH, when that finds the very modules this process would import — trtls and every builder module the worker
    may load. Site's walk of the `.pth` files is most of an interpreter's start where many packages are installed
    (67 of 80 ms on the 16-core host, 2026-12-04: a `.pth` that imports importlib.resources, others), and the worker's
    start is on a build's critical path, after this process's own. A path a `.pth` adds is in `sys.path`, so it is
    carried; a `.pth`'s `import` line (a startup hook: coverage, an editable install's finder) does not run in the
    worker — where that would change what the worker imports (a finder that maps trtls elsewhere), the paths do not
    find the same modules and the worker starts with `site` as before. `sitecustomize` still runs (the worker's
    `__main__`). TRTLS_WORKER_SITE=1 keeps `site` always."""
    if command[:3] != BUILTIN_WORKER or env.get(SITE_ENV) == "1":
        return command
    path = [p for p in sys.path if p]  # '': the parent's working folder, which `-m` puts first in the worker anyway
    if not _found_alike(("trtls", *BUILDER_MODULES), path):
        return command
    env["PYTHONPATH"] = os.pathsep.join(path)
    return [command[0], "-S", *command[1:]]


def _found_alike(names: tuple[str, ...], path: list[str]) -> bool:
    """Whether a plain search of `path` finds each of `names` where this process's import system does (the same
    file or package folders; absent from both is alike)."""
    import importlib.util
    from importlib.machinery import PathFinder

    def where(spec: Any) -> Any:
        return None if spec is None else (spec.origin, list(spec.submodule_search_locations or ()))

    try:
        return all(where(importlib.util.find_spec(n)) == where(PathFinder.find_spec(n, path)) for n in names)
    except (ImportError, ValueError):
        return False


async def spawn_worker(command: list[str] | None = None, preload: str | None = None) -> asyncio.subprocess.Process:
    """Start a worker (the built-in one by default). `preload`: the builder module it imports at once, before
    its job arrives (see worker.preload)."""
    import asyncio

    command = list(command or BUILTIN_WORKER)
    if preload is not None:
        command += ["--preload", preload]
    nonce, env = _with_nonce()
    proc = await asyncio.create_subprocess_exec(
        *_launch(command, env),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,  # Ctrl-C reaches the supervisor only; it decides what the worker gets
        limit=1 << 24,
        env=env,
    )
    _NONCES[proc] = nonce
    return proc


def start_now(preload: str) -> subprocess.Popen[bytes]:
    """Start the built-in worker from plain Python, before any event loop runs (the store's fast path found the
    engine missing: builds/supervisor/adopted_worker.py adopts it once the loop runs). As `spawn_worker` starts it: its
    own session, the builder preloaded, a nonce only this process and its running.json know."""
    nonce, env = _with_nonce()
    proc = subprocess.Popen(
        _launch([*BUILTIN_WORKER, "--preload", preload], env),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        env=env,
    )
    _STARTED_NONCES[proc.pid] = nonce
    return proc


def start_ahead() -> None:
    """A certain build from the program's entry (`trtls build --engine NAME --no-store` or `--rebuild`, no other
    flag): its worker starts now, first of all, before this process imports what reads the recipe and hashes its
    inputs (~30 ms of small imports here, 2026-12-05: the worker's start — its interpreter, TensorRT's import — is the
    build's critical path, and it runs beside them). It preloads what a recipe's engine that names no builder module
    preloads (`AHEAD_PRELOAD`); the fast path takes it (`take_ahead`) once the raw recipe says the engine wants that,
    and otherwise it is ended at once (`drop_unadopted`), having built nothing. Nothing is sent to it before the
    recipe is read."""
    global _AHEAD
    drop_ahead()
    try:
        _AHEAD = start_now(AHEAD_PRELOAD)
    except OSError:
        _AHEAD = None  # the fast path starts its own, and the full path says why it cannot


def take_ahead(preload: str) -> subprocess.Popen[bytes] | None:
    """The worker `start_ahead` started, when `preload` is what it preloads; else None (it is dropped)."""
    global _AHEAD
    if preload != AHEAD_PRELOAD:
        drop_ahead()
    worker, _AHEAD = _AHEAD, None
    return worker


def drop_ahead() -> None:
    """A worker started ahead that nobody took (a recipe that could not be read, an external worker, a cluster, the
    person's Ctrl-C): it ends without building (`drop_unadopted`)."""
    global _AHEAD
    worker, _AHEAD = _AHEAD, None
    if worker is not None:
        drop_unadopted(worker)


def drop_unadopted(worker: subprocess.Popen[bytes]) -> None:
    """A worker `start_now` started that no supervisor adopted (a guess the recipe refuted, the person's Ctrl-C before
    the full path): ended now and reaped, its nonce forgotten. It may have been sent a job ahead of the check
    (builds/supervisor/speculation.py) and be inside TensorRT's builder, where it would read the EOF of its input only
    at a callback; such a job holds its commit, so it has written nothing and owes nothing: SIGKILL to its session's
    group, as `discard` ends an adopted one."""
    _STARTED_NONCES.pop(worker.pid, None)
    end_child(worker)


def reap_beside(proc: Any) -> asyncio.Future[int]:
    """Reap a worker that has reported its end without waiting for it here (builds/supervisor/supervisor.py: the GPU's
    teardown at its exit is not the build's). A loop that closes first — a CLI's, once the build is answered — leaves
    the reap to asyncio's child watcher, whose thread (Python 3.11) then logs "Loop … that handles pid … is closed" at
    WARNING, which would reach the person's terminal: that one record is dropped (`_closed_loop_reap`)."""
    import asyncio
    import logging

    global _quieted
    if not _quieted:
        logging.getLogger("asyncio").addFilter(_closed_loop_reap)
        _quieted = True
    return asyncio.ensure_future(proc.wait())


def _closed_loop_reap(record: Any) -> bool:
    return record.msg != "Loop %r that handles pid %r is closed"


async def adopt_started(proc: subprocess.Popen[bytes]) -> Any:
    """A worker `start_now` started, as the supervisor drives it (its nonce kept for running.json)."""
    from trtls.builds.supervisor.adopted_worker import adopt

    adopted = await adopt(proc)
    nonce = _STARTED_NONCES.pop(proc.pid, None)
    if nonce is not None:
        _NONCES[adopted] = nonce
    return adopted


def preload_for(recipe: Path, engine: str | None) -> str | None:
    """The builder module to preload for the first engine a build will start, read from the raw TOML; None when
    an early worker would not be used (unreadable recipe, unknown engine, an external worker). The recipe is
    validated properly afterwards; this only decides whether to start early."""
    from trtls.core.recipe_file import recipe_snapshot

    try:
        data = recipe_snapshot(recipe).data  # 400-deep nesting is TRT120 later, not a crash
    except (OSError, ValueError):
        return None
    engines = data.get("engines")
    if "cluster" in data or not isinstance(engines, dict) or not engines:  # a cluster places its own workers
        return None
    table: Any = engines.get(engine) if engine else next(iter(engines.values()))
    if not isinstance(table, dict) or "worker" in table:
        return None
    module = table.get("builder_module", "auto")
    return module if module in PRELOADABLE else None


def preload_of_job(job: Any) -> str | None:
    """The builder module a remembered job names, when it is one a worker may preload; else None. A known miss spawns
    its worker with it before the raw recipe is parsed (`cli/store_lookup._start_worker`), and `preload_for` confirms
    it once the worker is starting: the memo held, so the engine's view of the recipe is its last build's."""
    module = job.get("builder_module") if isinstance(job, dict) else None
    return module if module in PRELOADABLE else None


def store_may_serve(recipe: Path, no_store: bool, rebuild: bool) -> bool:
    """From the raw TOML (before the recipe is validated): could this build be served from the store? The CLI then
    looks up before starting any worker (no early TensorRT import). Here, not in builds.avoidance.lookup: deciding
    whether
    to start early must not import what the lookup needs (the recipe models, the store: ~0.3 s)."""
    if no_store or rebuild:
        return False
    from trtls.core.recipe_file import recipe_snapshot

    try:
        data = recipe_snapshot(recipe).data  # deep nesting: TRT120 later, not a crash
    except (OSError, ValueError):
        return True
    table = data.get("store")
    if isinstance(table, dict):
        return table.get("mode", "read_write") != "off"
    return os.environ.get("TRTLS_STORE", "").strip().lower() != "off"


async def discard(worker: asyncio.subprocess.Process | None) -> None:
    """An early worker that gets no build: sent no job (a lookup that then hit, a refused recipe), or a job sent ahead
    of the check that is not to be built (a hit, a refusal, another job: builds/supervisor/speculation.py). Neither has
    written anything — a job sent ahead writes nothing, not even a temp, before the supervisor's commit
    (worker/commit_guard.CommitGate), and a discarded worker was never committed — so it owes nothing and is ended at
    once: SIGKILL to its session's group (its own children with it), rather than waited for while it finishes
    importing TensorRT or cancels the build it began (~30 ms of a hit after an edit here, 2026-12-05)."""
    if worker is None or worker.returncode is not None or worker in _TAKEN:
        return  # a worker a build took is that build's to end, with its evidence: a face's cleanup never kills it
    await end_child_async(worker)


def taken_by_build(worker: Any) -> None:
    """The supervisor has taken `worker` for a build whose task now runs: from here `discard` leaves it alone. A
    face discards the early worker it passed on any path where no build took it — a refusal, a hit, an error — and
    one such path may come after the handoff (an exception raised once the build started); ending the worker then
    would kill a running build behind its supervisor's back, which owns its stop and its evidence."""
    _TAKEN.add(worker)
