"""The build as seen in a terminal: a live rich tree on a TTY, plain lines otherwise (CI logs stay readable).

Every name a recipe, a model or TensorRT's log carries (the engine, a phase, a warning's ONNX node, a path) is
escaped here, each one, with `terminal_safe`: the live tree writes its own escape sequences to the raw stdout, so
`cli.console`'s stream cannot do it for it. `--json` lines are escaped by the JSON encoder (ASCII only)."""

from __future__ import annotations

import json
import re
import sys
import time
from typing import Any, TextIO

from trtls.builds.supervisor.supervisor import Build
from trtls.cli.common import finding_line
from trtls.cli.console import raw
from trtls.core import build_view
from trtls.core.display import evidence_lines, human_bytes, peak_memory_text
from trtls.core.phase_tree import PhaseView, row_text, rows_of
from trtls.core.summary_record import Summary
from trtls.core.terminal_text import terminal_safe as safe

STATUS_STYLE = {"running": "cyan", "done": "green", "cancelled": "yellow", "failed": "red"}


class LogDigest:
    """TensorRT's warnings and errors, each text once (it repeats a warning per tensor: `cast_429`, `cast_536`)."""

    SEVERITIES = ("ERROR", "INTERNAL_ERROR", "WARNING")

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.first: dict[str, str] = {}  # key → the first full line seen

    def add(self, severity: str, msg: str) -> bool:
        """True the first time a warning of this shape is seen."""
        if severity not in self.SEVERITIES:
            return False
        key = re.sub(r"\b\w*\d+\w*\b", "#", msg)
        self.counts[key] = self.counts.get(key, 0) + 1
        if self.counts[key] == 1:
            self.first[key] = f"[{severity}] {msg}"
            return True
        return False

    def repeated(self) -> dict[str, int]:
        return {k: n for k, n in self.counts.items() if n > 1}


class RichView:
    """Redraws the whole tree a few times a second; cheap next to a build. TensorRT's warnings are listed under
    the tree, each once, as the plain output prints them."""

    SHOW_LOGS = 6

    def __init__(self, build: Build):
        from rich.console import Console
        from rich.live import Live

        self.build = build
        self.logs = LogDigest()
        self.console = Console(file=raw(sys.stdout))  # rich draws its own escapes; each name is escaped below
        self.live = Live(self._render(), console=self.console, refresh_per_second=8, transient=False)

    def _render(self) -> Any:
        from rich.console import Group
        from rich.text import Text

        tree = self._render_tree()
        if not self.logs.first:
            return tree
        lines = list(self.logs.first.items())
        shown = lines[-self.SHOW_LOGS :]
        out = [tree]
        if len(lines) > len(shown):
            out.append(Text(f"  … {len(lines) - len(shown)} earlier warning(s)", style="dim"))
        for key, line in shown:
            n = self.logs.counts[key]
            style = "red" if line.startswith("[ERROR") or line.startswith("[INTERNAL") else "yellow"
            out.append(Text(f"  {safe(line[:200])}" + (f"  (×{n})" if n > 1 else ""), style=style))
        return Group(*out)

    def _render_tree(self) -> Any:
        from rich.text import Text
        from rich.tree import Tree

        b, state = self.build, self.build.state
        now = time.monotonic_ns()
        heading = build_view.description(state, now)
        if state.running:  # `· ~40 s left, 25–60 s`, the progress message's words (trtls.builds.supervisor.time_left)
            heading += f" · {b.time_left(now)}"
        root = Tree(Text.assemble((safe(state.engine), "bold"), f" {safe(heading)}"))
        views = state.tree.view(now, state.baselines)

        def walk(node: Any, parent_id: str | None) -> None:
            for row in rows_of(views, parent_id):
                if isinstance(row, list):
                    node.add(Text(safe(row_text(row)), style="green"))
                else:
                    style = "yellow" if row.stalled else STATUS_STYLE[row.status]
                    walk(node.add(Text(safe(row_text(row)), style=style)), row.id)

        walk(root, None)
        return root

    def __enter__(self) -> RichView:
        self.live.__enter__()
        return self

    def update(self, build: Build, ev: Any) -> None:
        if ev is not None and ev.type == "log":
            self.logs.add(ev.severity, ev.msg)
        self.live.update(self._render())

    def tick(self) -> None:
        self.live.update(self._render())

    def __exit__(self, *exc: Any) -> None:
        self.live.update(self._render())
        self.live.__exit__(*exc)


