"""One build as a page: what TensorRT's parser said of the model, the phase timeline, build time over time, the cancel
breakdown, the artifacts.

The timeline is a Gantt chart drawn in SVG: one row per phase (the ones deep inside a phase and shorter
than 1 % of the build are folded into a count, as the terminal folds them), each bar coloured by status,
with a thin mark at the phase's usual duration (the median of earlier builds of the same config), quiet
gaps as grey bands across all rows, and a cancel's request / seen / return / cleanup as vertical lines.
"""

from __future__ import annotations

from trtls.core.capability import capability_findings, capability_summary, recorded_capability
from trtls.core.display import (
    evidence_lines,
    human_bytes,
    human_seconds,
    peak_memory_text,
    phase_detail,
    previous_engine_text,
    quiet_text,
    reasons_text,
    rebuilt_text,
)
from trtls.core.summary_record import Summary
from trtls.report.evidence import QUIET_GAP_S, BuildEvidence, Span
from trtls.report.page import badge, esc, facts, page, when

LABEL_W, CHART_W, ROW_H = 300, 820, 18
SHOW_DEPTH = 2  # rows for every phase this deep; deeper ones only when they take ≥ 1 % of the build
CANCEL_COLOURS = {"request": "#cf222e", "seen": "#bf8700", "return": "#0969da", "cleanup": "#2da44e"}
STATUS_FILL = {
    "done": "var(--done)",
    "running": "var(--running)",
    "cancelled": "var(--cancelled)",
    "failed": "var(--failed)",
}


def build_report(ev: BuildEvidence) -> str:
    s = ev.summary
    title = f"trtls build {s.engine} — {s.outcome}"
    body = [
        f"<h1>{esc(s.engine)} {badge(s.outcome)}</h1>",
        facts(
            [
                ("build", f"<code>{esc(ev.build_id)}</code>"),
                ("started", esc(when(s.startedAt))),
                ("duration", esc(human_seconds(s.durationS))),
                ("builder", esc(f"{s.builderModule} {s.tensorrtVersion}")),
                ("config", f"<code>{esc(str(s.buildConfigHash or '—')[:16])}</code>"),
                *((label, esc(text)) for label, text in evidence_lines(s)),  # as the terminal prints them
                ("memory", esc(memory_text(ev))),
                ("why this build ran", esc(reasons_text(s.rebuiltBecause or []) if rebuilt_text(s) else "—")),
            ]
        ),
        '<h2 id="capability-title">Capability (the ONNX parser and the builder)</h2>',
        capability_section(s),
        '<h2 id="timeline-title">Phase timeline</h2>',
        timeline_svg(ev),
        '<h2 id="history-title">Build time over time (this configuration)</h2>',
        history_svg(ev),
        '<h2 id="cancel-title">Cancel latency</h2>',
        cancel_section(ev),
        '<h2 id="artifacts-title">Artifacts</h2>',
        artifacts_table(s),
    ]
    return page(title, "".join(body), "build")


def memory_text(ev: BuildEvidence) -> str:
    """This build's peak memory, with its configuration's earlier builds (core.display.peak_memory_text, the words of
    the terminal after a build); the evidence's own figure for a build the history does not hold."""
    if ev.peaks and ev.peaks[-1].get("buildId") == ev.build_id:
        return str(peak_memory_text(ev.peaks, lead="peaked at"))
    peak = (ev.summary.resources or {}).get("peakRssBytes")
    return f"peaked at {human_bytes(peak)} (worker RSS)" if isinstance(peak, int) else "not measured"


def _rows(ev: BuildEvidence) -> tuple[list[Span], int]:
    total = max(ev.end_s(), 1e-6)
    keep, folded = [], 0
    shown: set[str] = set()
    for sp in sorted(ev.spans, key=lambda x: (x.start_s, x.depth)):
        if sp.depth <= SHOW_DEPTH or (sp.end_s - sp.start_s) >= 0.01 * total:
            if sp.parent_id is None or sp.parent_id in shown:
                keep.append(sp)
                shown.add(sp.id)
                continue
        folded += 1
    return keep, folded


