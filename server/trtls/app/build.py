"""`request_build`: one engine, from a checked recipe to a started build, a reuse or a refusal — the sequence every
face used to write itself (store lookup → supervisor start → the store's publish attached → registered).

One request builds the worker's job once: the engine key is computed from the job the worker then receives (the key
reads no build id), so what was looked up is what is built."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from trtls.app.request import refused_recipe, send_job
from trtls.app.results import AlreadyBuilding, Refused, Reused, Started, evidence_path
from trtls.builds.avoidance import lookup as avoidance
from trtls.builds.avoidance.pinned import PinUnavailable, unpinned_line
from trtls.builds.supervisor.job import new_build_id, worker_job
from trtls.builds.supervisor.spawn import discard
from trtls.builds.supervisor.speculation import JobAhead, same_job
from trtls.core.codes import ERROR
from trtls.core.findings import Finding
from trtls.core.recipe import LoadedRecipe
from trtls.store.entries import StoreUnusable

if TYPE_CHECKING:  # a store hit starts nothing: the build core (its state, events, view) is loaded by the build
    from trtls.builds.supervisor.runs import RunRegistry
    from trtls.builds.supervisor.supervisor import Supervisor

Say = Callable[[str], None]


def store_error(loaded: LoadedRecipe, exc: StoreUnusable) -> Finding:
    """TRT330/TRT331 on the `[store] path` value when the recipe set it, else on the recipe."""
    store = loaded.recipe.store if loaded.recipe is not None else None
    on_path = store is not None and store.path is not None
    return Finding(exc.code, ERROR, str(exc), ("store", "path") if on_path else (), on_value=on_path)


async def request_build(
    supervisor: Supervisor | None,
    loaded: LoadedRecipe,
    engine: str,
    *,
    overrides: dict[str, Any] | None = None,
    faults: dict[str, Any] | None = None,
    scratch: bool = False,
    parent_id: str | None = None,
    no_store: bool = False,
    rebuild: bool = False,
    unpin: bool = False,
    worker: asyncio.subprocess.Process | None = None,
    wait_for_output: bool = True,
    runs: RunRegistry | None = None,
    scope: str = "",
    say: Say | None = None,
    on_wait: Say | None = None,
    on_warning: Say | None = None,
    grace_s: float | None = None,
    notes: tuple[str, ...] = (),
    ahead: JobAhead | None = None,
) -> Started | Reused | AlreadyBuilding | Refused:
    """Build `engine` of a checked recipe, unless the store serves it. `supervisor`: the one a long-lived face keeps;
    None: a new one, made only when a build starts (the terminal's one build: a store hit loads no build core).
    `worker`: a worker a face started early (it imports TensorRT while the recipe loads): the build's, or closed here
    when no build starts. `runs`/`scope`: the
    registry a long-lived face keeps (a build of the same engine from the same `scope` running → AlreadyBuilding;
    a started build is registered). `say`: the lines a person reads while the lookup runs (a lifted pin, waiting for
    another process's build of the key); `on_wait(holder)`: once, when it starts waiting; `on_warning`: the store's
    warnings that come with the build's end (the lookup's are in `Started.use` / `Reused.use`).

    `scratch`: a build whose output is not the engine's (a reduction's minimal model, an acceptance
    scenario's scratch copy) is neither looked up nor published; `parent_id` names the run it belongs to. `faults`:
    injected into the worker (the acceptance harness); such a build is never stored. `grace_s`, `notes`: how the build
    is run, passed to Supervisor.start (a face never writes them on the Build afterwards). `ahead`: the job `worker`
    was sent before this request — the last build's, before the recipe was checked (builds/supervisor/speculation.py),
    or this recipe's checked job (app.request.checked_job_ahead): this request's job takes its id, and the worker may
    commit only when the two are the same job; otherwise it is discarded and the build starts anew. A worker sent
    nothing gets this request's job before the store is looked up (app.request.send_job), held like those."""
    refused = refused_recipe(loaded, [engine])
    if refused is None and runs is not None and not scratch:  # one build of an engine's output at a time
        for b in runs.running_builds():
            if b.engine == engine and runs.uri(b.id) == scope:
                await discard(worker)
                return AlreadyBuilding(b)
    if refused is not None:
        await discard(worker)
        return refused
    build_id = ahead.build_id if ahead is not None else new_build_id(engine)
    job = worker_job(loaded, engine, build_id, overrides, faults)  # the one job: keyed, then built
    if ahead is not None and (scratch or not same_job(ahead.job, job)):
        await discard(worker)  # it held its commit: it wrote nothing
        worker, ahead = None, None
        job = worker_job(loaded, engine, new_build_id(engine), overrides, faults)
    if scratch:
        return _start(
            supervisor, loaded, engine, job, overrides, worker, wait_for_output, parent_id, runs, scope, grace_s, notes
        )
    if ahead is None:  # TensorRT builds while the store is looked up; it commits only once the store missed
        ahead = send_job(worker, loaded, engine, job)
    try:
        use = await asyncio.to_thread(
            avoidance.prepare,
            loaded,
            engine,
            overrides,
            no_store=no_store,
            rebuild=rebuild,
            unpin=unpin,
            faults=faults,
            job=job,
        )
    except StoreUnusable as exc:
        await discard(worker)
        return Refused("store_error", [store_error(loaded, exc)])
    if say is not None and (lifted := unpinned_line(use)) is not None:
        say(f"{engine}: {lifted}")
    stopped: list[asyncio.Future[None]] = []

    def waiting(holder: str) -> None:
        # another process builds this key, most likely to be reused here: the job held here would take that build's
        # CPU for an engine never committed, so its worker ends now (a miss after the wait starts a new one)
        if ahead is not None and not stopped:
            stopped.append(asyncio.ensure_future(discard(worker)))
        if on_wait is not None:
            on_wait(holder)

    try:
        reused = await avoidance.reuse_or_lock(use, loaded, job["build_id"], say=say, on_wait=waiting)
    except PinUnavailable as exc:  # nothing is built over a rollback: the user decides (--unpin)
        await discard(worker)
        pinned = Finding(exc.code, ERROR, str(exc), ("engines", engine))  # on the table: a face locates it
        return Refused("pin_unavailable", [pinned], use.all_warnings())
    finally:
        if stopped:
            await stopped[0]
    if stopped:
        worker, ahead = None, None
    if reused is not None:
        await discard(worker)
        from trtls.core.summary_record import Summary  # a reuse's only: a miss's job goes first

        summary = Summary.written(reused)
        return Reused(summary, evidence_path(loaded.path, str(summary.buildId)), use)
    started = _start(
        supervisor,
        loaded,
        engine,
        job,
        overrides,
        worker,
        wait_for_output,
        parent_id,
        runs,
        scope,
        grace_s,
        notes,
        ahead,
    )
    avoidance.attach(use, started.build, on_warning)  # publish and record at the end, before a view reads the summary
    return Started(started.build, use)


def _start(
    supervisor: Supervisor | None,
    loaded: LoadedRecipe,
    engine: str,
    job: dict[str, Any],
    overrides: dict[str, Any] | None,
    worker: asyncio.subprocess.Process | None,
    wait_for_output: bool,
    parent_id: str | None,
    runs: RunRegistry | None,
    scope: str,
    grace_s: float | None,
    notes: tuple[str, ...],
    ahead: JobAhead | None = None,
) -> Started:
    if supervisor is None:
        from trtls.builds.supervisor.supervisor import Supervisor

        supervisor = Supervisor()
    build = supervisor.start(
        loaded,
        engine,
        overrides=overrides,
        worker=worker,
        wait_for_output=wait_for_output,
        parent_id=parent_id,
        job=job,
        grace_s=grace_s,
        notes=notes,
        ahead=ahead,
    )
    if runs is not None:
        runs.add(build, "build", scope)
    return Started(build)
