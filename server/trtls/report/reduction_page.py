"""`trtls report --reduction ID`: a reduction's trial history as a picture (nodes left per trial, still fails or
not), or a divergence search's error per layer along the graph — from the records under `.trtls/reduce/<id>/`, read
as their models (core.triage_records: the readers every face uses), so a damaged record is said with its field."""

from __future__ import annotations

import math
from pathlib import Path

from trtls.builds.roots import state_root
from trtls.core.triage_records import (
    DIVERGENCE_NAME,
    RESULT_NAME,
    DivergenceResult,
    ReductionResult,
    ResultProblem,
    TensorDivergence,
    TrialRecord,
    read_divergence_result,
    read_reduction_result,
)
from trtls.report.evidence import EvidenceError
from trtls.report.page import badge, esc, facts, page

W, H, PAD = 760, 220, 40


def find_reduction(recipe: Path, which: str) -> Path:
    """`.trtls/reduce/<id>/` of the reduction or divergence search `which` (an id, or `latest`)."""
    base = (recipe.parent if recipe.is_file() else recipe) / ".trtls" / "reduce"
    folders = (
        sorted((p for p in base.glob("*") if p.is_dir()), key=lambda p: p.stat().st_mtime) if base.is_dir() else []
    )
    if which != "latest":
        folders = [p for p in folders if p.name == which]
    if not folders:
        raise EvidenceError(f"no reduction '{which}' under {base}")
    return folders[-1]


def _record(folder: Path) -> ReductionResult | DivergenceResult:
    """The folder's record: a reduction's result.json, else a search's divergence.json, read inside the recipe's
    folder; a missing, unreadable or damaged one is an EvidenceError naming the file (and the field)."""
    record: ReductionResult | DivergenceResult | ResultProblem
    if (folder / RESULT_NAME).is_file():
        record = read_reduction_result(folder / RESULT_NAME, within=state_root(folder))
    elif (folder / DIVERGENCE_NAME).is_file():
        record = read_divergence_result(folder / DIVERGENCE_NAME, within=state_root(folder))
    else:
        raise EvidenceError(f"{folder}: no {RESULT_NAME} or {DIVERGENCE_NAME}")
    if isinstance(record, ResultProblem):
        raise EvidenceError(str(record))
    return record


def _trials_svg(trials: list[TrialRecord], original: int) -> str:
    if not trials:
        return "<p>No trial ran.</p>"
    top = max(original, 1)
    step = (W - 2 * PAD) / max(len(trials), 1)
    bars = []
    for i, t in enumerate(trials):
        h = (H - 2 * PAD) * math.log1p(t.nodes) / math.log1p(top)
        x, y = PAD + i * step, H - PAD - h
        colour = "#c0392b" if t.stillFails else "#7f8c8d"
        label = f"trial {t.trial} {t.step}: {t.nodes} nodes, {'still fails' if t.stillFails else t.outcome}"
        bars.append(
            f'<rect x="{x:.1f}" y="{y:.1f}" width="{max(step - 2, 1):.1f}" height="{h:.1f}" fill="{colour}">'
            f"<title>{esc(label)}</title></rect>"
        )
    return (
        f'<svg viewBox="0 0 {W} {H}" width="100%" role="img" aria-label="nodes left per trial">'
        f'<line class="grid" x1="{PAD}" y1="{H - PAD}" x2="{W - PAD}" y2="{H - PAD}"/>'
        f'<text x="{PAD}" y="{PAD - 10}" class="muted">nodes kept (log scale), one bar per trial</text>'
        + "".join(bars)
        + "</svg>"
        '<p class="legend"><span><i class="sw" style="background:#c0392b"></i>still fails</span>'
        '<span><i class="sw" style="background:#7f8c8d"></i>does not reproduce</span></p>'
    )


def _plotted(t: TensorDivergence) -> float | None:
    """The range error to plot, or None for an fp16 overflow (inf/NaN in the converted tensor): `overflow`, a null
    rangeError, or — in a record written before the flag — a non-finite one."""
    e = t.rangeError
    unchecked = t.withinTolerance is None  # nothing compared: a 0 here is no measurement
    return None if unchecked or t.overflow or e is None or not math.isfinite(e) else max(e, 1e-9)


