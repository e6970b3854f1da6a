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

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pygls.exceptions import JsonRpcInvalidParams

from trtls.builds.supervisor.runs import Entry, RunKind
from trtls.core import wire


@dataclass(frozen=True)
class KindRules:
    noun: str  # how a sentence names one: "reduction"
    row: Callable[[Any, str], wire.ListedBuild]  # (run, uri) → its trtls.listBuilds row
    evidence: Callable[[Any], Path | None]  # the finished run's record file; None: none was written
    page: Callable[[Any], str] | None  # its HTML report; None: it has none


def _summary_json(run: Any) -> Path | None:
    return Path(run.evidence_dir) / "summary.json" if run.summary is not None else None


def _build_row(r: Any, uri: str) -> wire.ListedBuild:
    evidence = _summary_json(r)
    return wire.ListedBuild(
        buildId=r.id,
        engine=r.engine,
        uri=uri,
        status=r.status,
        cancelSource=r.token.source,
        kind="build",
        elapsedS=round(r.elapsed_s(), 3) if r.running else (r.summary or {}).get("durationS"),
        evidencePath=str(evidence) if evidence else None,
        hasReport=evidence is not None,
        parentId=r.parent_id,
        cell=r.cell,
    )


def _matrix_row(r: Any, uri: str) -> wire.ListedBuild:
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


def _build_page(run: Any) -> str:
    from trtls.report.build_page import build_report
    from trtls.report.evidence import load_build

    return build_report(load_build(run.evidence_dir))


def _matrix_page(run: Any) -> str:
    from trtls.report.matrix_page import matrix_report

    return matrix_report(run.evidence_dir)


def _own_row(run: Any, uri: str) -> wire.ListedBuild:
    """A run that lists itself (lsp/gates_command.GatesRun, lsp/triage_command.ReductionRun and DivergenceRun)."""
    row: wire.ListedBuild = run.row(uri)
    return row


def _own_evidence(run: Any) -> Path | None:
    path: Path | None = run.evidence_file()
    return path


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


def finished_run(ls: Any, run_id: str, what: str) -> tuple[Any, RunKind]:
    """The finished run of this id and its kind, or a located -32602 error: unknown (or forgotten), still running,
    or over with no record written."""
    run, kind = ls.runs.get(run_id), ls.runs.kind(run_id)
    if run is None or kind is None:
        raise JsonRpcInvalidParams(f"run '{run_id}' is unknown (never started, or finished and forgotten): its {what} "
                                   "is in .trtls/, see trtls.listBuilds")  # fmt: skip
    if run.summary is None:
        state = "still running" if run.running else "over, with no evidence written"
        raise JsonRpcInvalidParams(f"{KINDS[kind].noun} '{run_id}' is {state}; its {what} exists once it has finished")
    return run, kind


def evidence(ls: Any, run_id: str) -> wire.EvidenceReply:
    """trtls.showEvidence: the finished run's record file (the one its kind writes) and the record."""
    run, kind = finished_run(ls, run_id, "evidence")
    path = KINDS[kind].evidence(run)
    return wire.EvidenceReply(buildId=run_id, kind=kind, path=str(path) if path else None, summary=run.summary)


def report(ls: Any, run_id: str) -> wire.BuildReportReply:
    """trtls.buildReport: a finished build's or matrix's HTML report (the `trtls report` page), also written as
    report.html — through the door, inside the recipe's real folder (a run folder swapped for a symlink is refused)
    and only over an HTML file. A kind with no page, evidence that cannot be read, or a report that cannot be written
    answers a one-line located error (-32602), never a traceback."""
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
        html = rules.page(run)
    except EvidenceError as exc:
        raise JsonRpcInvalidParams(str(exc)) from None
    path = Path(run.evidence_dir) / "report.html"
    try:
        write_report(path, html, fmt="html", within=real(run.recipe_path.parent))
    except OSError as exc:
        raise JsonRpcInvalidParams(f"{path}: TRT405 the report cannot be written: {exc.strerror or exc}") from None
    return wire.BuildReportReply(buildId=run.id, path=str(path), html=html)
