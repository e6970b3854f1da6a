"""How the built-in worker process starts: its command line, its environment, its pipes — on `os`, `sys`,
`subprocess` and `core.vocabulary` (the builder modules' names) only, so that a certain build's entry (`trtls build
--engine NAME --no-store` or `--rebuild`: cli/entry.py) starts its worker before it imports anything else.

The worker's start — an interpreter, its modules, TensorRT's import — is a `demo` build's critical path, and it runs
beside everything the command line does until it sends the job. Every module imported before the spawn delays it, so
nothing before the spawn imports `argparse`, the door's process rules (`fs.kill`) or `spawn`'s: on the 2-core machine
the spawn came 8–12 ms sooner than when it waited for them, on the 16-core host 2.4 ms (docs/performance.md,
2026-12-06 night). `spawn` keeps everything else about workers (adoption, the ends, the preload rules).

Every worker gets a fresh nonce in its environment (`trtls.fs.nonce.NONCE_ENV`), known only to the process that
started it (`started_nonce`) and to the build's `running.json` (0600): the proof orphan recovery asks of a live pid
before it kills it, so a planted record cannot aim the kill at anything else.

A worker started before this process knows it builds (`start_ahead(parked=True)`: a build the store may still serve)
starts `--parked`: its interpreter and its lightest modules start beside the fast path's memo, store and device
checks, and it waits there — no builder loaded, no driver asked — for `core.protocol.START_LINE` (a known miss, a
changed engine: `take_ahead`) or its end (a hit, a decline: `drop_ahead`).
"""

from __future__ import annotations

import os
import subprocess
import sys

from trtls.fs.nonce import NONCE_ENV, new_nonce

BUILTIN_WORKER = [sys.executable, "-m", "trtls.builds.worker"]
SITE_ENV = "TRTLS_WORKER_SITE"  # "1": start the built-in worker with `site`, as any Python (`launch_argv`)
AHEAD_PRELOAD = "auto"  # what a worker started ahead preloads: a recipe's engine that names no builder module
_STARTED_NONCES: dict[int, str] = {}  # pid → the nonce of a worker `start_now` started, until it is adopted
_AHEAD: subprocess.Popen[bytes] | None = None  # the worker `start_ahead` started, until it is taken or dropped
_PARKED: set[int] = set()  # pids of workers started parked and not yet told to start (`take_ahead`)


def with_nonce() -> tuple[str, dict[str, str]]:
    """A fresh nonce and the worker's environment carrying it (see the module doc)."""
    nonce = new_nonce()
    return nonce, {**os.environ, NONCE_ENV: nonce}


def launch_argv(command: list[str], env: dict[str, str]) -> list[str]:
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
    from trtls.core.vocabulary import BUILDER_MODULES  # its words' one home (it imports `typing`: only here)

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

    def where(spec: object) -> object:
        if spec is None:
            return None
        return (getattr(spec, "origin", None), list(getattr(spec, "submodule_search_locations", None) or ()))

    try:
        return all(where(importlib.util.find_spec(n)) == where(PathFinder.find_spec(n, path)) for n in names)
    except (ImportError, ValueError):
        return False


def start_now(preload: str, parked: bool = False) -> subprocess.Popen[bytes]:
    """Start the built-in worker from plain Python, before any event loop runs (a certain build, or the store's fast
    path found the engine missing: builds/supervisor/adopted_worker.py adopts it once the loop runs). As
    `spawn.spawn_worker` starts one: its own session, the builder preloaded, a nonce only this process and its
    running.json know (`started_nonce`). `parked`: it waits for its start line before it loads the builder (the
    module doc)."""
    nonce, env = with_nonce()
    flags = ["--preload", preload]
    if parked:
        from trtls.core.protocol import PARKED_FLAG

        flags.append(PARKED_FLAG)
    proc = subprocess.Popen(
        launch_argv([*BUILTIN_WORKER, *flags], env),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        env=env,
    )
    _STARTED_NONCES[proc.pid] = nonce
    if parked:
        _PARKED.add(proc.pid)
    return proc


def started_nonce(pid: int) -> str | None:
    """The nonce of the worker `start_now` started as `pid`, handed over once (to the supervisor that adopts it, or to
    nobody when it is dropped)."""
    return _STARTED_NONCES.pop(pid, None)


def start_ahead(parked: bool = False) -> None:
    """A build from the program's entry (`trtls build --engine NAME`, perhaps with `--json`, `--no-store` or
    `--rebuild`, no other flag): its worker starts now, first of all, before this process imports what reads the
    recipe and hashes its inputs. It preloads what a recipe's engine that names no builder module preloads
    (`AHEAD_PRELOAD`); the fast path takes it (`take_ahead`) once the raw recipe says the engine wants that, and
    otherwise it is ended at once (`drop_unadopted`), having built nothing. Nothing is sent to it before the recipe is
    read. `parked`: the build is not certain yet (the store may serve it): the worker waits, its builder not loaded,
    until `take_ahead` starts it (the module doc). One started ahead before and never taken is ended first."""
    global _AHEAD
    drop_ahead()
    try:
        _AHEAD = start_now(AHEAD_PRELOAD, parked=parked)
    except OSError:
        _AHEAD = None  # the fast path starts its own, and the full path says why it cannot


def take_ahead(preload: str) -> subprocess.Popen[bytes] | None:
    """The worker `start_ahead` started, now the caller's — told to start if it was parked — when `preload` is what it
    preloads; else None (it is dropped). None too when a parked one cannot be told (it is gone): the caller starts
    another."""
    global _AHEAD
    if preload != AHEAD_PRELOAD:
        drop_ahead()
    worker, _AHEAD = _AHEAD, None
    if worker is not None and worker.pid in _PARKED:
        from trtls.core.protocol import START_LINE

        _PARKED.discard(worker.pid)
        try:
            assert worker.stdin is not None
            worker.stdin.write(START_LINE)
            worker.stdin.flush()
        except (OSError, ValueError):
            drop_unadopted(worker)
            return None
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
    group, as `spawn.discard` ends an adopted one."""
    from trtls.fs.kill import end_child  # the door's end of a child; only once a worker is to be ended

    started_nonce(worker.pid)  # forgotten: nobody adopts it
    _PARKED.discard(worker.pid)
    end_child(worker)