def timeline_svg(ev: BuildEvidence) -> str:
    rows, folded = _rows(ev)
    if not rows:
        return '<p id="timeline" class="muted">No phase was recorded (the builder never reported progress).</p>'
    total = max(ev.end_s(), 1e-6)
    height = ROW_H * len(rows) + 40
    x = lambda t: LABEL_W + CHART_W * t / total  # noqa: E731
    parts = [
        f'<svg id="timeline" width="{LABEL_W + CHART_W + 10}" height="{height}" role="img" aria-label="phase timeline">'
    ]
    for i in range(0, 11):  # time grid
        t = total * i / 10
        parts.append(f'<line class="grid" x1="{x(t):.1f}" y1="0" x2="{x(t):.1f}" y2="{height - 22}"/>')
        anchor = "end" if i == 10 else "middle"
        parts.append(
            f'<text class="muted" x="{x(t):.1f}" y="{height - 8}" text-anchor="{anchor}">{esc(human_seconds(t))}</text>'
        )
    for a, b in ev.quiet_gaps:
        parts.append(
            f'<rect class="quiet-gap" x="{x(a):.1f}" y="0" width="{max(x(b) - x(a), 1):.1f}" height="{height - 22}" '
            f'fill="var(--quiet)" opacity="0.25"><title>{quiet_text(b - a)}: no builder callback</title></rect>'
        )
    for i, sp in enumerate(rows):
        y = i * ROW_H + 2
        parts.append(f'<text x="{4 + sp.depth * 12}" y="{y + 12}" class="phase-label">{esc(sp.name[:44])}</text>')
        w = max(x(sp.end_s) - x(sp.start_s), 1.5)
        step = None if sp.steps is None else sp.steps - 1
        # the words the build recorded (every face shows them); evidence older than them: the same rule, here
        detail = sp.detail or phase_detail(sp.status, step, sp.num_steps, sp.end_s - sp.start_s, None, sp.usual_s)
        tip = f"{sp.name} {detail} (phase {sp.id}, {sp.status})"
        parts.append(
            f'<rect class="phase-bar" data-phase-id="{esc(sp.id)}" data-status="{esc(sp.status)}" '
            f'x="{x(sp.start_s):.1f}" y="{y}" width="{w:.1f}" height="{ROW_H - 5}" rx="2" '
            f'fill="{STATUS_FILL.get(sp.status, "var(--quiet)")}">'
            f"<title>{esc(tip)}</title></rect>"
        )
        if sp.usual_s is not None:
            ux = x(min(sp.start_s + sp.usual_s, total))
            parts.append(
                f'<line class="usual-mark" x1="{ux:.1f}" y1="{y - 1}" x2="{ux:.1f}" y2="{y + ROW_H - 4}" '
                f'stroke="var(--usual)" stroke-width="2"><title>usual {esc(human_seconds(sp.usual_s))}</title></line>'
            )
    for key, t in ev.cancel_marks().items():
        parts.append(
            f'<line class="cancel-mark" data-mark="{key}" x1="{x(t):.1f}" y1="0" x2="{x(t):.1f}" y2="{height - 22}" '
            f'stroke="{CANCEL_COLOURS[key]}" stroke-width="2" stroke-dasharray="4 2"><title>cancel {key} at '
            f"{esc(human_seconds(t))}</title></line>"
        )
    parts.append("</svg>")
    legend = (
        '<p class="legend"><span><i class="sw" style="background:var(--done)"></i>done</span>'
        '<span><i class="sw" style="background:var(--cancelled)"></i>cancelled</span>'
        '<span><i class="sw" style="background:var(--failed)"></i>failed</span>'
        f'<span><i class="sw" style="background:var(--quiet);opacity:.4"></i>quiet ≥ {QUIET_GAP_S:g} s '
        f"({len(ev.quiet_gaps)})</span>"
        '<span><i class="sw" style="background:var(--usual);width:3px"></i>usual duration</span>'
    )
    if folded:
        legend += f'<span class="muted">{folded} short inner phases folded</span>'
    return "".join(parts) + legend + "</p>"


def history_svg(ev: BuildEvidence) -> str:
    points = [b for b in ev.history if isinstance(b.get("durationS"), int | float)]
    if not points:
        return (
            '<p id="history" class="muted">No dated successful build of this configuration is recorded yet '
            "(history.json keeps dates from this version on).</p>"
        )
    w, h, pad = 820, 200, 60
    t_min, t_max = points[0]["startedAt"], points[-1]["startedAt"]
    d_max = max(b["durationS"] for b in points) * 1.15
    span = max(t_max - t_min, 1e-6)
    x = lambda t: pad + (w - 2 * pad) * ((t - t_min) / span if len(points) > 1 else 0.5)  # noqa: E731
    y = lambda d: h - pad + 10 - (h - pad) * d / d_max  # noqa: E731
    parts = [f'<svg id="history" width="{w}" height="{h}" role="img" aria-label="build time history">']
    for i in range(5):
        d = d_max * i / 4
        parts.append(f'<line class="grid" x1="{pad}" y1="{y(d):.1f}" x2="{w - pad}" y2="{y(d):.1f}"/>')
        parts.append(
            f'<text class="muted" x="{pad - 6}" y="{y(d) + 4:.1f}" text-anchor="end">{esc(human_seconds(d))}</text>'
        )
    path = " ".join(
        f"{'M' if i == 0 else 'L'}{x(b['startedAt']):.1f},{y(b['durationS']):.1f}" for i, b in enumerate(points)
    )
    parts.append(f'<path d="{path}" fill="none" stroke="var(--running)" stroke-width="1.5"/>')
    for b in points:
        current = b.get("buildId") == ev.build_id
        parts.append(
            f'<circle class="history-point" cx="{x(b["startedAt"]):.1f}" cy="{y(b["durationS"]):.1f}" '
            f'r="{6 if current else 3.5}" fill="{"var(--cancelled)" if current else "var(--running)"}">'
            f"<title>{esc(when(b['startedAt']))}: {esc(human_seconds(b['durationS']))}"
            f"{' (this build)' if current else ''}</title></circle>"
        )
    parts.append(f'<text class="muted" x="{pad}" y="{h - 6}">{esc(when(t_min))}</text>')
    parts.append(f'<text class="muted" x="{w - pad}" y="{h - 6}" text-anchor="end">{esc(when(t_max))}</text>')
    parts.append("</svg>")
    return "".join(parts) + f'<p class="muted">{len(points)} successful build(s) of this configuration.</p>'


