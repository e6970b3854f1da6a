"""The build as seen in a terminal: a live rich tree on a TTY, plain lines otherwise (CI logs stay readable)."""

from __future__ import annotations

import json
import re
import sys
import time
from typing import Any, TextIO

from trtls.builds.supervisor import Build

FOLD_BELOW_S = 0.2
STATUS_MARK = {"running": "…", "done": "✓", "cancelled": "■", "failed": "✗"}


def _phase_label(build: Build, pid: str, now: int) -> str:
    p = build.tree.phases[pid]
    # A finished phase shows no step count: TensorRT often finishes a phase before its last announced step
    # ("5/6" would read as unfinished). A running, cancelled or failed phase shows where it is or stopped.
    steps = "" if p.status == "done" else f" [{(p.step + 1) if p.step is not None else 0}/{p.num_steps}]"
    text = f"{STATUS_MARK[p.status]} {p.name}{steps} {p.elapsed_s(now):.2f} s"
    usual = build.baselines.get(pid)
    if usual is not None:
        text += f" · usual {usual:.2f} s"
    if p.status == "running":
        quiet = build.tree.quiet_for_s(now)
        if quiet is not None and quiet >= 2:
            text += f" · quiet {quiet:.0f} s"
    return text


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

        def walk(node: Any, ids: list[str]) -> None:
            # Fast finished phases come by the dozen (one per reformat): fold them into one line per name.
            folded: dict[str, list[float]] = {}
            for pid in ids:
                p = b.tree.phases[pid]
                if p.status == "done" and p.elapsed_s(now) < FOLD_BELOW_S and not p.children:
                    folded.setdefault(p.name, []).append(p.elapsed_s(now))
                    continue
                style = {"running": "cyan", "done": "green", "cancelled": "yellow", "failed": "red"}[p.status]
                walk(node.add(f"[{style}]{_phase_label(b, pid, now)}[/]"), p.children)
            for name, times in folded.items():
                count = f" ×{len(times)}" if len(times) > 1 else ""
                node.add(f"[green]✓ {name}{count} {sum(times):.2f} s[/]")

        walk(root, b.tree.roots)
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

    Deep phases come by the hundred (one per reformat), so below depth 2 only the slow ones are printed."""

    SHOW_DEPTH = 2
    SLOW_S = 0.5

    def __init__(self, build: Build, out: TextIO = sys.stdout):
        self.build = build
        self.out = out
        self.last_quiet_report = 0.0
        self.logs = LogDigest()

    def __enter__(self) -> PlainView:
        return self

    def update(self, build: Build, ev: Any) -> None:
        if ev is None:
            return
        now = time.monotonic_ns()
        if ev.type == "phase_start" and ev.phase_id.count(".") <= self.SHOW_DEPTH:
            self._line(f"{'  ' * ev.phase_id.count('.')}▶ {ev.name} ({ev.num_steps} steps)")
        elif ev.type == "phase_finish":
            phase = build.tree.phases.get(ev.phase_id)
            if phase is not None and (ev.phase_id.count(".") <= self.SHOW_DEPTH or phase.elapsed_s(now) >= self.SLOW_S):
                self._line(f"{'  ' * ev.phase_id.count('.')}{_phase_label(build, ev.phase_id, now)}")
        elif ev.type == "log" and self.logs.add(ev.severity, ev.msg):
            self._line(f"[{ev.severity}] {ev.msg}")
        elif ev.type == "cache_decision":
            self._line(f"timing cache: {ev.decision} — {ev.reason}")

    def tick(self) -> None:
        quiet = self.build.tree.quiet_for_s(time.monotonic_ns())
        if quiet is not None and quiet >= 5 and quiet - self.last_quiet_report >= 5:
            self.last_quiet_report = quiet
            self._line(f"  … {self.build.progress_message()}")
        elif quiet is not None and quiet < 5:
            self.last_quiet_report = 0.0

    def _line(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    def __exit__(self, *exc: Any) -> None:
        for key, n in self.logs.repeated().items():
            self._line(f'  (a warning like "{key[:80]}" was repeated {n} times)')


class JsonView:
    """`--json`: the worker's events as JSON lines, then the summary as the last line."""

    def __init__(self, build: Build, out: TextIO = sys.stdout):
        self.out = out

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


def print_outcome(build: Build, out: TextIO = sys.stdout) -> None:
    s = build.summary or {}
    print(f"\n{build.engine}: {build.outcome_message()}", file=out)
    if s.get("cancelSource"):
        print(
            f"  cancel: source={s['cancelSource']} request→builder return {s.get('cancelLatencyMs')} ms, return→cleanup {s.get('cleanupLatencyMs')} ms, forced={s.get('forced')}",
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
