"""`trtls.reduceEngine {uri, engine}` and `trtls.findDivergence {uri, engine | route, fix}` (or `{uri, candidate,
reference?, engine?}`: two given models, lsp/triage_pair.py): the triage jobs as
stoppable runs in the editor (docs/triage.md). A reduction returns its id at once; its progress is one
workDoneProgress (the Stop button cancels the current trial), every trial is a build in the TensorRT Builds view,
and the result is a located diagnostic (TRT980) with its quick actions. Logic lives in `trtls.triage`."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcInvalidParams

from trtls.core import wire
from trtls.core.findings import Origin
from trtls.core.outcome import OutcomeKind
from trtls.lsp.progress_end import begin_stoppable_progress, end_progress

if TYPE_CHECKING:
    from trtls.builds.supervisor.build import Build
    from trtls.core.cancel import CancelToken
    from trtls.lsp.command_args import BuildMinimalArgs, FindDivergenceArgs, ReduceEngineArgs, ShowDocumentArgs
    from trtls.lsp.language_server import TrtlsServer
    from trtls.triage.diverge_run import DivergenceSetup
    from trtls.triage.reduce_build import Reduction
    from trtls.triage.trials import Trial


@dataclass
class ReductionRun:
    """A reduction as the registry of runs holds it (trtls.builds.supervisor.runs.Run)."""

    red: Reduction
    summary: dict[str, Any] | None = None

    @property
    def id(self) -> str:
        return str(self.red.id)

    @property
    def running(self) -> bool:
        return self.summary is None

    @property
    def status(self) -> str:
        return "running" if self.summary is None else str(self.summary["outcome"])

    @property
    def evidence_dir(self) -> Path:
        return Path(self.red.folder)

    def cancel(self, source: str) -> bool:
        return self.summary is None and bool(self.red.token.request(source))

    def evidence_file(self) -> Path | None:
        """result.json, claimed only once it was written (TRT413 `evidenceError` otherwise)."""
        return self.evidence_dir / "result.json" if self.summary is not None and not self.error_text else None

    def row(self, uri: str) -> wire.ListedBuild:
        """The reduction as trtls.listBuilds lists it: its trials are the builds whose parentId is this id."""
        from trtls.triage.evidence import headline

        evidence = self.evidence_file()
        return wire.ListedBuild(
            buildId=self.id,
            engine=self.red.engine,
            uri=uri,
            kind="reduction",
            status=self.status,
            cancelSource=self.red.token.source,
            headline=headline(self.red),
            evidencePath=str(evidence) if evidence else None,
            evidenceError=self.error_text,
        )

    @property
    def error_text(self) -> str | None:
        """Why the reduction's evidence could not be written (TRT413), or None."""
        return (self.summary or {}).get("evidenceError")


async def start_reduction(ls: TrtlsServer, args: ReduceEngineArgs) -> wire.ReduceEngineReply:
    from trtls.lsp.build_relay import BuildRelay
    from trtls.triage.evidence import headline, write_evidence
    from trtls.triage.findings import reduction_finding
    from trtls.triage.reduce_build import new_reduction, run_reduction
    from trtls.triage.trials import TrialRunner

    loaded = await ls.recipe_async(args.uri)
    if loaded.recipe is None or args.engine not in loaded.recipe.engines:
        raise JsonRpcInvalidParams(f"no buildable engine '{args.engine}' in {loaded.path.name}")
    red = new_reduction(loaded, args.engine, args.maxTrials, args.failRegex)
    if args.resume:  # as `trtls reduce --resume`: the note (what is replayed, or why it starts over) is in the record
        from trtls.triage.resume import prepare_resume

        try:
            red.resume_note = await prepare_resume(loaded, args.engine, red)
        except OSError as exc:
            raise JsonRpcInvalidParams(f"cannot read the model to resume: {exc}") from None
    runner = TrialRunner(loaded, args.engine, red.folder, red.id)
    run = ReductionRun(red)
    ls.runs.add(run, "reduction", args.uri)
    has_progress = bool(ls.client_capabilities.window and ls.client_capabilities.window.work_done_progress)
    token = None
    if has_progress:
        begin = lsp.WorkDoneProgressBegin(title=f"Reduce {args.engine}", cancellable=True, message="trial 0")
        token = await begin_stoppable_progress(ls, "reduce", begin, lambda: run.cancel("ide_stop"))

    def on_trial(_trial: Trial, build: Build) -> None:  # each trial is a build in the TensorRT Builds view
        ls.runs.add(build, "build", args.uri)
        relay = BuildRelay(ls, build, args.uri, ls.options.build_tree, False, lambda b: ls.runs.evict())
        asyncio.ensure_future(relay.start())
        if token is not None:
            ls.work_done_progress.report(token, lsp.WorkDoneProgressReport(message=headline(red)))

    runner.listeners.append(on_trial)

    async def finish() -> None:
        try:
            await run_reduction(loaded, args.engine, red, runner)
        except Exception as exc:  # an unreadable model, a probe ONNX Runtime refused: the record says it
            red.error = f"{type(exc).__name__}: {exc}"
        record = write_evidence(red, loaded.path, loaded.resolve(loaded.engine(args.engine).onnx))
        run.summary = record
        ls.store.set(args.uri, Origin.build, f"reduce:{args.engine}", [reduction_finding(record)])
        ls.publish(args.uri)
        ls.runs.evict()
        if token is not None:
            kind: OutcomeKind = "cancelled" if record["outcome"] == "cancelled" else "failed" if red.error else "ok"
            said = f"{record['headline']}: {record['causeText']}"
            if record.get("evidenceError"):
                said, kind = f"{said} — {record['evidenceError']}", "failed"
            end_progress(ls, token, said, record["outcome"], kind)

    asyncio.ensure_future(finish())
    return wire.ReduceEngineReply(reductionId=red.id, engine=args.engine, status="started")


