"""A matrix (or farm) run in a terminal: one parent, one child per cell with its status, node, GPU and phases.

Rich tree on a TTY (each cell shows where it is and its deepest running phase), plain lines otherwise (each
line starts with the cell's name), JSON lines with `--json` (every event carries `cell` and `buildId`; the
parent's summary is the last line). Every name (a cell, an engine, a node, a phase, a path) is escaped here with
`terminal_safe`, as in `terminal_view`.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any, TextIO

from trtls.builds.supervisor.matrix import MatrixBuild
from trtls.builds.supervisor.supervisor import Build
from trtls.cli.console import raw
from trtls.core import build_view
from trtls.core.display import NOT_STARTED, OUTCOME_MARK, human_seconds, node_text, not_started_text
from trtls.core.phase_tree import row_text, rows_of
from trtls.core.summary_record import Summary
from trtls.core.terminal_text import terminal_safe as safe


def where(build: Build) -> str:
    """`node host (1a2b3c4d5e6f) · GPU 0 · L4 · waited 2.1 s`, `waiting for a node 4.0 s` or `local`."""
    state = build.state
    return node_text(build_view.node_view(state) if state.on_farm_node else None, state.running)


def cell_line(build: Build) -> str:
    state = build.state
    name = state.cell or state.engine
    if state.running:
        return f"… {name} · {where(build)} · {build_view.progress_message(state, build.time_left)}"
    mark = OUTCOME_MARK.get(state.outcome or "", "?")
    return f"{mark} {name} · {where(build)} · {build_view.outcome_message(state)}"


class MatrixRichView:
    def __init__(self, mb: MatrixBuild):
        from rich.console import Console
        from rich.live import Live

        self.mb = mb
        console = Console(file=raw(sys.stdout))  # rich draws its own escapes; each name is escaped below
        self.live = Live(self._render(), console=console, refresh_per_second=4, transient=False)

    def _render(self) -> Any:
        from rich.text import Text
        from rich.tree import Tree

        mb = self.mb
        snap = mb.snapshot(with_cells=False)
        root = Tree(Text.assemble((safe(mb.title), "bold"), f" {safe(snap['description'])}"))
        for b in mb.cells:
            node = root.add(Text(safe(cell_line(b))))
            views = b.state.tree.view(time.monotonic_ns(), b.state.baselines)
            for row in rows_of(views, None):
                node.add(Text(safe(row_text(row))))
        for planned in mb.not_started:
            root.add(Text(safe(f"· {planned.key} · {NOT_STARTED}")))
        return root

    def __enter__(self) -> MatrixRichView:
        self.live.__enter__()
        return self

    def update(self, mb: MatrixBuild, build: Build | None, ev: Any) -> None:
        pass  # redrawn on tick: 32 streaming cells must not redraw per event

    def tick(self) -> None:
        self.live.update(self._render())

    def __exit__(self, *exc: Any) -> None:
        self.live.update(self._render())
        self.live.__exit__(*exc)


class MatrixPlainView:
    def __init__(self, mb: MatrixBuild, out: TextIO | None = None):
        self.mb = mb
        self.out = out or sys.stdout  # looked up now: sys.stdout may have been replaced since import

    def __enter__(self) -> MatrixPlainView:
        return self

    def update(self, mb: MatrixBuild, build: Build | None, ev: Any) -> None:
        if build is None:
            return
        name = build.state.cell or build.engine
        if ev is None:
            self._line(f"[{name}] {build_view.outcome_message(build.state)} · {where(build)}")
        elif ev.type == "queued":
            why = f": {ev.gpu_rule}" if ev.gpu_rule else ""  # why that many GPUs (core.farm.gpu_choice)
            self._line(f"[{name}] waiting for a node (labels {ev.labels or 'any'}, {ev.num_gpus:g} GPU{why})")
        elif ev.type == "placed":
            self._line(f"[{name}] on {where(build)}")
        elif ev.type == "phase_start" and ev.parent_id is None:
            self._line(f"[{name}] ▶ {ev.name}")

    def tick(self) -> None:
        pass

    def _line(self, text: str) -> None:
        print(safe(text), file=self.out, flush=True)

    def __exit__(self, *exc: Any) -> None:
        pass


class MatrixJsonView:
    def __init__(self, mb: MatrixBuild, out: TextIO | None = None):
        self.out = out or sys.stdout  # looked up now: sys.stdout may have been replaced since import

    def __enter__(self) -> MatrixJsonView:
        return self

    def update(self, mb: MatrixBuild, build: Build | None, ev: Any) -> None:
        if build is None:
            rec: dict[str, Any] = {"type": "summary", "summary": mb.summary}
        elif ev is None:
            cell, record = build.state.cell, build.state.record  # the record as written, keys and values
            rec = {"type": "cell_summary", "cell": cell, "buildId": build.id, "summary": record}
        else:
            rec = {**ev.model_dump(), "cell": build.state.cell or build.engine, "buildId": build.id}
        print(json.dumps(rec, default=str), file=self.out, flush=True)

    def tick(self) -> None:
        pass

    def __exit__(self, *exc: Any) -> None:
        pass


def print_matrix_outcome(mb: MatrixBuild, out: TextIO | None = None, said: list[str] | tuple[str, ...] = ()) -> None:
    """The end of a matrix: each cell's line, its engine, the store's warnings about it (its upload stopped, its
    engine not stored: what its evidence's `store.warnings` says, less the lookup's, `said` before the cells ran) and
    its evidence; then the cells that never started and the matrix's evidence."""
    stream = out or sys.stdout

    def say(text: str) -> None:
        print(safe(text), file=stream)

    s = mb.record or Summary()  # the matrix run's record (`kind: matrix`)
    say(f"\n{mb.title}: {mb.outcome_message()} ({human_seconds(s.durationS or 0)})")
    for b in mb.cells:
        say(f"  {cell_line(b)}")
        record = b.state.summary
        art = record.engineArtifact if record is not None else None
        if art:
            say(f"      engine: {art['path']} (sha256 {str(art.get('sha256'))[:16]}…)")
        for warning in cell_store_warnings(record, said):  # as a single build says its store's (one line each)
            say(f"      warning: {safe(warning, keep_newlines=False)}")
        error = record.evidenceError if record is not None else None
        say(f"      evidence: {error or b.evidence_dir / 'summary.json'}")
    for p in mb.not_started:
        say(f"  · {not_started_text(p.key)}")
    say(f"  evidence: {s.evidenceError or mb.evidence_dir / 'summary.json'}")  # TRT413: none written


def cell_store_warnings(record: Summary | None, said: list[str] | tuple[str, ...] = ()) -> list[str]:
    """What the store warned about a cell (its evidence's `store.warnings`), each once, less what was `said` already."""
    store = record.store if record is not None else None
    warnings = store.get("warnings") if isinstance(store, dict) else None
    if not isinstance(warnings, list):
        return []
    return [w for w in dict.fromkeys(str(w) for w in warnings) if w not in said]
