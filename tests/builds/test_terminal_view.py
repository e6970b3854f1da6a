"""The terminal faces render the core's view: folded rows and the stall rule come from `PhaseTree.view`."""

from __future__ import annotations

import io
import time
from pathlib import Path

from rich.console import Console

from trtls.builds.supervisor.supervisor import Build
from trtls.cli.terminal_view import PlainView, RichView
from trtls.core.events import PhaseFinish, PhaseStart, Step, parse_event
from trtls.core.phase_tree import FOLD_AT

TRACES = Path(__file__).parents[1] / "data" / "trt-rtx-traces"

REFORMATS = FOLD_AT + 2


def build_with_reformats(view_cls: type) -> tuple[Build, io.StringIO, object]:
    """A build whose tree is TensorRT's shape: a deep parent with many short same-name leaves, then a silence."""
    build = Build("b-1", "large", Path("/w/trtls.toml"), {"output": "/w/large.engine"}, 5.0, ["worker"])
    out = io.StringIO()
    view = view_cls(build, out) if view_cls is PlainView else view_cls(build)
    t = time.monotonic_ns() - 60_000_000_000
    events = [
        PhaseStart(type="phase_start", phase_id="0", parent_id=None, name="Building engine", num_steps=2, t_ns=t),
        PhaseStart(type="phase_start", phase_id="0.0", parent_id="0", name="Timing", num_steps=1, t_ns=t),
        PhaseStart(type="phase_start", phase_id="0.0.0", parent_id="0.0", name="Tactics", num_steps=1, t_ns=t),
        PhaseStart(type="phase_start", phase_id="0.0.0.0", parent_id="0.0.0", name="Reformats", num_steps=99, t_ns=t),
    ]
    for i in range(REFORMATS):
        pid = f"0.0.0.0.{i}"
        events.append(
            PhaseStart(type="phase_start", phase_id=pid, parent_id="0.0.0.0", name="Reformat", num_steps=1, t_ns=t)
        )
        events.append(PhaseFinish(type="phase_finish", phase_id=pid, t_ns=t + 1000))
    events.append(PhaseFinish(type="phase_finish", phase_id="0.0.0.0", t_ns=t + 2000))
    events.append(PhaseFinish(type="phase_finish", phase_id="0.0.0", t_ns=t + 3000))
    events.append(Step(type="step", phase_id="0.0", step=0, t_ns=t + 4000))  # then 60 s of silence
    for ev in events:
        build.tree.apply(ev)
        view.update(build, ev)
    return build, out, view


def test_plain_view_prints_the_folded_row_once_and_no_folded_phase() -> None:
    build, out, view = build_with_reformats(PlainView)
    lines = out.getvalue().splitlines()
    reformat_lines = [line.strip() for line in lines if "Reformat" in line]
    assert len(reformat_lines) == 2, lines
    assert reformat_lines[0].startswith("✓ Reformats "), "the parent first, as the live tree draws it"
    assert reformat_lines[1] == f"✓ Reformat ×{REFORMATS} 0.0 s in all", "then the folded row, once"
    assert sum("▶" in line for line in lines) == 3, "deep starts are not printed"


def depth(line: str) -> int:
    return (len(line) - len(line.lstrip(" "))) // 2


def plain_lines_of_trace(name: str) -> tuple[list[str], Build]:
    """A recorded TensorRT-RTX build (the `--json` event stream of a real `large` build) through the plain view."""
    build = Build("b-2", "large", Path("/w/trtls.toml"), {"output": "/w/large.engine"}, 5.0, ["worker"])
    out = io.StringIO()
    view = PlainView(build, out)
    for line in (TRACES / name).read_text().splitlines():
        ev = parse_event(line)
        if ev.type in ("phase_start", "step", "phase_finish"):
            build.tree.apply(ev)
            view.update(build, ev)
    return out.getvalue().splitlines(), build


def test_plain_lines_read_like_the_live_tree() -> None:
    """No line hangs deeper than one level below the line above it (a finished inner phase printed under a parent
    whose start was never printed read as a stray), every phase of the tree is on some line (itself or its folded
    row), and a deep subtree's rows are the live tree's rows (trtls.core.phase_tree.render_lines)."""
    lines, build = plain_lines_of_trace("large_events.jsonl")
    assert len(build.tree.phases) > 100 and any("×" in line for line in lines), "the trace is TensorRT's shape"
    for above, line in zip(lines, lines[1:], strict=False):
        assert depth(line) <= depth(above) + 1, f"{line!r} hangs under {above!r}"
    deep = [p for p in build.tree.phases.values() if p.id.count(".") > PlainView.SHOW_DEPTH]
    assert deep, "the trace has phases below SHOW_DEPTH"
    text = "\n".join(lines)
    live = build.tree.render_lines(0)
    for p in deep:
        assert f"{p.name} " in text, f"phase {p.id} {p.name!r} is missing from the plain lines"
    deep_rows = [line for line in lines if depth(line) > PlainView.SHOW_DEPTH]
    assert deep_rows and all(row in live for row in deep_rows), "deep rows are the live tree's rows"


def test_plain_view_stall_line_comes_from_the_core_rule() -> None:
    build, out, view = build_with_reformats(PlainView)
    assert isinstance(view, PlainView)
    view.tick()
    last = out.getvalue().splitlines()[-1]
    assert "Building engine › Timing 1/1" in last and "quiet 1 min 00 s" in last, last
    assert last.endswith("stalled · no estimate"), "the time left comes last: no history, no basis"
    view.tick()  # the next reminder only REMIND_EVERY_S later
    assert out.getvalue().splitlines()[-1] == last and out.getvalue().count("quiet") == 1


def test_rich_view_draws_the_folded_row_and_the_stalled_phase() -> None:
    build, _, view = build_with_reformats(RichView)
    assert isinstance(view, RichView)
    drawn = io.StringIO()
    Console(file=drawn, width=200, color_system=None).print(view._render())
    text = drawn.getvalue()
    assert text.count("Reformat ×") == 1 and f"Reformat ×{REFORMATS}" in text
    assert "✓ Reformat 0.0 s" not in text, "a folded phase is not drawn on its own"
    timing = next(line for line in text.splitlines() if "Timing 1/1" in line)
    assert "quiet 1 min 00 s" in timing and "stalled" in timing
