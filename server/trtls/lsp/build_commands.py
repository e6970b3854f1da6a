"""The build commands of the language server: start a build (with a retry's overrides) or a matrix/farm run, fold
their end into diagnostics, and recover builds a crashed server left behind. Loaded on first use (after
`initialize`)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcInvalidParams
from pygls.uris import from_fs_path

from trtls.builds.retry import retry_overrides
from trtls.builds.runs import RestoredRun
from trtls.builds.supervisor import Build
from trtls.core import wire
from trtls.core.findings import Origin
from trtls.lsp.build_relay import BuildRelay, build_tree, notify_build_tree

if TYPE_CHECKING:
    from trtls.lsp.language_server import TrtlsServer


def running_build(ls: TrtlsServer, uri: str, engine: str) -> Build | None:
    for b in ls.runs.running("build"):
        if b.engine == engine and ls.runs.uri(b.id) == uri:
            return b
    return None


async def start_build(ls: TrtlsServer, args: Any) -> wire.BuildEngineReply | wire.BuildMatrixReply:
    """trtls.buildEngine: a build started, one already building, a bad recipe, an engine the store served or a store
    that cannot be used; on a recipe with a [cluster], the farm run of that one cell (trtls.buildMatrix's reply)."""
    loaded = await ls.recipe_async(args.uri)
    ls.store.set(args.uri, Origin.recipe, "", loaded.findings)
    if loaded.recipe is None:
        ls.publish(args.uri)
        errors = [f"{loaded.location(f)}: {f.code} {f.message}" for f in loaded.errors]
        return wire.BuildEngineReply(buildId=None, engine=args.engine, status="invalid_recipe", errors=errors)
    if loaded.recipe.cluster is not None and args.engine in loaded.recipe.engines:  # a farm run of one cell
        from trtls.lsp.command_args import BuildMatrixArgs

        return await start_matrix_build(ls, BuildMatrixArgs(uri=args.uri, engine=args.engine, matrix=False))
    if args.engine not in loaded.recipe.engines:
        raise JsonRpcInvalidParams(
            f"no engine '{args.engine}' in {loaded.path.name} (engines: {', '.join(loaded.recipe.engines) or 'none'})"
        )
    existing = running_build(ls, args.uri, args.engine)
    if existing is not None:
        return wire.BuildEngineReply(buildId=existing.id, engine=args.engine, status="already_building")
    overrides = retry_overrides(args.retry, loaded.engine(args.engine).builder.optimization_level)
    settings = ls.options.settings
    if settings.builder_module:
        overrides["builder_module"] = settings.builder_module
    from trtls.builds.avoidance import attach, before_build  # the engine store (docs/store.md)

    use, done = await before_build(loaded, args.engine, overrides)
    if done is not None:  # reused from the store (no worker, no TensorRT) or a store that cannot be used
        from trtls.builds.avoidance import reply_of

        if done.get("outcome") == "reused":
            finish_restored(ls, args.uri, done, loaded.path)
        else:
            ls.refresh_lenses()
        return wire.BuildEngineReply.model_validate({"engine": args.engine, **reply_of(done, loaded.path)})
    build = ls.supervisor.start(loaded, args.engine, overrides=overrides)
    if use is not None:
        attach(use, build)
    if settings.cancel_grace_s:
        build.grace_s = settings.cancel_grace_s
    if args.retry:
        previous = ls.last_build.get((args.uri, args.engine))
        build.notes.append(
            f"retry ({args.retry}) of build {previous}; its logs and settings stay in its evidence folder"
        )
    ls.runs.add(build, "build", args.uri)
    has_progress = bool(ls.client_capabilities.window and ls.client_capabilities.window.work_done_progress)
    relay = BuildRelay(ls, build, args.uri, ls.options.build_tree, has_progress, lambda b: build_done(ls, b))
    await relay.start()
    ls.refresh_lenses()
    return wire.BuildEngineReply(buildId=build.id, engine=args.engine, status="started")


async def start_matrix_build(ls: TrtlsServer, args: Any) -> wire.BuildMatrixReply:
    """A matrix or farm run: one parent, one cell build each (docs/farm.md). Refused with located findings
    when the recipe is bad or no node can hold some cell (nothing is submitted then)."""
    from trtls.builds.matrix import plan
    from trtls.lsp.matrix_relay import MatrixRelay

    loaded = await ls.recipe_async(args.uri)
    ls.store.set(args.uri, Origin.recipe, "", loaded.findings)
    if loaded.recipe is None:
        ls.publish(args.uri)
        return wire.BuildMatrixReply(buildId=None, status="invalid_recipe", errors=[f.message for f in loaded.errors])
    engines = [args.engine] if args.engine else list(loaded.recipe.engines)
    unknown = [e for e in engines if e not in loaded.recipe.engines]
    if unknown:
        raise JsonRpcInvalidParams(f"no engine '{unknown[0]}' in {loaded.path.name}")
    planned = plan(loaded, engines, args.matrix, {})
    if args.cell:
        planned = [p for p in planned if p.cell and p.cell.name == args.cell]
    if not planned:
        raise JsonRpcInvalidParams(f"no matrix cell named '{args.cell}'")
    from trtls.builds.avoidance import attach_cells, avoid_cells

    found = await avoid_cells(loaded, planned)  # a cell whose key is in the store costs no worker, no node
    for w in found.warnings:
        ls.window_log_message(lsp.LogMessageParams(type=lsp.MessageType.Warning, message=f"trtls: {w}"))
    reused = [reused_cell(p, summary, loaded.path) for p, summary in found.reused]
    if not found.left:  # every cell is up to date: no run starts
        for p, summary in found.reused:
            finish_restored(ls, args.uri, summary, loaded.path, cell=p.cell.name if p.cell else None)
        return wire.BuildMatrixReply(buildId=None, status="reused", reused=reused)
    try:
        mb = await _start_matrix(ls, args, loaded, engines, found.left)
    except BaseException:
        found.release()
        raise
    if isinstance(mb, wire.BuildMatrixReply):  # refused: nothing was submitted
        found.release()
        return mb

    def on_follower(cell: str, summary: dict[str, Any] | None, said: str) -> None:
        """A cell of the same key as one this matrix built: its restored row, or a warning that it has no engine."""
        if summary is not None:
            finish_restored(ls, args.uri, summary, loaded.path, cell=cell.split("/", 1)[-1], parent_id=mb.id)
        else:
            ls.window_show_message(
                lsp.ShowMessageParams(type=lsp.MessageType.Warning, message=f"TensorRT: {cell}: {said}")
            )

    attach_cells(mb, found.uses, on_follower)
    for p, summary in found.reused:
        finish_restored(ls, args.uri, summary, loaded.path, cell=p.cell.name if p.cell else None, parent_id=mb.id)
    ls.runs.add(mb, "matrix", args.uri)
    for cell in mb.cells:
        ls.runs.add(cell, "build", args.uri)
    # a cell started later (it waited for a node) is registered at its first event
    mb.listeners.append(lambda m, b, ev: ls.runs.add(b, "build", args.uri) if b is not None else None)
    has_progress = bool(ls.client_capabilities.window and ls.client_capabilities.window.work_done_progress)
    relay = MatrixRelay(ls, mb, args.uri, ls.options.build_tree, has_progress, lambda m: matrix_done(ls, m))
    await relay.start()
    return wire.BuildMatrixReply(
        buildId=mb.id,
        status="started",
        cells=[wire.MatrixCellPlan(cell=p.key, engine=p.engine) for p in found.left],
        reused=reused,
    )


async def _start_matrix(ls: TrtlsServer, args: Any, loaded: Any, engines: list[str], planned: list[Any]) -> Any:
    """Start the matrix of the cells to build, or the refusal (the reply) when no node can hold some cell."""
    from trtls.builds.matrix import start_matrix

    remote_for = None
    if loaded.recipe.cluster is not None:
        from trtls.builds.farm.submit import prepare

        specs = await prepare(loaded, planned)
        if isinstance(specs, list):  # located on the recipe keys that no node can satisfy
            for engine in {f.path[1] for f in specs if len(f.path) > 1} or set(engines):
                ls.store.set(args.uri, Origin.build, engine, [f for f in specs if engine in f.path[:2]])
            if any(len(f.path) < 2 for f in specs):
                ls.store.set(args.uri, Origin.build, "[cluster]", [f for f in specs if len(f.path) < 2])
            ls.publish(args.uri)
            errors = [f"{f.code} {f.message}" for f in specs]
            return wire.BuildMatrixReply(buildId=None, status="refused", errors=errors)
        remote_for = lambda p: specs[p.key]  # noqa: E731
    title = (args.engine or loaded.path.parent.name) + (" matrix" if args.matrix else "")
    return start_matrix(ls.supervisor, loaded, planned, title, remote_for)


def reused_cell(planned: Any, summary: dict[str, Any], recipe: Path) -> wire.ReusedCell:
    """A cell the store served, as trtls.buildMatrix lists it."""
    evidence = recipe.parent / ".trtls" / "runs" / summary["buildId"] / "summary.json"
    return wire.ReusedCell(cell=planned.key, engine=planned.engine, buildId=summary["buildId"],
                           message=summary.get("message"), evidencePath=str(evidence))  # fmt: skip


def finish_restored(
    ls: TrtlsServer, uri: str, summary: dict[str, Any], recipe: Path, cell: str | None = None,
    parent_id: str | None = None,
) -> RestoredRun:  # fmt: skip
    """A build that started no worker — reused from the engine store, or rolled back (trtls.rollbackEngine) — as a
    finished run: registered (listBuilds, showEvidence, buildReport know its id), drawn once in the TensorRT Builds
    view (one final `trtls/buildTree`), and the recipe re-checked as after a build (lens, TRT336/TRT337)."""
    run = RestoredRun(summary, recipe, cell, parent_id)
    ls.runs.add(run, "build", uri)
    if ls.options.build_tree:
        notify_build_tree(ls, build_tree(uri, run.snapshot()))
    build_done(ls, run)
    return run


def matrix_done(ls: TrtlsServer, mb: Any) -> None:
    from trtls.builds.outcome_findings import matrix_findings

    uri = ls.runs.uri(mb.id) or ""
    for engine, findings in matrix_findings([b.summary for b in mb.cells if b.summary]).items():
        ls.store.set(uri, Origin.build, engine, findings)
    ls.publish(uri)
    ls.runs.evict()  # the matrix and its cells count as finished now
    ls.refresh_lenses()


def build_done(ls: TrtlsServer, build: Build | RestoredRun) -> None:
    from trtls.builds.outcome_findings import build_findings
    from trtls.core.outcome import STORE_OUTCOME_KIND

    uri = ls.runs.uri(build.id) or ""
    if build.cell is None:  # a matrix cell has its own history (engine.cell); the table's last build is not it
        ls.last_build[(uri, build.engine)] = build.id
    if build.summary is not None and build.outcome in STORE_OUTCOME_KIND:
        if build.cell is None:  # a known-good engine is at the output now: the table's last build's findings go
            ls.store.set(uri, Origin.build, build.engine, [])
    elif build.summary is not None:
        ls.store.set(uri, Origin.build, build.engine, build_findings(build.summary))
    ls.publish(uri)
    ls.runs.evict()
    ls.refresh_lenses()
    if uri:
        ls.validate(uri)  # the engine store's hints (TRT336 will rebuild) change with a build


MAX_LISTED = 3  # a popup names a few recovered builds; the rest are counted (300 stale records were 19k chars)


async def recover(ls: TrtlsServer, folder: Path) -> None:
    """Builds interrupted by a crashed server: clean up, record, and tell the user once. In a worker thread (300
    stale records took seconds), once at a time per folder."""
    trtls_dir = folder / ".trtls"
    if not trtls_dir.is_dir() or folder in ls.recovering:
        return
    from trtls.builds.orphans import recover_orphans
    from trtls.builds.outcome_findings import orphan_finding

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
            ls.store.set(uri, Origin.build, r["engine"], [orphan_finding(r["engine"], r)])
        if uri in ls.recipes:
            ls.publish(uri)
    ls.window_show_message(lsp.ShowMessageParams(type=lsp.MessageType.Warning, message=recovered_message(found)))


def recovered_message(found: list[dict[str, Any]]) -> str:
    listed = "; ".join(f"{r['engine']} ({r['buildId']}): {r['message'][:200]}" for r in found[:MAX_LISTED])
    more = (
        f"; and {len(found) - MAX_LISTED} more (their evidence is in .trtls/runs/)" if len(found) > MAX_LISTED else ""
    )
    return f"trtls: {len(found)} builds whose supervising process died were cleaned up: {listed}{more}"
