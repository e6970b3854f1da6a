"""What differs between the kinds of run the server's registry holds (trtls.builds.supervisor.runs): the row
trtls.listBuilds
lists, the file trtls.showEvidence answers, and whether trtls.buildReport has a page. Decided here, once per kind
(`KINDS`): the handlers look a run's kind up and never branch on it.

| kind | evidence record | report page |
|---|---|---|
| build (a cell, a trial, a reuse, a rollback) | `.trtls/runs/<id>/summary.json` | report/build_page |
| matrix | `.trtls/runs/<id>/summary.json` | report/matrix_page |
| gates | its route's gates summary | none |
| reduction | `.trtls/reduce/<id>/result.json` | none |
| divergence | `.trtls/reduce/<id>/divergence.json` | none |
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar, runtime_checkable

from pygls.exceptions import JsonRpcInvalidParams

from trtls.builds.supervisor.build import Build
from trtls.builds.supervisor.matrix import MatrixBuild
from trtls.builds.supervisor.runs import Entry, RestoredRun, Run, RunKind
from trtls.core import wire

if TYPE_CHECKING:
    from trtls.lsp.language_server import TrtlsServer

T = TypeVar("T")


@runtime_checkable
class ListsItself(Run, Protocol):
    """A run that lists itself (lsp/gates_command.GatesRun, app/triage_runs.ReductionRun and DivergenceRun)."""

    def row(self, uri: str) -> wire.ListedBuild: ...
    def evidence_file(self) -> Path | None: ...


def _build(run: Run) -> Build | RestoredRun:
    if not isinstance(run, Build | RestoredRun):
        raise TypeError(f"registered as a build, not one: {run!r}")
    return run


def _matrix(run: Run) -> MatrixBuild:
    if not isinstance(run, MatrixBuild):
        raise TypeError(f"registered as a matrix, not one: {run!r}")
    return run


def _itself(run: Run) -> ListsItself:
    if not isinstance(run, ListsItself):
        raise TypeError(f"registered as a run that lists itself, but has no row(): {run!r}")
    return run


@dataclass(frozen=True)
class KindRules:
    noun: str  # how a sentence names one: "reduction"
    row: Callable[[Run, str], wire.ListedBuild]  # (run, uri) → its trtls.listBuilds row
    evidence: Callable[[Run], Path | None]  # the finished run's record file; None: none was written
    page: Callable[[Run], tuple[str, Path]] | None  # its HTML report and the recipe's folder; None: it has none


def _summary_json(run: Run) -> Path | None:
    return Path(run.evidence_dir) / "summary.json" if run.record is not None else None


def _build_row(run: Run, uri: str) -> wire.ListedBuild:
    r = _build(run)
    evidence = _summary_json(r)
    record = r.record
    cancel_source = None if isinstance(r, RestoredRun) else r.state.token.source  # finished when registered
    return wire.ListedBuild(
        buildId=r.id,
        engine=r.engine,
        uri=uri,
        status=r.status,
        cancelSource=cancel_source,
        kind="build",
        elapsedS=round(r.elapsed_s(), 3) if r.running else (record.durationS if record is not None else None),
        evidencePath=str(evidence) if evidence else None,
        hasReport=evidence is not None,
        parentId=r.parent_id,
        cell=r.cell,
    )


def _matrix_row(run: Run, uri: str) -> wire.ListedBuild:
    r = _matrix(run)
    evidence = _summary_json(r)
    return wire.ListedBuild(
        buildId=r.id,
        engine=r.title,
        uri=uri,
        status=r.status,
        cancelSource=r.cancel_source,
        kind="matrix",
        evidencePath=str(evidence) if evidence else None,
        hasReport=evidence is not None,
        cells=[c.id for c in r.cells],
    )


def _build_page(run: Run) -> tuple[str, Path]:
    from trtls.report.build_page import build_report
    from trtls.report.evidence import load_build

    r = _build(run)
    return build_report(load_build(r.evidence_dir)), r.recipe_path.parent


def _matrix_page(run: Run) -> tuple[str, Path]:
    from trtls.report.matrix_page import matrix_report

    r = _matrix(run)
    return matrix_report(r.evidence_dir), r.recipe_path.parent


def _own_row(run: Run, uri: str) -> wire.ListedBuild:
    return _itself(run).row(uri)


def _own_evidence(run: Run) -> Path | None:
    return _itself(run).evidence_file()


KINDS: dict[RunKind, KindRules] = {
    "build": KindRules("build", _build_row, _summary_json, _build_page),
    "matrix": KindRules("matrix", _matrix_row, _summary_json, _matrix_page),
    "gates": KindRules("gates run", _own_row, _own_evidence, None),
    "reduction": KindRules("reduction", _own_row, _own_evidence, None),
    "divergence": KindRules("divergence search", _own_row, _own_evidence, None),
}


def listed(entry: Entry) -> wire.ListedBuild:
    """One run as trtls.listBuilds lists it."""
    return KINDS[entry.kind].row(entry.run, entry.uri)


def finished_run(ls: TrtlsServer, run_id: str, what: str) -> tuple[Run, RunKind]:
    """The finished run of this id and its kind, or a located -32602 error: unknown (or forgotten), still running,
    or over with no record written."""
    run, kind = ls.runs.get(run_id), ls.runs.kind(run_id)
    if run is None or kind is None:
        from trtls.lsp.recorded_runs import recorded_build

        recorded = recorded_build(ls, run_id)  # the one an Evidence lens shows: a terminal's build (issue 33)
        if recorded is not None:
            return recorded, "build"
        raise JsonRpcInvalidParams(
            f"run '{run_id}' is unknown (never started, or finished and forgotten): its {what} "
            "is in .trtls/, see trtls.listBuilds"
        )
    if run.record is None:
        state = "still running" if run.running else "over, with no evidence written"
        raise JsonRpcInvalidParams(f"{KINDS[kind].noun} '{run_id}' is {state}; its {what} exists once it has finished")
    return run, kind


async def once_settled(ls: TrtlsServer, run_id: str, answer: Callable[[TrtlsServer, str], T], limit_s: float = 60) -> T:
    """`answer(ls, run_id)` once the run has settled. A build's outcome is set (its row says `failed`, `built`) before
    its engine is verified and its summary written (builds/supervisor/build_end.py): a client that saw the row end and
    asks for the evidence at once waits for it here — bounded; after `limit_s` the answer is the located "no evidence
    written" error as before."""
    run = ls.runs.get(run_id)
    ended = getattr(run, "ended", None)  # a Build's: resolved once its evidence is written
    if run is not None and not run.running and run.record is None and ended is not None:
        try:
            await asyncio.wait_for(ended(), limit_s)
        except TimeoutError:
            pass
    return answer(ls, run_id)