def capability_section(s: Summary) -> str:
    """The capability answer the build's evidence recorded (core.capability.build_capability: its own parse of the
    model), in the words every face uses; `not_checked` when the evidence has none. Never asks TensorRT: this process
    does not import it (tests/test_layers.py)."""
    answer = recorded_capability(s)
    status = str(answer.get("status") or "not_checked")
    words = [f.message for f in capability_findings(str(s.engine or "?"), answer) if f.code != "TRT132"]
    items = "".join(f'<li class="capability-node">{esc(w)}</li>' for w in words)
    source = f" ({esc(answer['source'])})" if answer.get("source") else ""
    return (
        f'<div id="capability" data-status="{esc(status)}"><p>{badge(status)} {esc(capability_summary(answer))}'
        f"{source}</p>{f'<ul>{items}</ul>' if items else ''}</div>"
    )


def cancel_section(ev: BuildEvidence) -> str:
    s = ev.summary
    if not s.cancelSource:
        return '<p id="cancel" class="muted">This build was not cancelled.</p>'
    marks = ev.cancel_marks()
    legs = [
        ("request → seen", "request", "seen"),
        ("seen → return", "seen", "return"),
        ("return → cleanup", "return", "cleanup"),
    ]
    widths = [(label, marks[a], marks[b]) for label, a, b in legs if a in marks and b in marks]
    total = sum(b - a for _, a, b in widths) or 1e-9
    bar, x0 = [], 0.0
    colours = ["#bf8700", "#0969da", "#2da44e"]
    for i, (label, a, b) in enumerate(widths):
        w = 800 * (b - a) / total
        bar.append(
            f'<rect class="cancel-leg" x="{x0:.1f}" y="0" width="{max(w, 1):.1f}" height="24" fill="{colours[i % 3]}">'
            f"<title>{esc(label)}: {(b - a) * 1000:.1f} ms</title></rect>"
        )
        if w > 90:
            bar.append(f'<text x="{x0 + 6:.1f}" y="16" style="fill:#fff">{esc(label)} {(b - a) * 1000:.1f} ms</text>')
        x0 += w
    svg = f'<svg width="810" height="28" role="img" aria-label="cancel latency">{"".join(bar)}</svg>' if bar else ""
    rows = [
        ("source", esc(s.cancelSource)),
        ("request → builder return", esc(f"{s.cancelLatencyMs} ms")),
        ("callback that saw it → return", esc(f"{s.cancelReturnAfterSeenMs} ms")),
        ("return → cleanup", esc(f"{s.cleanupLatencyMs} ms")),
        ("forced (SIGTERM/SIGKILL)", esc(s.forced)),
        ("cleanup", esc(s.cleanupStatus)),
        ("previous engine", esc(previous_engine_text(s) or "replaced by this build")),
    ]
    return f'<div id="cancel">{svg}{facts(rows)}</div>'


def artifacts_table(s: Summary) -> str:
    items = s.artifacts
    if not items:
        return '<p id="artifacts" class="muted">This build wrote or removed no file.</p>'
    rows = "".join(
        f'<tr class="artifact"><td>{esc(a.get("kind"))}</td><td>{esc(a.get("action"))}</td>'
        f'<td class="mono">{esc(a.get("path"))}{" → " + esc(a["moved_to"]) if a.get("moved_to") else ""}</td>'
        f'<td>{esc(human_bytes(a.get("size")))}</td><td class="mono">{esc(str(a.get("sha256") or "—")[:16])}</td></tr>'
        for a in items
        if isinstance(a, dict)
    )
    return (
        '<table id="artifacts"><thead><tr><th>kind</th><th>action</th><th>path</th><th>size</th><th>sha256</th></tr>'
        f"</thead><tbody>{rows}</tbody></table>"
    )
