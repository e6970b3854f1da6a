"""A route's last gates run as a page: the decision, then each of the five gates with every check.

Read from `.trtls/routes/<route>/summary.json`, which `trtls gates` (and the editor's Run Gates) write
after every run. A check's figures are its evidence, shown as they were recorded (nested values as
compact JSON), so the page never claims more than the run measured.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from trtls.core.loads_on import runtime_target_text
from trtls.core.route_summary_record import GateRow, RouteSummary, route_summary_of
from trtls.report.evidence import EvidenceError, read_json
from trtls.report.page import badge, esc, facts, page

GATE_ORDER = ("1", "2", "3", "4", "5")


def route_summary_path(recipe: Path, route: str) -> Path:
    folder = recipe if recipe.is_dir() else recipe.parent
    return folder / ".trtls" / "routes" / route / "summary.json"


def load_route(recipe: Path, route: str) -> RouteSummary:
    path = route_summary_path(recipe, route)
    if not path.is_file():
        raise EvidenceError(f"{path}: no gates run recorded for route {route!r} (run `trtls gates --route {route}`)")
    summary = route_summary_of(read_json(path))
    if isinstance(summary, str):
        raise EvidenceError(f"{path}: {summary}")
    return summary


def _figure(value: Any) -> str:
    if isinstance(value, dict | list):
        text = json.dumps(value, default=str, separators=(", ", ": "))
        return esc(text if len(text) <= 400 else text[:400] + " …")
    return esc(value)


def _histogram(bins: Any) -> str | None:
    """Gate 4's error histogram (`[{"bin", "count"}, …]`, gates.parity.compare.error_histogram) as bars."""
    if not isinstance(bins, list) or not all(isinstance(b, dict) and isinstance(b.get("count"), int) for b in bins):
        return None
    most = max((b["count"] for b in bins), default=0) or 1
    rows = "".join(
        f"<div class='mono'>{esc(b.get('bin'))} <span style='display:inline-block;background:#888;height:0.7em;"
        f"width:{120 * b['count'] // most}px'></span> {b['count']}</div>"
        for b in bins
    )
    return f"<div class='histogram'>{rows}</div>"


def _evidence(evidence: Any) -> str:
    if not isinstance(evidence, dict) or not evidence:
        return '<span class="muted">—</span>'

    def shown(key: str, value: Any) -> str:
        bars = _histogram(value) if key == "histogram" else None
        return bars or f"<span class='mono'>{_figure(value)}</span>"

    items = "".join(f"<div><span class='muted'>{esc(k)}</span> {shown(k, v)}</div>" for k, v in evidence.items())
    return f'<div class="figures">{items}</div>'


def _toml_path(path: Any) -> str:
    return ".".join(map(str, path)) if isinstance(path, list) else ""


def route_report(summary: RouteSummary) -> str:
    s = summary
    name = s.route_name
    body = [
        f"<h1>route {esc(name)} {badge(s.decision)}</h1>",
        facts(
            [
                ("checkpoint", esc(f"{s.checkpoint_id} @ {s.checkpoint_revision}")),
                ("bundle", f"<code>{esc(s.bundle_path)}</code>"),
                ("bundle digest", f"<code>{esc(str(s.bundle_digest or '—')[:24])}</code>"),
                ("runtime", esc(runtime_target_text(s.runtime_target, s.runtime_target_loads_on))),
                ("engine executed", esc(s.engine_executed)),
                ("runtime note", esc(s.runtime_note)),
                ("validation", esc(s.validation_status)),
                ("gates run", esc(", ".join(str(g) for g in s.gates_run))),
                ("cancelled", esc(s.cancelled)),
                ("generated", esc(s.generatedAt)),
            ]
        ),
    ]
    for number in GATE_ORDER:
        gate = s.gates.get(number) or GateRow(name=f"gate {number}", status="not_run")
        checks = gate.checks
        body.append(
            f'<section class="gate" id="gate-{number}" data-status="{esc(gate.status)}">'
            f"<h2>Gate {number}: {esc(gate.name)} {badge(gate.status)}</h2>"
        )
        if not checks:
            body.append('<p class="muted">No check of this gate ran.</p></section>')
            continue
        rows = "".join(
            f'<tr class="check" data-status="{esc(c.status)}"><td>{esc(c.name)}</td>'
            f"<td>{badge(c.status)}</td><td class='mono'>{esc(c.code or '')}</td>"
            f"<td>{esc(c.message)}<div class='muted mono'>{esc(_toml_path(c.path))}</div></td>"
            f"<td>{_evidence(c.evidence)}</td></tr>"
            for c in checks
        )
        body.append(
            "<table><thead><tr><th>check</th><th>status</th><th>code</th><th>message</th><th>figures</th></tr></thead>"
            f"<tbody>{rows}</tbody></table></section>"
        )
    return page(f"trtls route {name} — {s.decision}", "".join(body), "route")
