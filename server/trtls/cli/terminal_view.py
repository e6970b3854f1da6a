"""The build as seen in a terminal: a live rich tree on a TTY, plain lines otherwise (CI logs stay readable)."""

from __future__ import annotations

import json
import re
import sys
import time
from typing import Any, TextIO

from trtls.builds.supervisor import Build
from trtls.core.phase_tree import PhaseView

STATUS_MARK = {"running": "…", "done": "✓", "cancelled": "■", "failed": "✗"}
STATUS_STYLE = {"running": "cyan", "done": "green", "cancelled": "yellow", "failed": "red"}


def _phase_label(p: PhaseView) -> str:
    """One phase as the core's view gives it: the stall rule (quiet, stalled) is data, not decided here."""
    # A finished phase shows no step count: TensorRT often finishes a phase before its last announced step
    # ("5/6" would read as unfinished). A running, cancelled or failed phase shows where it is or stopped.
    steps = "" if p.status == "done" else f" [{(p.step + 1) if p.step is not None else 0}/{p.num_steps}]"
    text = f"{STATUS_MARK[p.status]} {p.name}{steps} {p.elapsed_s:.2f} s"
    if p.baseline_s is not None:
        text += f" · usual {p.baseline_s:.2f} s"
    if p.quiet_s is not None:
        text += f" · quiet {p.quiet_s:.0f} s"
    if p.stalled:
        text += " · stalled"
    return text


def _folded_label(group: list[PhaseView]) -> str:
    return f"✓ {group[0].name} ×{len(group)} {sum(p.elapsed_s for p in group):.2f} s"