def evidence(ls: TrtlsServer, run_id: str) -> wire.EvidenceReply:
    """trtls.showEvidence: the finished run's record file (the one its kind writes) and the record: its model's JSON
    (`record()`, the keys as written), made here and nowhere else."""
    run, kind = finished_run(ls, run_id, "evidence")
    path = KINDS[kind].evidence(run)
    record = run.record.record() if run.record is not None else None
    return wire.EvidenceReply(buildId=run_id, kind=kind, path=str(path) if path else None, summary=record)


def report(ls: TrtlsServer, run_id: str) -> wire.BuildReportReply:
    """trtls.buildReport: a finished build's or matrix's HTML report (the `trtls report` page), also written as
    report.html — through the door, inside the recipe's real folder (a run folder swapped for a symlink is refused)
    and only over a report trtls wrote (fs.report_ledger). A kind with no page, evidence that cannot be read, or a
    report that cannot be written answers a one-line located error (-32602), never a traceback."""
    from trtls.core.paths import real
    from trtls.fs import write_report
    from trtls.report.evidence import EvidenceError

    run, kind = finished_run(ls, run_id, "report")
    rules = KINDS[kind]
    if rules.page is None:
        record = rules.evidence(run)
        where = f"its evidence is {record}" if record else "it wrote no evidence"
        raise JsonRpcInvalidParams(f"no build report for a {rules.noun}: {where}")
    try:
        html, recipe_folder = rules.page(run)
    except EvidenceError as exc:
        raise JsonRpcInvalidParams(str(exc)) from None
    path = Path(run.evidence_dir) / "report.html"
    try:
        write_report(path, html, within=real(recipe_folder))
    except OSError as exc:
        raise JsonRpcInvalidParams(f"{path}: TRT405 the report cannot be written: {exc.strerror or exc}") from None
    return wire.BuildReportReply(buildId=run.id, path=str(path), html=html)
