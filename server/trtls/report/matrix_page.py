"""A matrix (or farm) run as a page: its cells (outcome, where each ran, duration) and each finished cell's phase
timeline, drawn by the one build timeline renderer (report/build_page.py) from the cell's own evidence folder."""

from __future__ import annotations

from pathlib import Path

from trtls.core.display import human_seconds, node_text
from trtls.report.build_page import timeline_svg
from trtls.report.evidence import EvidenceError, load_build, load_summary
from trtls.report.page import badge, esc, facts, page, when


def matrix_report(run_dir: Path) -> str:
    """The page of the matrix whose summary is `run_dir/summary.json` (kind: matrix)."""
    s = load_summary(run_dir / "summary.json")
    cells = s.cells
    rows, timelines = [], []
    for c in cells:
        cell_dir = run_dir.parent / c.buildId if c.buildId else None
        duration = None
        if cell_dir is not None:
            try:
                ev = load_build(cell_dir)
            except EvidenceError:
                ev = None
            if ev is not None:
                duration = ev.summary.durationS
                timelines.append(f'<h3 data-cell="{esc(c.cell)}">{esc(c.cell)}</h3>{timeline_svg(ev)}')
        where = node_text(c.node, running=False) if c.buildId else "—"  # node None: it ran here (`local`)
        rows.append(
            f"<tr><td>{esc(c.cell)}</td><td>{esc(c.engine)}</td><td>{badge(c.outcome)}</td>"
            f"<td>{esc(where)}</td><td>{esc(human_seconds(duration) if duration is not None else '—')}</td>"
            f"<td><code>{esc(c.buildId or '—')}</code></td></tr>"
        )
    body = [
        f"<h1>{esc(s.title)} {badge(s.outcome)}</h1>",
        facts(
            [
                ("matrix", f"<code>{esc(s.buildId)}</code>"),
                ("started", esc(when(s.startedAt))),
                ("duration", esc(human_seconds(s.durationS))),
                ("cells", esc(len(cells))),
                ("stopped by", esc(s.cancelSource or "—")),
            ]
        ),
        '<h2 id="cells-title">Cells</h2><table class="cells"><tr><th>cell</th><th>engine</th><th>outcome</th>'
        "<th>node</th><th>duration</th><th>build</th></tr>" + "".join(rows) + "</table>",
        '<h2 id="timeline-title">Phase timelines</h2>',
        "".join(timelines) or '<p class="muted">no cell left a timeline</p>',
    ]
    return page(f"trtls matrix {s.title} — {s.outcome}", "".join(body), "matrix")