def _layers_svg(tensors: list[TensorDivergence], limit: float) -> str:
    """Range error per tensor along the graph (log scale); an overflowed tensor has no error to plot: a full-height
    bar labelled 'overflow' stands in its place and breaks the line."""
    if not tensors:
        return "<p>No tensor was compared.</p>"
    errs = [_plotted(t) for t in tensors]
    over = [e is None and t.withinTolerance is not None for t, e in zip(tensors, errs, strict=True)]
    known = [e for e in errs if e is not None]
    lo, hi = math.log10(min(known + [limit]) / 2), math.log10(max(known + [limit]) * 2)
    step = (W - 2 * PAD) / max(len(tensors) - 1, 1)

    def y(v: float) -> float:
        return H - PAD - (H - 2 * PAD) * (math.log10(v) - lo) / (hi - lo or 1)

    lines, run = [], []
    for i, e in enumerate(errs + [None]):  # one polyline per stretch of finite errors
        if e is not None:
            run.append(f"{PAD + i * step:.1f},{y(e):.1f}")
        elif run:
            lines.append(f'<polyline points="{" ".join(run)}" fill="none" stroke="currentColor" stroke-width="1"/>')
            run = []
    marks = []
    for i, (t, e) in enumerate(zip(tensors, errs, strict=True)):
        x = PAD + i * step
        if t.withinTolerance is None:  # not_checked: a hollow mark on the axis, no error drawn
            marks.append(
                f'<circle class="not-checked" cx="{x:.1f}" cy="{H - PAD:.1f}" r="3" fill="none" stroke="#7f8c8d">'
                f"<title>{esc(t.tensor)} ({esc(t.op)}): not_checked, the reference holds only inf/NaN</title></circle>"
            )
            continue
        if e is None:
            bad = t.nonFinite
            what = f"overflow: {bad} inf/NaN values" if bad else "overflow: inf/NaN values"
            marks.append(
                f'<rect class="overflow" x="{x - 3:.1f}" y="{PAD:.1f}" width="6" height="{H - 2 * PAD:.1f}" '
                f'fill="#c0392b" opacity="0.8"><title>{esc(t.tensor)} ({esc(t.op)}): {esc(what)}</title></rect>'
                f'<text x="{x:.1f}" y="{PAD - 2:.1f}" text-anchor="middle" class="muted" font-size="9">overflow</text>'
            )
            continue
        marks.append(
            f'<circle cx="{x:.1f}" cy="{y(e):.1f}" r="3" fill="{"#7f8c8d" if t.withinTolerance else "#c0392b"}">'
            f"<title>{esc(t.tensor)} ({esc(t.op)}): {e:.3g}</title></circle>"
        )
    legend = (
        '<p class="muted">range-relative error per tensor, in graph order (log scale)'
        + ("; a full-height red bar: the converted tensor overflowed (inf/NaN, no finite error)" if any(over) else "")
        + (
            "; a hollow mark on the axis: not_checked, the reference holds only inf/NaN"
            if any(t.withinTolerance is None for t in tensors)
            else ""
        )
        + "</p>"
    )
    return (
        f'<svg viewBox="0 0 {W} {H}" width="100%" role="img" aria-label="error per layer">'
        f'<line class="grid" x1="{PAD}" y1="{y(limit):.1f}" x2="{W - PAD}" y2="{y(limit):.1f}" stroke-dasharray="4"/>'
        f'<text x="{W - PAD}" y="{y(limit) - 4:.1f}" text-anchor="end" class="muted">tolerance {limit:g}</text>'
        + "".join(lines)
        + "".join(marks)
        + "</svg>"
        + legend
    )


def reduction_report(folder: Path) -> str:
    r = _record(folder)
    if isinstance(r, DivergenceResult):
        return _divergence_report(r, folder)
    minimal = r.minimal
    body = [
        f"<h1>Reduction · {esc(r.engine)}</h1>",
        facts(
            [
                ("outcome", esc(r.outcome)),
                ("headline", esc(r.headline)),
                ("cause", esc(r.causeText)),
                ("failure", esc(r.failureText)),
                ("rule", esc(r.rule)),
                ("trials", esc(f"{r.trialsUsed} ({_by_step(r.trialsByStep)}); bisection bound {r.bisectBound}")),
                (
                    "minimal model",
                    esc(f"{minimal.nodes} nodes: {', '.join(minimal.nodeNames)}") if minimal is not None else "none",
                ),
            ]
        ),
        "<h2>Trials</h2>",
        _trials_svg(r.trials, r.originalNodes or 1),
    ]
    return page(f"trtls reduction {r.id}", "".join(body), "reduction")


def _by_step(counts: dict[str, int] | None) -> str:
    """{'confirm': 1, 'outputs': 4} → 'confirm 1, outputs 4'."""
    return ", ".join(f"{step} {n}" for step, n in (counts or {}).items()) or "none"


def _divergence_report(r: DivergenceResult, folder: Path) -> str:
    pair = r.mode == "models"  # two given models: nothing converted, so no fix and no exclusion to show
    what = "two models" if pair else r.precision
    body = [f"<h1>Divergence · {esc(r.engine or r.route)} · {esc(what)}</h1>"]
    first = r.firstDiverging
    rows = [
        ("first out of tolerance", esc(f"{first.tensor} ({first.op}, node {first.node})") if first else "none"),
        ("rule", esc(r.rule)),
        ("inputs", esc(r.inputs)),
    ]
    if pair:
        skipped = f"; not compared {r.notCompared}: {', '.join(r.notComparedNames or [])}" if r.notCompared else ""
        rows[1:1] = [("reference", esc(r.reference)), ("candidate", esc(r.candidate))]
        rows.append(("tensors compared", esc(f"{r.comparedTensors}{skipped}")))
    else:
        rows.append(("fixed", badge("pass" if r.fixed else "not_checked" if r.fixed is None else "fail")))
        rows.append(("exclude_nodes", esc(r.excludeNodes)))
    body.append(facts(rows))
    if r.rounds and r.rangeRtol is None:  # every writer writes it with its rounds: without it there is no line to draw
        raise EvidenceError(f"{folder / DIVERGENCE_NAME}: rangeRtol is null: no tolerance to draw its rounds against")
    for i, rnd in enumerate(r.rounds):
        title = "the candidate against the reference" if pair else f"Round {i}: exclude_nodes = {esc(rnd.excludeNodes)}"
        body.append(f"<h2>{title}</h2>")
        body.append(_layers_svg(rnd.tensors, float(r.rangeRtol or 0)))
    return page(f"trtls divergence {r.id}", "".join(body), "divergence")
