"""`trtls.reduceEngine {uri, engine}` and `trtls.findDivergence {uri, engine | route, fix}`: the triage jobs as
stoppable runs in the editor (docs/triage.md). A reduction returns its id at once; its progress is one
workDoneProgress (the Stop button cancels the current trial), every trial is a build in the TensorRT Builds view,
and the result is a located diagnostic (TRT980) with its quick actions. Logic lives in `trtls.triage`."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcInvalidParams

from trtls.core.findings import Origin
from trtls.core.outcome import OutcomeKind
from trtls.lsp.command_args import BuildMinimalArgs, FindDivergenceArgs, ReduceEngineArgs, ShowDocumentArgs, parse_args
from trtls.lsp.progress_end import begin_stoppable_progress, end_progress


@dataclass
class ReductionRun:
    """A reduction as the registry of runs holds it (trtls.builds.runs.Run)."""

    red: Any  # trtls.triage.reduce_build.Reduction
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

    def row(self) -> dict[str, Any]:
        """The reduction as trtls.listBuilds lists it: its trials are the builds whose parentId is this id."""
        from trtls.triage.evidence import headline

        return {
            "buildId": self.id,
            "engine": self.red.engine,
            "kind": "reduction",
            "status": self.status,
            "cancelSource": self.red.token.source,
            "headline": headline(self.red),
            "evidencePath": str(self.evidence_dir / "result.json") if self.summary else None,
        }


async def start_reduction(ls: Any, raw: Any) -> dict[str, Any]:
    from trtls.lsp.build_relay import BuildRelay
    from trtls.triage.evidence import headline, write_evidence
    from trtls.triage.findings import reduction_finding
    from trtls.triage.reduce_build import new_reduction, run_reduction
    from trtls.triage.trials import TrialRunner

    args = parse_args(ReduceEngineArgs, raw)
    loaded = await ls.recipe_async(args.uri)
    if loaded.recipe is None or args.engine not in loaded.recipe.engines:
        raise JsonRpcInvalidParams(f"no buildable engine '{args.engine}' in {loaded.path.name}")
    red = new_reduction(loaded, args.engine, args.maxTrials)
    runner = TrialRunner(loaded, args.engine, red.folder, red.id)
    run = ReductionRun(red)
    ls.runs.add(run, "reduction", args.uri)
    has_progress = bool(ls.client_capabilities.window and ls.client_capabilities.window.work_done_progress)
    token = None
    if has_progress:
        begin = lsp.WorkDoneProgressBegin(title=f"Reduce {args.engine}", cancellable=True, message="trial 0")
        token = await begin_stoppable_progress(ls, "reduce", begin, lambda: run.cancel("ide_stop"))

    def on_trial(_trial: Any, build: Any) -> None:  # each trial is a build in the TensorRT Builds view
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
            end_progress(ls, token, f"{record['headline']}: {record['causeText']}", record["outcome"], kind)

    asyncio.ensure_future(finish())
    return {"reductionId": red.id, "engine": args.engine, "status": "started"}


async def find_divergence(ls: Any, raw: Any) -> dict[str, Any]:
    from trtls.triage.diverge_run import DivergenceUnavailable, run_divergence
    from trtls.triage.findings import divergence_finding

    args = parse_args(FindDivergenceArgs, raw)
    if (args.engine is None) == (args.route is None):
        raise JsonRpcInvalidParams("give one of engine or route")
    loaded = await ls.recipe_async(args.uri)
    if loaded.recipe is None:
        raise JsonRpcInvalidParams(f"{loaded.path.name} has errors: fix them first")
    try:
        record = await asyncio.to_thread(run_divergence, loaded, engine=args.engine, route=args.route, fix=args.fix)
    except (DivergenceUnavailable, KeyError) as exc:
        raise JsonRpcInvalidParams(str(exc).strip("'\"")) from None
    finding = divergence_finding(record)
    ls.store.set(args.uri, Origin.build, f"diverge:{args.route or args.engine}", [finding])
    ls.publish(args.uri)
    keep = ("id", "engine", "route", "precision", "firstDiverging", "proposal", "fixed", "excludeNodes", "folder")
    return {**{k: record.get(k) for k in keep}, "message": finding.message}


async def show_document(ls: Any, raw: Any) -> dict[str, Any]:
    """Open a file the server produced (the minimal model) in the client: window/showDocument."""
    args = parse_args(ShowDocumentArgs, raw)
    path = Path(args.path)
    if ".trtls" not in path.parts or not path.is_file():
        raise JsonRpcInvalidParams("only a file trtls wrote under .trtls/ can be shown this way")
    result = await ls.show_document_async(lsp.ShowDocumentParams(uri=path.as_uri(), external=True))
    return {"shown": bool(getattr(result, "success", False))}


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
            out.append(
                _action("Find the first diverging layer", d, "trtls.findDivergence", {"uri": uri, "route": table})
            )
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


async def build_minimal(ls: Any, raw: Any) -> dict[str, Any]:
    """A real build of a reduction's minimal model with the engine's settings, into the reduction's folder (never
    the engine's output), shown in the TensorRT Builds view like any build."""
    import json

    from trtls.builds.build import state_dir
    from trtls.lsp.build_relay import BuildRelay

    args = parse_args(BuildMinimalArgs, raw)
    loaded = await ls.recipe_async(args.uri)
    if loaded.recipe is None or args.engine not in loaded.recipe.engines:
        raise JsonRpcInvalidParams(f"no buildable engine '{args.engine}'")
    folder = state_dir(loaded.path) / "reduce" / Path(args.reductionId).name
    try:
        record = json.loads((folder / "result.json").read_text())
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
    build = ls.supervisor.start(loaded, args.engine, overrides=overrides, parent_id=args.reductionId)
    ls.runs.add(build, "build", args.uri)
    has_progress = bool(ls.client_capabilities.window and ls.client_capabilities.window.work_done_progress)
    relay = BuildRelay(ls, build, args.uri, ls.options.build_tree, has_progress, lambda b: ls.runs.evict())
    await relay.start()
    return {"buildId": build.id, "engine": args.engine, "status": "started"}
