"""A build request before anything runs, for every face: the refusals every request shares, the rule that sends it
down the matrix path, and a checked request's job sent to the worker started early. No asyncio and no store: the
terminal asks it before either is imported (cli/store_lookup.py `check_ahead`), trtls.app.build inside its request.

A checked job goes ahead as soon as it exists, before the store is looked up: it holds its commit, so it writes
nothing unless the supervisor commits it once the store has missed (builds/supervisor/speculation.py); a hit, a
refusal or a wait for another process's build of the key discards it (app.build.request_build)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from trtls.app.results import Refused, request_error
from trtls.builds.supervisor.job import new_build_id, worker_job
from trtls.builds.supervisor.speculation import JobAhead, send_checked
from trtls.core.recipe import LoadedRecipe

if TYPE_CHECKING:
    import asyncio
    import subprocess

    # an early worker: the terminal's fast path starts it before asyncio is imported, a face's event loop after
    EarlyWorker = asyncio.subprocess.Process | subprocess.Popen[bytes]


def runs_as_matrix(
    loaded: LoadedRecipe, *, every_engine: bool = False, matrix: bool = False, cell: str | None = None
) -> bool:
    """The rule that sends a request down the matrix path (one parent, one child per cell; on a `[cluster]`, a node
    each): every engine as one run, a matrix, one cell, or any build of a recipe with a `[cluster]` (docs/farm.md)."""
    return every_engine or matrix or bool(cell) or (loaded.recipe is not None and loaded.recipe.cluster is not None)


def refused_recipe(loaded: LoadedRecipe, engines: list[str]) -> Refused | None:
    """The refusals every request shares: a recipe with errors (its findings), an engine it has no table of (TRT107,
    in the terminal and in the editor alike)."""
    if loaded.recipe is None:
        return Refused("invalid_recipe", list(loaded.errors))
    known = list(loaded.recipe.engines)
    if not known:
        return Refused(
            "bad_request",
            [request_error("TRT107", "no [engines.NAME] table: add one to build an engine (see the README)")],
        )
    unknown = [e for e in engines if e not in known]
    if unknown:
        return Refused(
            "bad_request", [request_error("TRT107", f"no engine named {unknown[0]} (engines: {', '.join(known)})")]
        )
    return None


def send_job(worker: EarlyWorker | None, loaded: LoadedRecipe, engine: str, job: dict[str, Any]) -> JobAhead | None:
    """`job`, made from the checked `loaded`, to `worker` — an early worker that was sent nothing — when the engine
    builds in trtls's own worker and the job may go ahead (`speculation.may_go_ahead`); the job sent, or None."""
    if worker is None or not loaded.engine(engine).builds_in_our_worker:
        return None
    return send_checked(worker, job)


def checked_job_ahead(worker: EarlyWorker, loaded: LoadedRecipe, engine: str) -> JobAhead | None:
    """The job a plain one-engine request (no overrides, no faults, not scratch) of the checked `loaded` builds, sent
    to `worker` now; None when the request would be refused or go down the matrix path, or the job may not go ahead.
    The request that follows builds its own job again and commits this one only when the two are the same
    (request_build's `same_job`): a recipe edited between the two checks cannot be built from the first."""
    if refused_recipe(loaded, [engine]) is not None or runs_as_matrix(loaded):
        return None
    return send_job(worker, loaded, engine, worker_job(loaded, engine, new_build_id(engine), None, None))
