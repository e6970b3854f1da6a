"""The build commands of the language server: start a build (with a retry's overrides) or a matrix/farm run, fold
their end into diagnostics, and recover builds a crashed server left behind. Loaded on first use (after
`initialize`)."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcInvalidParams
from pygls.uris import from_fs_path

from trtls.app.build import request_build  # imported by the warm-up, not the first click
from trtls.app.matrix import request_matrix
from trtls.app.request import runs_as_matrix
from trtls.app.results import AlreadyBuilding, Refused, Reused
from trtls.builds.supervisor.retry import retry_overrides
from trtls.builds.supervisor.runs import RestoredRun
from trtls.builds.supervisor.supervisor import Build
from trtls.core import wire
from trtls.core.findings import Finding, Origin
from trtls.core.summary_record import SUMMARY_NAME, Summary
from trtls.lsp.build_relay import BuildRelay, build_tree, notify_build_tree
from trtls.lsp.command_args import BuildEngineArgs, BuildMatrixArgs, CancelBuildArgs
from trtls.lsp.progress import wants_progress

if TYPE_CHECKING:
    from trtls.builds.supervisor.matrix import MatrixBuild, PlannedCell
    from trtls.builds.supervisor.orphans import RecoveredBuild
    from trtls.core.recipe import LoadedRecipe
    from trtls.lsp.language_server import TrtlsServer

log = logging.getLogger(__name__)


def refused_request(refused: Refused) -> JsonRpcInvalidParams:
    """A request naming what the recipe lacks (an engine: TRT107, a matrix cell: TRT177) is invalid params, with the
    code the terminal prints for the same mistake, in the message and as `data.code`."""
    first = refused.findings[0]
    return JsonRpcInvalidParams("; ".join(refused.lines), data={"code": first.code, "errors": refused.lines})


def located(loaded: LoadedRecipe, findings: list[Finding]) -> list[str]:
    """`file:line:col: CODE message` per finding, located in the recipe by its TOML path (`LoadedRecipe.location`) and
    in file order (`LoadedRecipe.in_file_order`, as the terminal prints them): what a reply's `errors` lists, so a
    workspace of many recipes says which one (a rollback's pin that cannot be served, TRT338, on its engine's table; a
    store that cannot be used on `[store] path`)."""
    return [f"{loaded.location(f)}: {f.code} {f.message}" for f in loaded.in_file_order(findings)]


async def start_build(ls: TrtlsServer, args: BuildEngineArgs) -> wire.BuildEngineReply | wire.BuildMatrixReply:
    """trtls.buildEngine through the application layer (trtls.app.request_build): a build started, one already
    building, a bad recipe, an engine the store served or a store that cannot be used; on a recipe with a
    [cluster], the farm run of that one cell (trtls.buildMatrix's reply)."""
    loaded = await ls.recipe_async(args.uri)  # the request's one recipe check
    ls.store.set(args.uri, Origin.recipe, "", loaded.findings)
    if loaded.recipe is None:
        ls.publish(args.uri)
        errors = located(loaded, loaded.errors)
        return wire.BuildEngineReply(buildId=None, engine=args.engine, status="invalid_recipe", errors=errors)
    if runs_as_matrix(loaded):  # a farm run of one cell
        return await _matrix(ls, BuildMatrixArgs(uri=args.uri, engine=args.engine, matrix=False), loaded)
    overrides: dict[str, Any] = {}
    if args.engine in loaded.recipe.engines:
        overrides = retry_overrides(args.retry, loaded.engine(args.engine).builder.optimization_level)
    settings = ls.options.settings
    if settings.builder_module:
        overrides["builder_module"] = settings.builder_module
    notes: tuple[str, ...] = ()
    if args.retry:
        previous = ls.last_build.get((args.uri, args.engine))
        notes = (f"retry ({args.retry}) of build {previous}; its logs and settings stay in its evidence folder",)
    result = await request_build(
        ls.supervisor,
        loaded,
        args.engine,
        overrides=overrides,
        runs=ls.runs,
        scope=args.uri,
        on_warning=lambda line: store_warning(ls, args.engine, line),
        grace_s=settings.cancel_grace_s,
        notes=notes,
    )
    if isinstance(result, AlreadyBuilding):
        return wire.BuildEngineReply(buildId=result.build.id, engine=args.engine, status="already_building")
    if isinstance(result, Reused):  # no worker, no TensorRT
        finish_restored(ls, args.uri, result.summary, loaded.path)
        return wire.BuildEngineReply(
            buildId=result.build_id,
            engine=args.engine,
            status="reused",
            message=result.summary.message,
            engineKey=result.summary.engineKey,
            reusedFrom=result.summary.reusedFrom,
            evidencePath=str(result.evidence_path),
        )
    if isinstance(result, Refused):
        if result.because == "bad_request":
            raise refused_request(result)
        ls.refresh_lenses()  # a store that cannot be used, a pin that cannot be served: nothing is built
        errors = located(loaded, result.findings)
        return wire.BuildEngineReply(buildId=None, engine=args.engine, status="store_error", errors=errors)
    build = result.build
    has_progress = wants_progress(ls)  # before the run starts: a token the client sent is for it
    relay = BuildRelay(ls, build, args.uri, ls.options.build_tree, has_progress, lambda b: build_done(ls, b))
    await relay.start()
    ls.refresh_lenses()
    return wire.BuildEngineReply(buildId=build.id, engine=args.engine, status="started")


async def start_matrix_build(ls: TrtlsServer, args: BuildMatrixArgs) -> wire.BuildMatrixReply:
    """trtls.buildMatrix: a matrix or farm run (docs/farm.md)."""
    return await _matrix(ls, args, await ls.recipe_async(args.uri))


async def _matrix(ls: TrtlsServer, args: BuildMatrixArgs, loaded: LoadedRecipe) -> wire.BuildMatrixReply:
    """A matrix or farm run through the application layer (trtls.app.request_matrix): one parent, one cell build
    each. Refused with located findings when the recipe is bad or no node can hold some cell (nothing is submitted
    then)."""
    from trtls.lsp.matrix_relay import MatrixRelay

    ls.store.set(args.uri, Origin.recipe, "", loaded.findings)
    if loaded.recipe is None:
        ls.publish(args.uri)
        errors = [f.message for f in loaded.in_file_order(loaded.errors)]
        return wire.BuildMatrixReply(buildId=None, status="invalid_recipe", errors=errors)

    def looked_up(warnings: list[str], served: list[tuple[PlannedCell, Summary]]) -> None:
        for w in warnings:
            ls.window_log_message(lsp.LogMessageParams(type=lsp.MessageType.Warning, message=f"trtls: {w}"))

    parent: list[str] = []  # the matrix's id, once it started (a follower's row names it)

    def on_follower(cell: str, summary: Summary | None, said: str) -> None:
        """A cell of the same key as one this matrix built: its restored row, or a warning that it has no engine."""
        if summary is not None:
            finish_restored(ls, args.uri, summary, loaded.path, cell=cell.split("/", 1)[-1], parent_id=parent[0])
        else:
            ls.window_show_message(
                lsp.ShowMessageParams(type=lsp.MessageType.Warning, message=f"TensorRT: {cell}: {said}")
            )

    title = (args.engine or loaded.path.parent.name) + (" matrix" if args.matrix else "")
    result = await request_matrix(
        ls.supervisor,
        loaded,
        [args.engine] if args.engine else None,
        title,
        matrix=bool(args.matrix),
        cell=args.cell,
        runs=ls.runs,
        scope=args.uri,
        on_looked_up=looked_up,
        on_follower=on_follower,
        on_warning=lambda cell, line: store_warning(ls, cell, line),
    )
    if isinstance(result, Refused):
        if result.because == "bad_request":
            raise refused_request(result)
        _place_refusal(ls, args.uri, [args.engine] if args.engine else list(loaded.recipe.engines), result.findings)
        return wire.BuildMatrixReply(buildId=None, status="refused", errors=result.lines)
    reused = [reused_cell(p, summary, loaded.path) for p, summary in result.reused]
    mb = result.matrix
    if mb is None:  # every cell is up to date: no run starts
        for p, summary in result.reused:
            finish_restored(ls, args.uri, summary, loaded.path, cell=p.cell.name if p.cell else None)
        return wire.BuildMatrixReply(buildId=None, status="reused", reused=reused)
    parent.append(mb.id)
    for p, summary in result.reused:
        finish_restored(ls, args.uri, summary, loaded.path, cell=p.cell.name if p.cell else None, parent_id=mb.id)
    has_progress = wants_progress(ls)  # before the run starts: a token the client sent is for it
    relay = MatrixRelay(ls, mb, args.uri, ls.options.build_tree, has_progress, lambda m: matrix_done(ls, m))
    await relay.start()
    return wire.BuildMatrixReply(
        buildId=mb.id,
        status="started",
        cells=[wire.MatrixCellPlan(cell=p.key, engine=p.engine) for p in result.left],
        reused=reused,
    )


def stop_command(ls: TrtlsServer, args: CancelBuildArgs) -> wire.CancelBuildReply:
    """trtls.cancelBuild: stop any run by id (a build, a cell, a whole matrix, a gates or triage run) and say what the
    stop cut (trtls.app.stop): the run, only the upload of a built engine to the remote store, or nothing."""
    from trtls.app.stop import stop_run

    run = ls.runs.get(args.buildId)
    if run is None:
        raise JsonRpcInvalidParams(f"no build with id '{args.buildId}' (see trtls.listBuilds)")
    said = stop_run(run, args.source)
    return wire.CancelBuildReply(
        buildId=args.buildId, accepted=said.accepted, status=said.status, stopped=said.cut, message=said.text
    )


def store_warning(ls: TrtlsServer, name: str, line: str) -> None:
    """A warning the store said as a build ended (before its last `trtls/buildTree`): its engine's upload to the
    remote store stopped (the editor's Stop) or failed, the engine not stored — a log line, as the lookup's are."""
    from trtls.core.terminal_text import terminal_safe

    said = terminal_safe(f"trtls: {name}: {line}", keep_newlines=False)
    ls.window_log_message(lsp.LogMessageParams(type=lsp.MessageType.Warning, message=said))


def _place_refusal(ls: TrtlsServer, uri: str, engines: list[str], findings: list[Finding]) -> None:
    """No node can hold some cell: the findings on the recipe keys that no node can satisfy, as diagnostics (on the
    engines asked for when no finding names one)."""
    for engine in {str(f.path[1]) for f in findings if len(f.path) > 1} or set(engines):
        ls.store.set(uri, Origin.build, engine, [f for f in findings if engine in f.path[:2]])
    if any(len(f.path) < 2 for f in findings):
        ls.store.set(uri, Origin.build, "[cluster]", [f for f in findings if len(f.path) < 2])
    ls.publish(uri)


def reused_cell(planned: PlannedCell, summary: Summary, recipe: Path) -> wire.ReusedCell:
    """A cell the store served, as trtls.buildMatrix lists it."""
    build_id = str(summary.buildId)
    evidence = recipe.parent / ".trtls" / "runs" / build_id / SUMMARY_NAME
    return wire.ReusedCell(
        cell=planned.key, engine=planned.engine, buildId=build_id, message=summary.message, evidencePath=str(evidence)
    )


def finish_restored(
    ls: TrtlsServer,
    uri: str,
    summary: Summary,
    recipe: Path,
    cell: str | None = None,
    parent_id: str | None = None,
) -> RestoredRun:
    """A build that started no worker — reused from the engine store, or rolled back (trtls.rollbackEngine) — as a
    finished run: registered (listBuilds, showEvidence, buildReport know its id), drawn once in the TensorRT Builds
    view (one final `trtls/buildTree`), and the recipe re-checked as after a build (lens, TRT336/TRT337)."""
    run = RestoredRun(summary, recipe, cell, parent_id)
    ls.runs.add(run, "build", uri)
    if ls.options.build_tree:
        notify_build_tree(ls, build_tree(uri, run.snapshot()))
    build_done(ls, run)
    return run


def matrix_done(ls: TrtlsServer, mb: MatrixBuild) -> None:
    from trtls.builds.supervisor.outcome_findings import matrix_findings

    uri = ls.runs.uri(mb.id) or ""
    records = [b.state.summary for b in mb.cells]
    for engine, findings in matrix_findings([r for r in records if r is not None]).items():
        ls.store.set(uri, Origin.build, engine, findings)
    ls.publish(uri)
    ls.runs.evict()  # the matrix and its cells count as finished now
    ls.refresh_lenses()


def build_done(ls: TrtlsServer, build: Build | RestoredRun) -> None:
    from trtls.builds.supervisor.outcome_findings import build_findings
    from trtls.core.outcome import STORE_OUTCOME_KIND

    uri = ls.runs.uri(build.id) or ""
    # cell, outcome and the record (its model) as every kind of run answers them (builds.supervisor.runs.BuildRun)
    record = build.record
    if build.cell is None:  # a matrix cell has its own history (engine.cell); the table's last build is not it
        ls.last_build[(uri, build.engine)] = build.id
    if record is not None and build.outcome in STORE_OUTCOME_KIND:
        if build.cell is None:  # a known-good engine is at the output now: the table's last build's findings go
            ls.store.set(uri, Origin.build, build.engine, [])
    elif record is not None:
        # TRT207's quick fix is computed on the recipe as the editor holds it now
        ls.store.set(uri, Origin.build, build.engine, build_findings(record, ls.recipes.get(uri)))
    ls.publish(uri)
    ls.runs.evict()
    ls.refresh_lenses()
    if uri:
        refresh_store_hints(ls, uri)


def refresh_store_hints(ls: TrtlsServer, uri: str) -> None:
    """After a build the engine store's hints change (TRT336 will rebuild, TRT337 the output differs), the recipe does
    not: they are computed again on the recipe as last checked, which is not checked again (a click checks it once;
    an edit made meanwhile was checked by its own didChange, hints included)."""
    loaded = ls.recipes.get(uri)
    if loaded is None or loaded.recipe is None:
        ls.validate(uri)
        return

    async def refresh() -> None:
        from trtls.builds.avoidance.freshness import freshness_findings

        try:
            findings = await asyncio.to_thread(freshness_findings, loaded)
        except Exception:  # the hints are a convenience: the build's own findings are published already
            log.exception("trtls: the store's hints of %s were not computed", uri)
            return
        if ls.recipes.get(uri) is loaded:  # a newer check's own hints are newer than these
            ls.store.set(uri, Origin.build, "freshness", findings)
            ls.publish(uri)

    asyncio.get_running_loop().create_task(refresh(), name=f"trtls-store-hints-{uri}")


MAX_LISTED = 3  # a popup names a few recovered builds; the rest are counted (300 stale records were 19k chars)


async def recover(ls: TrtlsServer, folder: Path) -> None:
    """Builds interrupted by a crashed server: clean up, record, and tell the user once. In a worker thread (300
    stale records took seconds), once at a time per folder."""
    trtls_dir = folder / ".trtls"
    if not trtls_dir.is_dir() or folder in ls.recovering:
        return
    from trtls.builds.supervisor.orphans import recover_orphans
    from trtls.builds.supervisor.outcome_findings import orphan_finding

    ls.recovering.add(folder)
    try:
        found = await asyncio.to_thread(recover_orphans, trtls_dir)
    finally:
        ls.recovering.discard(folder)
    if not found:
        return
    uri = from_fs_path(str(folder / "trtls.toml"))
    if uri:
        for r in found:
            engine = r.engine or ""  # a planted record may name none
            ls.store.set(uri, Origin.build, engine, [orphan_finding(engine, r)])
        if uri in ls.recipes:
            ls.publish(uri)
    ls.window_show_message(lsp.ShowMessageParams(type=lsp.MessageType.Warning, message=recovered_message(found)))


def recovered_message(found: list[RecoveredBuild]) -> str:
    listed = "; ".join(f"{r.engine} ({r.build_id}): {r.message[:200]}" for r in found[:MAX_LISTED])
    more = (
        f"; and {len(found) - MAX_LISTED} more (their evidence is in .trtls/runs/)" if len(found) > MAX_LISTED else ""
    )
    return f"trtls: {len(found)} builds whose supervising process died were cleaned up: {listed}{more}"
