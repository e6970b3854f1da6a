"""One state, the same words on every face. A real recorded TensorRT-RTX build (`large`'s event stream) is folded
into a Build, then shown by every face: the terminal's live tree and plain lines, `render_lines`, the LSP progress
message, the HTML report, and the VS Code tree (the extension's real BuildTreeModel, run with node on the
server's real `trtls/buildTree` payload). Each phase row, the build's row and the running status read the same:
the words are computed once (trtls.core.display) and sent as data."""

from __future__ import annotations

import html
import io
import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from trtls.builds.supervisor.supervisor import Build
from trtls.cli.terminal_view import PlainView, RichView
from trtls.core import build_view
from trtls.core.build_state import Ended, Recorded
from trtls.core.phase_tree import NS, row_text
from trtls.report.build_page import build_report
from trtls.report.evidence import load_build

from .recorded_build import LARGE_TRACE, frozen_clock, large_events, replayed_build
from .ts_replay import replay


def folded(tmp_path: Path, evs: list[Any]) -> tuple[Build, list[str]]:
    """The build replayed, and the plain lines the terminal printed as each event came."""
    b = replayed_build(tmp_path, evs[:1])
    out = io.StringIO()
    plain = PlainView(b, out)
    plain.update(b, evs[0])
    for ev in evs[1:]:
        b.fold(ev)
        plain.update(b, ev)
    return b, out.getvalue().splitlines()


def vscode_rows(b: Build) -> list[dict[str, Any]]:
    """The VS Code tree drawn from the payload BuildRelay sends (core.build_view.snapshot, with the time left)."""
    return replay([{"uri": "file:///w/trtls.toml", **build_view.snapshot(b.state, b.time_left)}])["tree"]


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    return frozen_clock(monkeypatch)


def test_a_running_build_reads_the_same_in_the_progress_message_the_terminal_and_vscode(tmp_path, clock) -> None:
    evs = large_events()
    # the middle of TensorRT's tactic timing: deep phases running, a silence the stall rule shows
    cut = next(i for i, e in enumerate(evs) if e.type == "phase_start" and e.phase_id.count(".") >= 4)
    clock["now"] = evs[cut].t_ns + 5 * NS
    b, _ = folded(tmp_path, evs[: cut + 1])
    state = b.state
    deepest = state.tree.deepest_running_view(clock["now"], state.baselines)
    assert deepest is not None and deepest.quiet_s is not None, "the cut is inside a running, quiet phase"
    names = [p.name for p in state.tree.deepest_running_path()]

    message = build_view.progress_message(state, b.time_left)  # what BuildRelay sends as the $/progress report's
    # the time left is the last part (builds/supervisor/time_left.py): no history in tmp_path, so no basis
    assert message == " › ".join(names) + " " + deepest.detail + " · no estimate"

    rows = vscode_rows(b)
    (ts_row,) = [r for r in rows if r["kind"] == "phase" and r["id"] == deepest.id]
    assert (ts_row["label"], ts_row["description"]) == (deepest.name, deepest.detail)
    assert message.removesuffix(" · no estimate").endswith(f"{ts_row['label']} {ts_row['description']}")
    (build_row,) = [r for r in rows if r["kind"] == "build"]
    # the server's timeLeft, as the terminal's
    assert build_row["description"] == build_view.description(state) + " · no estimate"

    drawn = io.StringIO()
    Console(file=drawn, width=300, color_system=None).print(RichView(b)._render_tree())
    terminal = drawn.getvalue()
    assert f"{ts_row['label']} {ts_row['description']}" in terminal
    assert f"large {build_row['description']}" in terminal.splitlines()[0]


def test_a_finished_build_reads_the_same_on_every_face(tmp_path, clock) -> None:
    evs = large_events()
    clock["now"] = evs[-1].t_ns
    b, plain = folded(tmp_path, evs)
    duration = (evs[-1].t_ns - evs[0].t_ns) / NS
    b.fold(Ended("built"))
    b.fold(Recorded({"durationS": duration}))

    rows = vscode_rows(b)
    phase_rows = [f"{r['label']} {r['description']}" for r in rows if r["kind"] == "phase"]
    assert len(phase_rows) > 10 and any("×" in r for r in phase_rows), "TensorRT's shape: folded reformats"
    (build_row,) = [r for r in rows if r["kind"] == "build"]
    state = b.state
    described = build_view.description(state)
    assert build_row["description"] == described == f"built · {build_row['description'].split(' · ')[1]}"

    # render_lines (and the terminal's live tree, which draws the same row_text) has exactly these rows
    lines = state.tree.render_lines(clock["now"], state.baselines)
    assert [line.strip().split(" ", 1)[1] for line in lines] == phase_rows
    views = state.tree.view(clock["now"], state.baselines)
    assert all(row_text(v).split(" ", 1)[1] in phase_rows for v in views if v.folded_into is None)

    # the plain lines print every row once it is finished
    finished_lines = {line.strip().split(" ", 1)[1] for line in plain if line.strip().startswith("✓")}
    assert set(phase_rows) <= finished_lines, set(phase_rows) - finished_lines

    # the report, from the evidence the build wrote (tree.json's phases are the snapshot's)
    run = tmp_path / "run"
    run.mkdir()
    (run / "events.jsonl").write_text(LARGE_TRACE.read_text())
    summary = {"buildId": b.id, "engine": "large", "outcome": "built", "durationS": duration,
               "phaseTree": build_view.snapshot(state)["phases"]}  # fmt: skip
    (run / "summary.json").write_text(json.dumps(summary))
    page = build_report(load_build(run))
    drawn = [r for r in rows if r["kind"] == "phase" and r["id"].count(".") <= 2]
    assert drawn
    for r in drawn:
        assert html.escape(f"{r['label']} {r['description']}", quote=True) in page, r