@dataclass
class DivergenceRun:
    """A divergence search as the registry of runs holds it (kind "divergence": listed, stopped by
    trtls.cancelBuild with its id, its record by trtls.showEvidence)."""

    id: str
    engine: str | None  # None: a route that deploys its ONNX (converted by [routes.X.precision])
    route: str | None
    folder: Path
    token: CancelToken
    step: str = "starting"
    summary: dict[str, Any] | None = None
    error: str | None = None

    @property
    def running(self) -> bool:
        return self.summary is None

    @property
    def status(self) -> str:
        if self.summary is None:
            return "running"
        return "cancelled" if self.summary.get("cancelled") else "failed" if self.error else "done"

    @property
    def evidence_dir(self) -> Path:
        return self.folder

    def cancel(self, source: str) -> bool:
        return self.summary is None and bool(self.token.request(source))

    def evidence_file(self) -> Path | None:
        """divergence.json, once the search wrote it (trtls.triage.diverge_run)."""
        path = self.folder / "divergence.json"
        return path if self.summary is not None and path.is_file() else None

    def row(self, uri: str) -> wire.ListedBuild:
        evidence = self.evidence_file()
        return wire.ListedBuild(
            buildId=self.id,
            engine=self.engine or self.route or "?",
            uri=uri,
            route=self.route,
            kind="divergence",
            status=self.status,
            cancelSource=self.token.source,
            headline=f"diverge {self.route or self.engine} · {self.step}",
            evidencePath=str(evidence) if evidence else None,
        )


async def find_divergence(ls: TrtlsServer, args: FindDivergenceArgs) -> wire.FindDivergenceReply:
    """Start the search and answer at once with its id; one workDoneProgress (its Cancel stops the search, as
    trtls.cancelBuild {buildId: id} does), the result a TRT981 whose quick fix adds `exclude_nodes`."""
    from trtls.builds.supervisor.build import new_build_id, state_dir
    from trtls.core.cancel import CancelToken
    from trtls.triage.diverge_run import DivergenceUnavailable, run_divergence, setup_divergence

    if args.candidate is not None:  # two given models (`--candidate`): lsp/triage_pair.py
        from trtls.lsp.triage_pair import find_pair_divergence

        return await find_pair_divergence(ls, args, DivergenceRun)
    if args.reference is not None:
        raise JsonRpcInvalidParams("reference needs candidate: the model compared with it")
    if (args.engine is None) == (args.route is None):
        raise JsonRpcInvalidParams("give one of engine or route")
    loaded = await ls.recipe_async(args.uri)
    if loaded.recipe is None:
        raise JsonRpcInvalidParams(f"{loaded.path.name} has errors: fix them first")
    try:
        setup = setup_divergence(loaded, engine=args.engine, route=args.route)
    except (DivergenceUnavailable, KeyError) as exc:
        raise JsonRpcInvalidParams(str(exc).strip("'\"")) from None
    rid = new_build_id(f"diverge-{setup.engine or setup.route}")
    run = DivergenceRun(rid, setup.engine, args.route, state_dir(loaded.path) / "reduce" / rid, CancelToken())
    ls.runs.add(run, "divergence", args.uri)
    has_progress = bool(ls.client_capabilities.window and ls.client_capabilities.window.work_done_progress)
    token = None
    if has_progress:
        title = f"Find the first diverging layer: {args.route or setup.engine}"
        begin = lsp.WorkDoneProgressBegin(title=title, cancellable=True, message="starting")
        token = await begin_stoppable_progress(ls, "diverge", begin, lambda: run.cancel("ide_stop"))
    loop = asyncio.get_running_loop()

    def step(text: str) -> None:  # on the loop: the search runs in a thread
        run.step = text
        if token is not None and run.summary is None:
            ls.work_done_progress.report(token, lsp.WorkDoneProgressReport(message=text))

    def report(text: str) -> None:
        loop.call_soon_threadsafe(step, text)

    async def finish() -> None:
        try:
            record = await asyncio.to_thread(
                run_divergence, loaded, fix=args.fix, token=run.token, rid=rid, report=report, setup=setup,
                tensorrt=True,  # the engine's layers too; `not_checked` with the reason where none can run
            )  # fmt: skip
        except Exception as exc:  # ModelOpt missing or failing, unreadable inputs: the record says it
            run.error = f"{type(exc).__name__}: {exc}"
            record = _failed_record(run, setup, run.error)
        run.summary = record
        finding = divergence_finding(record, await _fix_for(ls, args.uri, record))
        ls.store.set(args.uri, Origin.build, f"diverge:{args.route or setup.engine}", [finding])
        ls.publish(args.uri)
        ls.runs.evict()
        if token is not None:
            kind: OutcomeKind = "cancelled" if record.get("cancelled") else "failed" if run.error else "ok"
            end_progress(ls, token, finding.message, run.status, kind)

    from trtls.triage.findings import divergence_finding

    asyncio.ensure_future(finish())
    return wire.FindDivergenceReply(divergenceId=rid, engine=setup.engine, route=args.route, status="started")


