"""The terminal faces render the core's view: folded rows and the stall rule come from `PhaseTree.view`."""

from __future__ import annotations

import io
import time
from pathlib import Path

from rich.console import Console

from trtls.builds.supervisor import Build
from trtls.cli.terminal_view import PlainView, RichView
from trtls.core.events import PhaseFinish, PhaseStart, Step
from trtls.core.phase_tree import FOLD_AT

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
    assert reformat_lines[0] == f"✓ Reformat ×{REFORMATS} 0.00 s", "the folded row, once"
    assert reformat_lines[1].startswith("✓ Reformats "), "then its parent"
    assert sum("▶" in line for line in lines) == 3, "deep starts are not printed"


def test_plain_view_stall_line_comes_from_the_core_rule() -> None:
    build, out, view = build_with_reformats(PlainView)
    assert isinstance(view, PlainView)
    view.tick()
    last = out.getvalue().splitlines()[-1]
    assert "Building engine › Timing 1/1" in last and "quiet 60 s" in last and last.endswith("stalled"), last
    view.tick()  # the next reminder only REMIND_EVERY_S later
    assert out.getvalue().splitlines()[-1] == last and out.getvalue().count("quiet") == 1


def test_rich_view_draws_the_folded_row_and_the_stalled_phase() -> None:
    build, _, view = build_with_reformats(RichView)
    assert isinstance(view, RichView)
    drawn = io.StringIO()
    Console(file=drawn, width=200, color_system=None).print(view._render())
    text = drawn.getvalue()
    assert text.count("Reformat ×") == 1 and f"Reformat ×{REFORMATS}" in text
    assert "✓ Reformat 0.00 s" not in text, "a folded phase is not drawn on its own"
    timing = next(line for line in text.splitlines() if "Timing [" in line)
    assert "quiet 60 s" in timing and "stalled" in timing
