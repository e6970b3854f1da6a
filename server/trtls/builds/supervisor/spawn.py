"""Starting, adopting and ending worker processes, with nothing imported beyond the standard library.

A CLI build starts its worker before it loads the recipe (pydantic, the event models, the ONNX checks), so
the worker's own start-up — Python, then TensorRT's import, the largest fixed cost of a build — runs while
the parent prepares the job, instead of after it (`early_worker`). How a worker is started — its command line
without `site`, its environment and nonce — is `worker_launch`'s, which a certain build's entry calls before it
imports this module.

Every worker gets a fresh nonce in its environment (`trtls.fs.nonce.NONCE_ENV`), known only to the process that
started it (`worker_nonce`; `worker_launch.started_nonce` for one started from plain Python) and to the build's
`running.json` (0600): the proof orphan recovery asks of a live pid before it kills it, so a planted record cannot
aim the kill at anything else.
"""

from __future__ import annotations

import os
import subprocess
import weakref
from typing import TYPE_CHECKING, Any

from trtls.builds.supervisor import worker_launch
from trtls.builds.supervisor.worker_launch import BUILTIN_WORKER, launch_argv, with_nonce
from trtls.core.vocabulary import BUILDER_PREFERENCES
from trtls.fs.kill import end_child_async

if TYPE_CHECKING:
    import asyncio  # at run time in the functions that need it: a known miss starts its worker before asyncio loads
    from pathlib import Path  # the recipe readers below import what reads it (`start_ahead` runs before them)

PRELOADABLE = BUILDER_PREFERENCES
_NONCES: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()  # worker process → its nonce
_TAKEN: weakref.WeakSet[Any] = weakref.WeakSet()  # early workers a build took (`taken_by_build`): the build's to end
_quieted = False  # reap_beside's filter is on the asyncio logger


def worker_nonce(proc: Any) -> str | None:
    """The nonce `spawn_worker` put in this worker's environment (None for a process it did not start)."""
    try:
        return _NONCES.get(proc)
    except TypeError:  # not weak-referenceable: not ours
        return None


async def spawn_worker(command: list[str] | None = None, preload: str | None = None) -> asyncio.subprocess.Process:
    """Start a worker (the built-in one by default). `preload`: the builder module it imports at once, before
    its job arrives (see worker.preload)."""
    import asyncio

    command = list(command or BUILTIN_WORKER)
    if preload is not None:
        command += ["--preload", preload]
    nonce, env = with_nonce()
    proc = await asyncio.create_subprocess_exec(
        *launch_argv(command, env),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,  # Ctrl-C reaches the supervisor only; it decides what the worker gets
        limit=1 << 24,
        env=env,
    )
    _NONCES[proc] = nonce
    return proc


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
    nonce = worker_launch.started_nonce(proc.pid)
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