def _failed_record(run: DivergenceRun, setup: DivergenceSetup, error: str) -> dict[str, Any]:
    return {
        "kind": "divergence", "id": run.id, "engine": run.engine, "route": run.route,
        "precision": setup.spec["convert"], "rangeRtol": setup.threshold, "firstDiverging": None,
        "cancelled": run.token.is_set, "cancelSource": run.token.source, "error": error, "rounds": [],
        "folder": str(run.folder),
    }  # fmt: skip


async def _fix_for(ls: TrtlsServer, uri: str, record: dict[str, Any]) -> dict[str, Any] | None:
    """The exclude_nodes edit, on the recipe as the editor holds it now."""
    from trtls.triage.exclude_edit import exclude_nodes_fix
    from trtls.triage.findings import measured_exclusion

    nodes = measured_exclusion(record)  # only an exclusion measured to pass is offered
    if nodes is None:
        return None
    loaded = await ls.recipe_async(uri)
    return exclude_nodes_fix(loaded, record["engine"], nodes, route=record.get("route"))


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
    the engine's output), shown in the TensorRT Builds view like any build."""
    import json

    from trtls.app.results import Started
    from trtls.builds.supervisor.build import state_dir
    from trtls.fs import read_text
    from trtls.lsp.build_relay import BuildRelay

    loaded = await ls.recipe_async(args.uri)
    if loaded.recipe is None or args.engine not in loaded.recipe.engines:
        raise JsonRpcInvalidParams(f"no buildable engine '{args.engine}'")
    folder = state_dir(loaded.path) / "reduce" / Path(args.reductionId).name
    try:
        record = json.loads(read_text(folder / "result.json", limit=16 << 20, follow=False))  # a record, never a link
        if not isinstance(record, dict):
            raise ValueError("not a record")
    except (OSError, ValueError):
        raise JsonRpcInvalidParams(f"no reduction '{args.reductionId}' with a result in {folder.parent}") from None
    if not record.get("minimal"):
        raise JsonRpcInvalidParams(f"reduction '{args.reductionId}' found no minimal model")
    overrides = {
        "onnx": str(folder / "minimal.onnx"),
        "output": str(folder / "minimal.engine"),
        "profiles": record["minimal"]["profiles"],
        "cache_mode": "off",
    }
    from trtls.app.build import request_build

    # the reduction's folder, not the engine's output: never looked up in the store nor published there
    started = await request_build(
        ls.supervisor, loaded, args.engine, overrides=overrides, scratch=True, parent_id=args.reductionId,
        runs=ls.runs, scope=args.uri,
    )  # fmt: skip
    assert isinstance(started, Started)  # the recipe and the engine were checked above; no store was asked
    build = started.build
    has_progress = bool(ls.client_capabilities.window and ls.client_capabilities.window.work_done_progress)
    relay = BuildRelay(ls, build, args.uri, ls.options.build_tree, has_progress, lambda b: ls.runs.evict())
    await relay.start()
    return wire.BuildMinimalReply(buildId=build.id, engine=args.engine, status="started")