class PlainView:
    """Phase starts and finishes, indented by depth; a stall line when the builder goes quiet.

    Deep phases come by the hundred (one per reformat) and a log cannot fold lines it already printed, nor put a
    row above lines printed before it. So no phase below SHOW_DEPTH prints its start or its finish as it happens:
    when a phase at SHOW_DEPTH finishes, its whole subtree is printed under it the way the live tree draws it (each
    parent above its children, the core's folded rows folded), then its own finish line."""

    SHOW_DEPTH = 2
    REMIND_EVERY_S = 5.0  # while the builder is quiet, repeat the progress line this often

    def __init__(self, build: Build, out: TextIO | None = None):
        self.build = build
        self.out = out or sys.stdout  # looked up now: sys.stdout may have been replaced since import
        self.last_quiet_report = 0.0
        self.logs = LogDigest()

    def __enter__(self) -> PlainView:
        return self

    def update(self, build: Build, ev: Any) -> None:
        if ev is None:
            return
        depth = ev.phase_id.count(".") if ev.type in ("phase_start", "phase_finish") else 0
        if ev.type == "phase_start" and depth <= self.SHOW_DEPTH:
            self._line(f"{'  ' * depth}▶ {ev.name} ({ev.num_steps} steps)")
        elif ev.type == "phase_finish" and depth <= self.SHOW_DEPTH and ev.phase_id in build.state.tree.phases:
            views = build.state.tree.view(time.monotonic_ns(), build.state.baselines)
            if depth == self.SHOW_DEPTH:
                self._subtree(views, ev.phase_id, depth + 1)
            else:  # the folded rows among its children (their own finish lines were held back)
                for row in rows_of(views, ev.phase_id):
                    if isinstance(row, list):
                        self._line("  " * (depth + 1) + row_text(row))
            phase = next(v for v in views if v.id == ev.phase_id)
            if phase.folded_into is None:
                self._line("  " * depth + row_text(phase))
        elif ev.type == "log" and self.logs.add(ev.severity, ev.msg):
            self._line(f"[{ev.severity}] {ev.msg}")
        elif ev.type == "cache_decision":
            self._line(f"timing cache: {ev.decision} — {ev.reason}")

    def _subtree(self, views: list[PhaseView], parent_id: str, depth: int) -> None:
        for row in rows_of(views, parent_id):
            self._line("  " * depth + row_text(row))
            if isinstance(row, PhaseView):
                self._subtree(views, row.id, depth + 1)

    def tick(self) -> None:
        b, state = self.build, self.build.state
        deepest = state.tree.deepest_running_view(time.monotonic_ns(), state.baselines)
        quiet = deepest.quiet_s if deepest is not None else None
        if quiet is None:
            self.last_quiet_report = 0.0
        elif quiet - self.last_quiet_report >= self.REMIND_EVERY_S:
            self.last_quiet_report = quiet
            self._line(f"  … {build_view.progress_message(state, b.time_left)}")

    def _line(self, text: str) -> None:
        print(safe(text), file=self.out, flush=True)

    def __exit__(self, *exc: Any) -> None:
        for key, n in self.logs.repeated().items():
            self._line(f'  (a warning like "{key[:80]}" was repeated {n} times)')


class JsonView:
    """`--json`: the worker's events as JSON lines, then the summary as the last line."""

    def __init__(self, build: Build, out: TextIO | None = None):
        self.out = out or sys.stdout  # looked up now: sys.stdout may have been replaced since import

    def __enter__(self) -> JsonView:
        return self

    def update(self, build: Build, ev: Any) -> None:
        if ev is None:
            record = build.state.record  # as written, keys and values (undeclared ones too)
            print(json.dumps({"type": "summary", "summary": record}, default=str), file=self.out, flush=True)
        else:
            # json.dumps escapes every control character and non-ASCII name (model_dump_json writes C1 raw)
            print(json.dumps(ev.model_dump(mode="json")), file=self.out, flush=True)

    def tick(self) -> None:
        pass

    def __exit__(self, *exc: Any) -> None:
        pass


def print_outcome(build: Build, out: TextIO | None = None) -> None:
    stream = out or sys.stdout

    def say(text: str) -> None:
        print(safe(text), file=stream)

    state = build.state
    record = state.summary or Summary()
    say(f"\n{state.engine}: {build_view.outcome_message(state)}")
    if (record.outputCheck or {}).get("writable") is False:  # located on the recipe's `output` key
        from trtls.builds.supervisor.outcome_findings import build_findings
        from trtls.core.recipe import load_recipe

        loaded = load_recipe(build.recipe_path)
        for f in build_findings(record):
            if f.code == "TRT405":
                say(f"  {finding_line(loaded, f)}")
    if record.cancelSource:
        say(
            f"  cancel: source={record.cancelSource} request→builder return {record.cancelLatencyMs} ms, "
            f"return→cleanup {record.cleanupLatencyMs} ms, forced={record.forced}"
        )
    verdicts = dict(evidence_lines(record))  # the report lists the same lines (core.display)
    for label in ("timing cache", "cleanup"):
        say(f"  {label}: {verdicts[label]}")
    if record.engineArtifact:
        e = record.engineArtifact
        say(f"  engine: {e['path']} ({human_bytes(e.get('size'))}, sha256 {str(e.get('sha256'))[:16]}…)")
    for label in ("retry", "validation"):
        say(f"  {label}: {verdicts[label]}")
    peaks = build.history().peaks(record.buildConfigHash) if record.buildConfigHash else []
    if peaks and peaks[-1].get("buildId") == record.buildId:  # this build's peak, with its settings' history
        say(f"  memory: {peak_memory_text(peaks, lead='peaked at')}")
    say(f"  evidence: {record.evidenceError or state.evidence_dir / 'summary.json'}")  # TRT413: none written
