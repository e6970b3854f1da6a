"""`trtls.reduceEngine {uri, engine}` and `trtls.findDivergence {uri, engine | route, fix}` (or `{uri, candidate,
reference?, engine?}`: two given models, lsp/triage_pair.py): the triage jobs as
stoppable runs in the editor (docs/triage.md). A reduction returns its id at once; its progress is one
workDoneProgress (the Stop button cancels the current trial), every trial is a build in the TensorRT Builds view,
and the result is a located diagnostic (TRT980) with its quick actions. Logic lives in `trtls.triage`."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcInvalidParams

from trtls.app.results import Refused
from trtls.core import wire
from trtls.core.findings import Origin
from trtls.core.outcome import OutcomeKind
from trtls.lsp.progress import begin_stoppable_progress, wants_progress

if TYPE_CHECKING:
    from trtls.builds.supervisor.build import Build
    from trtls.core.triage_records import DivergenceResult
    from trtls.lsp.command_args import BuildMinimalArgs, FindDivergenceArgs, ReduceEngineArgs, ShowDocumentArgs
    from trtls.lsp.language_server import TrtlsServer
    from trtls.triage.trials import Trial


def refused_request(refused: Refused) -> JsonRpcInvalidParams:
    from trtls.lsp.build_commands import refused_request as invalid_params

    return invalid_params(refused)


async def start_reduction(ls: TrtlsServer, args: ReduceEngineArgs) -> wire.ReduceEngineReply:
    from trtls.app.triage import request_reduction
    from trtls.lsp.build_relay import BuildRelay
    from trtls.triage.evidence import headline
    from trtls.triage.findings import reduction_finding

    loaded = await ls.recipe_async(args.uri)
    asked = await request_reduction(
        loaded, args.engine, max_trials=args.maxTrials, fail_regex=args.failRegex, resume=args.resume
    )
    if isinstance(asked, Refused):  # the terminal's refusal, code first: the same mistake reads the same
        raise refused_request(asked)
    run, red = asked, asked.red
    ls.runs.add(run, "reduction", args.uri)
    progress = None
    if wants_progress(ls):
        begin = lsp.WorkDoneProgressBegin(title=f"Reduce {args.engine}", cancellable=True, message="trial 0")
        progress = begin_stoppable_progress(ls, "reduce", begin, lambda: run.cancel("ide_stop"))

    def on_trial(_trial: Trial, build: Build) -> None:  # each trial is a build in the TensorRT Builds view
        ls.runs.add(build, "build", args.uri)
        relay = BuildRelay(ls, build, args.uri, ls.options.build_tree, False, lambda b: ls.runs.evict())
        asyncio.ensure_future(relay.start())
        if progress is not None:
            progress.report(lsp.WorkDoneProgressReport(message=headline(red)))

    run.runner.listeners.append(on_trial)

    async def finish() -> None:
        result = await run.run()
        ls.store.set(args.uri, Origin.build, f"reduce:{args.engine}", [reduction_finding(result)])
        ls.publish(args.uri)
        ls.runs.evict()
        if progress is not None:
            # ok as the terminal's exit 0 (ReductionResult.found): a cause found, not a budget spent before any
            kind: OutcomeKind = "cancelled" if result.outcome == "cancelled" else "ok" if result.found else "failed"
            said = f"{result.headline}: {result.causeText}"
            if result.evidenceError:
                said, kind = f"{said} — {result.evidenceError}", "failed"
            progress.end(said, result.outcome, kind)

    asyncio.ensure_future(finish())
    return wire.ReduceEngineReply(reductionId=red.id, engine=args.engine, status="started")


async def find_divergence(ls: TrtlsServer, args: FindDivergenceArgs) -> wire.FindDivergenceReply:
    """Start the search and answer at once with its id; one workDoneProgress (its Cancel stops the search, as
    trtls.cancelBuild {buildId: id} does), the result a TRT981 whose quick fix adds `exclude_nodes` (none for two
    given models: there is no conversion to exclude the node from)."""
    from trtls.app.triage import request_divergence
    from trtls.lsp.triage_pair import judged_models
    from trtls.triage.findings import divergence_finding

    candidate, reference = judged_models(ls, args)
    loaded = await ls.recipe_async(args.uri)
    asked = await request_divergence(
        loaded,
        engine=args.engine,
        route=args.route,
        candidate=candidate,
        reference=reference,
        fix=args.fix,
        tensorrt=candidate is None,  # the engine's layers too; `not_checked` with the reason where none can run
    )
    if isinstance(asked, Refused):
        raise refused_request(asked)
    run = asked
    ls.runs.add(run, "divergence", args.uri)
    progress = None
    if wants_progress(ls):
        title = f"Find the first diverging layer: {args.route or run.engine}"
        if run.pair is not None:
            title = f"Find the first diverging layer: {run.pair[1].name} against {run.pair[0].name}"
        begin = lsp.WorkDoneProgressBegin(title=title, cancellable=True, message=run.step)
        progress = begin_stoppable_progress(ls, "diverge", begin, lambda: run.cancel("ide_stop"))
        run.listeners.append(lambda text: progress.report(lsp.WorkDoneProgressReport(message=text)))

    async def finish() -> None:
        result = await run.run()
        fix = None if run.pair is not None else await _fix_for(ls, args.uri, result)
        finding = divergence_finding(result, fix)
        ls.store.set(args.uri, Origin.build, f"diverge:{run.what}", [finding])
        ls.publish(args.uri)
        ls.runs.evict()
        if progress is not None:
            kind: OutcomeKind = "cancelled" if result.cancelled else "failed" if run.error else "ok"
            progress.end(finding.message, run.status, kind)

    asyncio.ensure_future(finish())
    return wire.FindDivergenceReply(divergenceId=run.id, engine=run.engine, route=args.route, status="started")


async def _fix_for(ls: TrtlsServer, uri: str, result: DivergenceResult) -> dict[str, Any] | None:
    """The exclude_nodes edit, on the recipe as the editor holds it now."""
    from trtls.triage.exclude_edit import exclude_nodes_fix
    from trtls.triage.findings import measured_exclusion

    nodes = measured_exclusion(result)  # only an exclusion measured to pass is offered
    if nodes is None:
        return None
    loaded = await ls.recipe_async(uri)
    return exclude_nodes_fix(loaded, result.engine, nodes, route=result.route)


async def show_document(ls: TrtlsServer, args: ShowDocumentArgs) -> wire.ShowDocumentReply:
    """Open a file the server produced (the minimal model) in the client: window/showDocument."""
    from trtls.lsp.documents import shown_file

    path = shown_file(args.path, ls.workspace.text_documents, ls.folders())
    result = await ls.window_show_document_async(lsp.ShowDocumentParams(uri=path.as_uri(), external=True))
    return wire.ShowDocumentReply(shown=bool(getattr(result, "success", False)))


def triage_actions(uri: str, diagnostics: list[lsp.Diagnostic]) -> list[lsp.CodeAction]:
    """Quick actions: reduce a TRT206 failure; find the diverging layer of a TRT805 reject; open or build the
    minimal model of a TRT980 result."""
    out: list[lsp.CodeAction] = []
    for d in diagnostics:
        data = d.data if isinstance(d.data, dict) else {}
        path = data.get("path") or []
        table = path[1] if len(path) > 1 else None
        if d.code == "TRT206" and path[:1] == ["engines"] and table:
            out.append(_action("Reduce the failing model", d, "trtls.reduceEngine", {"uri": uri, "engine": table}))
        elif d.code == "TRT805" and path[:1] == ["routes"] and table:
            args = {"uri": uri, "route": table, "fix": True}  # measured: a quick fix only for what passes
            out.append(_action("Find the first diverging layer", d, "trtls.findDivergence", args))
        elif d.code == "TRT980" and data.get("minimalModel"):
            out.append(_action("Open the minimal model", d, "trtls.showDocument", {"path": data["minimalModel"]}))
            args = {"uri": uri, "reductionId": data.get("reductionId"), "engine": data.get("engine")}
            out.append(_action("Build the minimal model", d, "trtls.buildMinimal", args))
    return out


def _action(title: str, diagnostic: lsp.Diagnostic, command: str, argument: dict[str, Any]) -> lsp.CodeAction:
    return lsp.CodeAction(
        title=title,
        kind=lsp.CodeActionKind.QuickFix,
        diagnostics=[diagnostic],
        command=lsp.Command(title=title, command=command, arguments=[argument]),
    )


async def build_minimal(ls: TrtlsServer, args: BuildMinimalArgs) -> wire.BuildMinimalReply:
    """A real build of a reduction's minimal model with the engine's settings, into the reduction's folder (never
    the engine's output), shown in the TensorRT Builds view like any build. A result.json that is missing or damaged
    (a field of the wrong type) is refused with its path and the field, never a traceback."""
    from trtls.app.results import Started
    from trtls.builds.supervisor.job import state_dir
    from trtls.core.triage_records import RESULT_NAME, ResultProblem, read_reduction_result
    from trtls.lsp.build_relay import BuildRelay

    loaded = await ls.recipe_async(args.uri)
    if loaded.recipe is None or args.engine not in loaded.recipe.engines:
        raise JsonRpcInvalidParams(f"no buildable engine '{args.engine}'")
    folder = state_dir(loaded.path) / "reduce" / Path(args.reductionId).name
    result = read_reduction_result(folder / RESULT_NAME)  # a record, never a link
    if isinstance(result, ResultProblem):
        if result.message.startswith("cannot read"):  # none there (or not a regular file): no such reduction
            raise JsonRpcInvalidParams(f"no reduction '{args.reductionId}' with a result in {folder.parent}")
        raise JsonRpcInvalidParams(f"reduction '{args.reductionId}': {result}")
    if result.engine != args.engine:  # its model with another engine's settings and profiles is no reproduction
        raise JsonRpcInvalidParams(
            f"reduction '{args.reductionId}' reduced engine '{result.engine}', not '{args.engine}'"
        )
    if result.minimal is None:
        raise JsonRpcInvalidParams(f"reduction '{args.reductionId}' found no minimal model")
    overrides = {
        "onnx": str(folder / "minimal.onnx"),
        "output": str(folder / "minimal.engine"),
        "profiles": result.minimal.profiles,
        "cache_mode": "off",
    }
    from trtls.app.build import request_build

    # the reduction's folder, not the engine's output: never looked up in the store nor published there
    started = await request_build(
        ls.supervisor,
        loaded,
        args.engine,
        overrides=overrides,
        scratch=True,
        parent_id=args.reductionId,
        runs=ls.runs,
        scope=args.uri,
    )
    assert isinstance(started, Started)  # the recipe and the engine were checked above; no store was asked
    build = started.build
    relay = BuildRelay(ls, build, args.uri, ls.options.build_tree, wants_progress(ls), lambda b: ls.runs.evict())
    await relay.start()
    return wire.BuildMinimalReply(buildId=build.id, engine=args.engine, status="started")