def _rows(views: list[PhaseView], parent_id: str | None) -> list[PhaseView | list[PhaseView]]:
    """The children of one phase in start order: a phase, or the group of phases the core folded into one row."""
    rows: list[PhaseView | list[PhaseView]] = []
    groups: dict[str, list[PhaseView]] = {}
    for v in views:
        if v.parent_id != parent_id:
            continue
        if v.folded_into is None:
            rows.append(v)
        elif v.folded_into in groups:
            groups[v.folded_into].append(v)
        else:
            groups[v.folded_into] = [v]
            rows.append(groups[v.folded_into])
    return rows


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
        self.console = Console(stderr=False)
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
            out.append(Text(f"  {line[:200]}" + (f"  (×{n})" if n > 1 else ""), style=style))
        return Group(*out)

    def _render_tree(self) -> Any:
        from rich.tree import Tree

        b = self.build
        now = time.monotonic_ns()
        head = f"[bold]{b.engine}[/] {b.status} {b.elapsed_s(now):.1f} s"
        if b.token.is_set and b.running:
            head += f" [yellow]stopping ({b.token.source})…[/]"
        root = Tree(head)
        views = b.tree.view(now, b.baselines)

        def walk(node: Any, parent_id: str | None) -> None:
            for row in _rows(views, parent_id):
                if isinstance(row, list):
                    node.add(f"[green]{_folded_label(row)}[/]")
                else:
                    style = "yellow" if row.stalled else STATUS_STYLE[row.status]
                    walk(node.add(f"[{style}]{_phase_label(row)}[/]"), row.id)

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

    Deep phases come by the hundred (one per reformat) and a log cannot fold lines it already printed: below
    SHOW_DEPTH no start is printed, and a finished leaf is printed when its parent finishes, once the core's
    folding rule has grouped it with its siblings."""

    SHOW_DEPTH = 2
    REMIND_EVERY_S = 5.0  # while the builder is quiet, repeat the progress line this often

    def __init__(self, build: Build, out: TextIO | None = None):
        self.build = build
        self.out = out or sys.stdout  # looked up now: sys.stdout may have been replaced since import
        self.last_quiet_report = 0.0
        self.logs = LogDigest()

    def __enter__(self) -> PlainView:
        return self

    def _deep_leaf(self, p: PhaseView) -> bool:
        return p.id.count(".") > self.SHOW_DEPTH and not self.build.tree.phases[p.id].children

    def update(self, build: Build, ev: Any) -> None:
        if ev is None:
            return
        if ev.type == "phase_start" and ev.phase_id.count(".") <= self.SHOW_DEPTH:
            self._line(f"{'  ' * ev.phase_id.count('.')}▶ {ev.name} ({ev.num_steps} steps)")
        elif ev.type == "phase_finish" and ev.phase_id in build.tree.phases:
            views = build.tree.view(time.monotonic_ns(), build.baselines)
            indent = "  " * ev.phase_id.count(".")
            for row in _rows(views, ev.phase_id):
                if isinstance(row, list):
                    self._line(f"{indent}  {_folded_label(row)}")
                elif self._deep_leaf(row):
                    self._line(f"{indent}  {_phase_label(row)}")
            phase = next(v for v in views if v.id == ev.phase_id)
            if phase.folded_into is None and not self._deep_leaf(phase):
                self._line(f"{indent}{_phase_label(phase)}")
        elif ev.type == "log" and self.logs.add(ev.severity, ev.msg):
            self._line(f"[{ev.severity}] {ev.msg}")
        elif ev.type == "cache_decision":
            self._line(f"timing cache: {ev.decision} — {ev.reason}")

    def tick(self) -> None:
        b = self.build
        deepest = b.tree.deepest_running_view(time.monotonic_ns(), b.baselines)
        quiet = deepest.quiet_s if deepest is not None else None
        if quiet is None:
            self.last_quiet_report = 0.0
        elif quiet - self.last_quiet_report >= self.REMIND_EVERY_S:
            self.last_quiet_report = quiet
            self._line(f"  … {b.progress_message()}")

    def _line(self, text: str) -> None:
        print(text, file=self.out, flush=True)

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
            print(json.dumps({"type": "summary", "summary": build.summary}, default=str), file=self.out, flush=True)
        else:
            print(ev.model_dump_json(), file=self.out, flush=True)

    def tick(self) -> None:
        pass

    def __exit__(self, *exc: Any) -> None:
        pass


def print_outcome(build: Build, out: TextIO | None = None) -> None:
    out = out or sys.stdout
    s = build.summary or {}
    print(f"\n{build.engine}: {build.outcome_message()}", file=out)
    if (s.get("outputCheck") or {}).get("writable") is False:  # located on the recipe's `output` key
        from trtls.builds.outcome_findings import build_findings
        from trtls.core.recipe import load_recipe

        loaded = load_recipe(build.recipe_path)
        for f in build_findings(s):
            if f.code == "TRT405":
                print(f"  {loaded.location(f)}: {f.code} {f.message}", file=out)
    if s.get("cancelSource"):
        print(
            f"  cancel: source={s['cancelSource']} request→builder return {s.get('cancelLatencyMs')} ms, "
            f"return→cleanup {s.get('cleanupLatencyMs')} ms, forced={s.get('forced')}",
            file=out,
        )
    cache = s.get("timingCache") or {}
    print(f"  timing cache: {s.get('timingCacheMode')} — {cache.get('reason', '')}", file=out)
    print(f"  cleanup: {s.get('cleanupStatus')}{_previous_engine(s)}", file=out)
    if s.get("engineArtifact"):
        e = s["engineArtifact"]
        print(f"  engine: {e['path']} ({human_size(e.get('size'))}, sha256 {str(e.get('sha256'))[:16]}…)", file=out)
    print(f"  retry: {s.get('retryPolicy')} — {s.get('retryRule')}", file=out)
    print(f"  validation: {s.get('validationStatus')} ({s.get('validationNote')})", file=out)
    print(f"  evidence: {build.evidence_dir / 'summary.json'}", file=out)


def human_size(n: Any) -> str:
    """`12.8 MiB`, never a raw byte count."""
    if not isinstance(n, int):
        return "size unknown"
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{n} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GiB"


def _previous_engine(s: dict[str, Any]) -> str:
    """What became of the engine that was at the output before this build, in words (never `None`)."""
    if s.get("outcome") == "built":
        return ""  # replaced by the new engine, atomically
    intact = s.get("previousEngineIntact")
    if intact is True:
        return "; previous engine intact (byte for byte)"
    if intact is False:
        return "; previous engine NOT intact"
    return "; there was no previous engine at the output"
