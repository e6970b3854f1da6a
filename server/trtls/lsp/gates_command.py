"""`trtls.runGates {uri, route}`: the gates with one progress (lsp/progress.py: the client's token, or one asked for
beside the run), findings as diagnostics."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from lsprotocol import types as lsp

from trtls.core import wire
from trtls.core.display import gates_verdict
from trtls.core.findings import Origin
from trtls.core.gates_run_record import GatesRunRecord
from trtls.core.outcome import gates_outcome
from trtls.lsp.progress import begin_stoppable_progress, wants_progress

if TYPE_CHECKING:
    from trtls.lsp.command_args import RunGatesArgs
    from trtls.lsp.language_server import TrtlsServer


@dataclass
class GatesRun:
    """A gates run as the registry of runs holds it (trtls.builds.supervisor.runs.Run): cancellable by id like a
    build."""

    id: str
    route: str
    recipe_path: Path
    stop: threading.Event = field(default_factory=threading.Event)
    cancel_source: str | None = None
    record: GatesRunRecord | None = None  # its verdict, once the gates are over (what trtls.showEvidence sends)
    summary_path: str | None = None

    @property
    def running(self) -> bool:
        return self.record is None

    @property
    def status(self) -> str:
        if self.record is not None:  # a cancelled run made no decision (core.outcome), whatever the gates said
            return self.record.outcome
        return "stopping" if self.stop.is_set() else "running"

    @property
    def evidence_dir(self) -> Path:
        return Path(self.summary_path).parent if self.summary_path else self.recipe_path.parent / ".trtls"

    def evidence_file(self) -> Path | None:
        """The gates' summary the run wrote (gates.run.write_route_evidence), if it wrote one."""
        return Path(self.summary_path) if self.summary_path else None

    def row(self, uri: str) -> wire.ListedBuild:
        """The gates run as trtls.listBuilds lists it: its route in the engine column, as the editor labels it."""
        return wire.ListedBuild(
            buildId=self.id,
            engine=self.route,
            route=self.route,
            uri=uri,
            kind="gates",
            status=self.status,
            cancelSource=self.cancel_source,
            evidencePath=self.summary_path,
        )

    def cancel(self, source: str) -> bool:
        if self.record is not None or self.stop.is_set():
            return False
        self.cancel_source = source
        self.stop.set()
        return True


async def run_gates_command(ls: TrtlsServer, args: RunGatesArgs) -> wire.RunGatesReply:
    from trtls.gates.run import run_gates

    loaded = await ls.recipe_async(args.uri)
    ls.store.set(args.uri, Origin.recipe, "", loaded.findings)
    if loaded.recipe is None:
        ls.publish(args.uri)
        return wire.RunGatesReply(
            route=args.route,
            decision=None,
            verdict=wire.GatesVerdict.model_validate(gates_verdict(args.route, None, False, "invalid_recipe")),
            status="invalid_recipe",
            errors=[f"{loaded.location(f)}: {f.code} {f.message}" for f in loaded.errors],
        )
    if args.route not in loaded.recipe.routes:
        from pygls.exceptions import JsonRpcInvalidParams

        raise JsonRpcInvalidParams(
            f"no route '{args.route}' in {loaded.path.name} (routes: {', '.join(loaded.recipe.routes) or 'none'})"
        )

    run = GatesRun(
        f"gates-{args.route}-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}", args.route, loaded.path
    )
    ls.runs.add(run, "gates", args.uri)
    stop = run.stop
    loop = asyncio.get_running_loop()
    progress = None  # a client that refuses the token still gets its gates run, without a toast
    if wants_progress(ls):  # the gates start beside the token's request, never after its answer (lsp/progress.py)
        progress = begin_stoppable_progress(
            ls,
            "gates",
            lsp.WorkDoneProgressBegin(title=f"Gates {args.route}", cancellable=True, percentage=0),
            lambda: run.cancel("ide_stop"),
        )

    def report(gate: int, text: str) -> None:
        if progress is not None:
            value = lsp.WorkDoneProgressReport(message=f"gate {gate}: {text}", percentage=min(100, (gate - 1) * 20))
            loop.call_soon_threadsafe(progress.report, value)

    try:
        result = await asyncio.to_thread(
            run_gates,
            loaded,
            args.route,
            gates=args.gates,
            progress=report,
            cancel=stop.is_set,
        )
    except BaseException:
        run.record = GatesRunRecord(decision=None, outcome="failed")
        if progress is not None:  # the toast ends too: the error is the command's reply
            verdict = gates_verdict(args.route, None, stop.is_set(), "failed")
            progress.end(verdict["text"], verdict["outcome"], verdict["outcomeKind"])
        raise
    run.summary_path = str(getattr(result, "summary_path", "") or "") or None
    run.record = GatesRunRecord(
        route=args.route,
        decision=result.decision,
        stopped=stop.is_set(),
        outcome=gates_outcome(result.decision, stop.is_set())[0],
    )
    ls.runs.evict()
    findings = [f for f in (c.finding() for c in result.checks) if f is not None]
    ls.store.set(args.uri, Origin.gates, args.route, findings)
    ls.publish(args.uri)
    decision = result.decision
    if progress is not None:
        # the one verdict sentence (core.display.gates_verdict): a cancelled run ends with no decision, never "hold"
        verdict = gates_verdict(args.route, decision, stop.is_set())
        progress.end(verdict["text"], verdict["outcome"], verdict["outcomeKind"])
    return wire.RunGatesReply(
        runId=run.id,
        route=args.route,
        decision=decision,
        # the sentence the editor shows
        verdict=wire.GatesVerdict.model_validate(gates_verdict(args.route, decision, stop.is_set())),
        stopped=stop.is_set(),
        checks=[
            wire.GateCheck(gate=c.gate, name=c.name, status=c.status, code=c.code, message=c.message)
            for c in result.checks
        ],
        summaryPath=run.summary_path,
    )
