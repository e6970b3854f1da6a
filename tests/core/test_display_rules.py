"""The rules every face renders and none re-derives: the stall rule, folding, and the outcome kind.

The terminal view, the `trtls/buildTree` notification, the progress end and the VS Code extension all show
what these functions decide (extension/test checks that the extension only renders the fields)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import get_args

import pytest

from trtls.core import display
from trtls.core.events import Outcome
from trtls.core.outcome import BUILD_OUTCOME_KIND, build_outcome_kind, gates_outcome
from trtls.core.phase_tree import (
    FOLD_AT,
    QUIET_SHOW_S,
    STALL_WITHOUT_BASELINE_S,
    PhaseTree,
    is_stalled,
    tree_from_callbacks,
)

S = 1_000_000_000
TRACES = Path(__file__).parents[1] / "data" / "trt-rtx-traces"


@pytest.mark.parametrize(
    ("quiet", "baseline", "stalled"),
    [
        (None, None, False),
        (QUIET_SHOW_S - 0.1, None, False),
        (STALL_WITHOUT_BASELINE_S - 0.1, None, False),  # no history: only a long silence
        (STALL_WITHOUT_BASELINE_S, None, True),
        (30.0, 30.0, False),  # as long as the phase usually takes in all: not yet
        (30.1, 30.0, True),
        (1.0, 0.5, False),  # a fast phase: silences shorter than QUIET_SHOW_S are normal anyway
        (QUIET_SHOW_S + 0.1, 0.5, True),
    ],
)
def test_stall_rule(quiet: float | None, baseline: float | None, stalled: bool) -> None:
    assert is_stalled(quiet, baseline) is stalled


def running_tree() -> PhaseTree:
    tree = PhaseTree()
    tree.start("0", None, "Building engine", 4, 0)
    tree.start("0.0", "0", "Timing", 2, 1 * S)
    tree.step("0.0", 0, 2 * S)  # the builder's last callback
    return tree


def views(tree: PhaseTree, now_s: float, baselines: dict[str, float] | None = None) -> dict[str, dict]:
    return {p["id"]: p for p in tree.snapshot(int(now_s * S), baselines)}


def test_quiet_is_measured_always_and_shown_from_the_threshold() -> None:
    tree = running_tree()
    short = views(tree, 2 + QUIET_SHOW_S - 0.5)
    assert short["0.0"]["quietForS"] == QUIET_SHOW_S - 0.5, "the measure is always sent on a running phase"
    assert short["0.0"]["quietS"] is None and short["0.0"]["stalled"] is False
    shown = views(tree, 2 + 12, {"0.0": 30.0})
    assert shown["0.0"]["quietS"] == 12.0 and shown["0.0"]["stalled"] is False
    stalled = views(tree, 2 + 45, {"0.0": 30.0})
    assert stalled["0.0"]["quietS"] == 45.0 and stalled["0.0"]["stalled"] is True
    assert stalled["0"]["stalled"] is True, "the parent waits on the same silence; without history: 45 s ≥ 30 s"


def test_finished_phases_are_never_quiet_or_stalled() -> None:
    tree = running_tree()
    tree.finish("0.0", 3 * S)
    tree.start("0.1", "0", "next", 1, 3 * S)
    tree.close_open("failed", 4 * S)
    later = views(tree, 500)
    assert all(p["quietForS"] is None and p["quietS"] is None and not p["stalled"] for p in later.values())


def test_progress_line_and_tree_use_one_view() -> None:
    tree = running_tree()
    deepest = tree.deepest_running_view(47 * S, {"0.0": 30.0})
    assert deepest is not None and deepest.id == "0.0" and deepest.stalled and deepest.quiet_s == 45.0
    assert views(tree, 47, {"0.0": 30.0})["0.0"] == deepest.to_json()


def reformats(tree: PhaseTree, parent: str, first: int, count: int, name: str = "Computing reformatting costs") -> None:
    for i in range(first, first + count):
        pid = f"{parent}.{i}"
        tree.start(pid, parent, name, 1, i)
        tree.finish(pid, i + 1)


def test_fold_needs_fold_at_finished_leaf_siblings_of_one_name() -> None:
    tree = PhaseTree()
    tree.start("0", None, "Timing tensor reformats", 400, 0)
    reformats(tree, "0", 0, FOLD_AT - 1)
    assert all(p["foldedInto"] is None for p in tree.snapshot(10)), "fewer than FOLD_AT: each its own row"
    reformats(tree, "0", FOLD_AT - 1, 1)
    snap = views(tree, 10)
    assert [snap[f"0.{i}"]["foldedInto"] for i in range(FOLD_AT)] == ["0.0"] * FOLD_AT
    assert snap["0"]["foldedInto"] is None


def test_fold_leaves_running_parents_other_names_and_other_parents_apart() -> None:
    tree = PhaseTree()
    tree.start("0", None, "root", 9, 0)
    tree.start("0.0", "0", "a", 1, 0)
    reformats(tree, "0.0", 0, 3)
    tree.finish("0.0", 5)
    tree.start("0.1", "0", "a", 1, 5)  # same name as 0.0: only two finished "a" (0.2 runs), fewer than FOLD_AT
    reformats(tree, "0.1", 0, 2)  # two more reformats, under another parent: not folded with the first three
    tree.finish("0.1", 9)
    tree.start("0.2", "0", "a", 1, 9)  # running
    reformats(tree, "0", 3, 2, name="b")
    snap = views(tree, 20)
    assert [snap[f"0.0.{i}"]["foldedInto"] for i in range(3)] == ["0.0.0"] * 3
    assert all(snap[i]["foldedInto"] is None for i in ("0.0", "0.1", "0.1.0", "0.1.1", "0.2", "0.3", "0.4"))


def test_repeated_finished_subtrees_fold_into_one_row() -> None:
    """With several optimization profiles TensorRT-RTX repeats a whole subtree per profile ("Timing tactics" and its
    reformats, 48 times in the quickstart's `large`): finished ones fold, their subtrees with them; one whose subtree
    still runs does not (issue 18: the plain tree printed ~245 rows)."""
    tree = PhaseTree()
    tree.start("0", None, "Computing profile costs", 240, 0)
    for i in range(4):
        tree.start(f"0.{i}", "0", "Timing tactics", 2, 10 * i)
        reformats(tree, f"0.{i}", 10 * i, 2)
        if i < 3:
            tree.finish(f"0.{i}", 10 * i + 5)
    tree.start("0.3.2", "0.3", "Computing reformatting costs", 1, 36)  # the fourth's subtree still runs
    snap = views(tree, 40)
    assert [snap[f"0.{i}"]["foldedInto"] for i in range(4)] == ["0.0", "0.0", "0.0", None]
    assert snap["0.0"]["groupLabel"] == "Timing tactics ×3"
    lines = [line.split(" · ")[0].split(" 0.0 s")[0] for line in tree.render_lines(40 * S)]
    # the folded row's reformats are not printed; the running one's are
    assert lines == [
        "… Computing profile costs 0/240",
        "  ✓ Timing tactics ×3",
        "  … Timing tactics 0/2",
        "    ✓ Computing reformatting costs",
        "    ✓ Computing reformatting costs",
        "    … Computing reformatting costs 0/1",
    ], lines


def test_fold_on_a_real_trtrx_trace() -> None:
    """The recorded TensorRT-RTX build has two 'Computing reformatting costs' under one parent: shown as two."""
    records = [json.loads(line) for line in (TRACES / "trace_full.jsonl").read_text().splitlines()]
    tree = tree_from_callbacks(records)
    snap = tree.snapshot(max(r.get("t_ns", 0) for r in records))
    reformat = [p for p in snap if p["name"] == "Computing reformatting costs"]
    assert len(reformat) == 2 and all(p["foldedInto"] is None for p in reformat)
    assert {"quietS", "stalled", "foldedInto"} <= set(snap[0])


def test_every_build_outcome_has_a_kind() -> None:
    assert set(BUILD_OUTCOME_KIND) == set(get_args(Outcome))
    assert [build_outcome_kind(o) for o in ("built", "cancelled", "failed", "forced", "killed")] == [
        "ok",
        "cancelled",
        "failed",
        "failed",
        "failed",
    ]
    assert build_outcome_kind(None) is None, "a running build has no outcome yet"
    assert build_outcome_kind("exploded") == "failed", "an outcome this table does not know is never a success"


def test_gates_outcome() -> None:
    assert gates_outcome("supported", False) == ("supported", "ok")
    assert gates_outcome("hold", False) == ("hold", "refused")
    assert gates_outcome("reject", False) == ("reject", "refused")
    assert gates_outcome("reject", True) == ("cancelled", "cancelled"), "a cancelled run made no decision"
    assert gates_outcome(None, False) == ("no_decision", "failed")


# -- the words (trtls.core.display): each rule once, every face shows its output ------------------------------------
@pytest.mark.parametrize(
    ("s", "text"),
    [(0.04, "0.0 s"), (4.12, "4.1 s"), (9.96, "10.0 s"), (30, "30 s"), (65, "1 min 05 s"), (7380, "2 h 03 min"),
     (None, "–"), (-1, "–"), (float("nan"), "–")],
)  # fmt: skip
def test_human_seconds(s: float | None, text: str) -> None:
    assert display.human_seconds(s) == text


def test_human_bytes_is_the_one_size_rule() -> None:
    assert [display.human_bytes(n) for n in (512, 13_421_773, 3 * 1024**3, None)] == [
        "512 B", "12.8 MiB", "3.0 GiB", "size unknown"]  # fmt: skip


def test_a_finished_phase_shows_no_step_count_and_quiet_comes_before_usual() -> None:
    """Step 4 of 6 finished reads `1.2 s` (not `5/6`, which reads unfinished); running reads `5/6`; the silence and
    the usual duration always in one order."""
    assert display.step_text("done", 4, 6) is None
    assert display.phase_detail("done", 4, 6, 1.2) == "1.2 s"
    assert display.phase_detail("running", 4, 6, 1.2) == "5/6 · 1.2 s"
    assert display.phase_detail("running", None, 3, 75, quiet_s=45, baseline_s=30, stalled=True) == (
        "0/3 · 1 min 15 s · quiet 45 s · usual 30 s · stalled")  # fmt: skip
    assert display.phase_detail("cancelled", 1, 3, 2.0) == "2/3 · 2.0 s · cancelled"


def test_one_view_carries_its_words() -> None:
    tree = running_tree()
    views = {v.id: v for v in tree.view(40 * S, {"0.0": 30.0})}
    timing = views["0.0"]
    assert timing.detail == display.phase_detail(
        "running", 0, 2, timing.elapsed_s, timing.quiet_s, 30.0, timing.stalled
    )
    assert timing.to_json()["detail"] == timing.detail and timing.to_json()["stepsText"] == "1/2"


@pytest.mark.parametrize(
    ("decision", "cancelled", "status", "level", "text"),
    [
        ("supported", False, None, "info", "route r: supported"),
        ("hold", False, None, "warning", "route r: hold — see Problems"),
        ("reject", False, None, "warning", "route r: reject — see Problems"),
        # a cancelled run decided nothing, whatever a gate said before the cancel (core.outcome.gates_outcome)
        ("reject", True, None, "info", "route r: gates cancelled — no decision"),
        ("hold", True, None, "info", "route r: gates cancelled — no decision"),
        (None, False, "invalid_recipe", "warning", "route r: the recipe has errors — see Problems"),
    ],
)
def test_gates_verdict_follows_the_outcome_rule(decision, cancelled, status, level, text) -> None:
    v = display.gates_verdict("r", decision, cancelled, status)
    assert (v["level"], v["text"]) == (level, text)
    assert (v["outcome"], v["outcomeKind"]) == gates_outcome(decision, cancelled)
    assert v["showProblems"] is (level == "warning")


def test_gates_verdict_names_where_each_face_lists_the_findings() -> None:
    v = display.gates_verdict("r", "hold", False, findings="the findings above")
    assert v["text"] == "route r: hold — see the findings above" and v["level"] == "warning"


def test_the_terminal_ends_a_gates_run_with_the_verdict_sentence() -> None:
    """`trtls gates` ends with gates_verdict's sentence, as the editor does (no `decision: …` of its own)."""
    from types import SimpleNamespace

    from trtls.cli.gates import render_text
    from trtls.core.route_summary_record import RouteSummary

    summary = RouteSummary.model_validate({"checkpoint_revision": "abc", "runtime_target": "onnxruntime",
        "validation_status": "validated", "canary_status": "not_started", "rollback_status": "ready"})  # fmt: skip
    for decision, ends in (("supported", "route r: supported"), ("reject", "route r: reject — see the findings above")):
        result = SimpleNamespace(route_name="r", checks=[], decision=decision, gates_decision=decision,
                                 summary=summary, summary_path=None, cancelled=False)  # fmt: skip
        text = render_text(None, result)
        verdict = display.gates_verdict("r", decision, False, findings="the findings above")["text"]
        assert text.splitlines()[-1] == verdict == ends


def test_a_build_says_waiting_and_stopping_in_the_rows_words(tmp_path: Path) -> None:
    """The progress message, the row description and the cell's `where` use one sentence each for a cell waiting
    for a node and for a stop not yet honoured."""
    import time

    from trtls.builds.supervisor.build import Build
    from trtls.core import build_view
    from trtls.core.events import Queued

    b = Build("m:c", "large", tmp_path / "trtls.toml", {"output": str(tmp_path / "large.engine")}, 5.0, ["w"],
              remote=object(), parent_id="m")  # fmt: skip
    b.fold(Queued(type="queued", t_ns=time.monotonic_ns() - 4 * S))
    assert build_view.progress_message(b.state) == display.waiting_text(4.0) == "waiting for a node 4.0 s"
    assert build_view.description(b.state).startswith("waiting for a node ")
    assert display.node_text({"waitingS": 4.0}, True) == display.waiting_text(4.0)
    assert display.stopping_text("ide_stop") == "stopping (ide_stop)"
    assert display.build_description(True, "running", None, "ide_stop", 1.0) == "stopping (ide_stop) · 1.0 s"
    assert (
        display.matrix_description(True, "ide_stop", 1, 4, None, 1.0) == "1/4 cells done · stopping (ide_stop) · 1.0 s"
    )


@pytest.mark.parametrize(
    ("outcome", "kwargs", "text"),
    [
        ("built", {}, "built in 4.1 s"),
        ("cancelled", {}, "cancelled by ide_stop"),
        ("failed", {}, "failed: boom"),
        ("forced", {}, "forced: the builder ignored the cancel from ide_stop for 5 s and was terminated"),
        ("killed", {"node_lost": True}, "killed: boom"),
        ("killed", {}, "killed: the worker died (boom)"),
        ("killed", {"refused_lines": 2, "first_refusal": "bad"},
         "killed: the worker died (boom); 2 of its lines broke trtls.events/1: bad"),
    ],
)  # fmt: skip
def test_outcome_text(outcome: str, kwargs: dict, text: str) -> None:
    assert display.outcome_text(outcome, 4.1, "ide_stop", "boom", 5.0, **kwargs) == text


def test_the_finished_cell_count_is_counted_once(tmp_path: Path) -> None:
    """The matrix row, its cellsText and the LSP progress line show one count: MatrixBuild.cells_done."""
    from trtls.builds.supervisor.build import Build
    from trtls.builds.supervisor.matrix import MatrixBuild, PlannedCell
    from trtls.core.build_state import Ended
    from trtls.lsp.matrix_relay import progress_text

    planned = [PlannedCell("e", None, {}) for _ in range(4)]
    mb = MatrixBuild("m", "e", tmp_path / "trtls.toml", planned)
    for i, outcome in enumerate(("built", "failed", None)):
        b = Build(f"m:{i}", "e", tmp_path / "trtls.toml", {"output": str(tmp_path / "e.engine")}, 5.0, ["w"],
                  parent_id="m")  # fmt: skip
        if outcome is not None:
            b.fold(Ended(outcome))
        mb.cells.append(b)
    mb.not_started = planned[3:]
    assert mb.cells_done == 2
    row = mb.snapshot(with_cells=False)
    assert row["progress"] == {"done": 2, "total": 4} and row["cellsText"] == display.cells_text(2, 4)
    assert row["description"].startswith("2/4 cells done · building")
    assert progress_text(mb).startswith("2/4 cells done · ")


def test_the_matrix_page_says_where_a_cell_ran_in_the_trees_words(tmp_path: Path) -> None:
    from trtls.report.matrix_page import matrix_report

    node = {"nodeId": "1a2b3c4d5e6f7a8b", "hostname": "gpu-3", "gpuIds": ["0"], "acceleratorType": "L4"}
    cells = [
        {"cell": "a", "engine": "e", "buildId": "m-a", "outcome": "built", "node": node},
        {"cell": "b", "engine": "e", "buildId": "m-b", "outcome": "built", "node": None},
        {"cell": "c", "engine": "e", "buildId": None, "outcome": "not_started"},
    ]
    run = tmp_path / "m"
    run.mkdir()
    (run / "summary.json").write_text(json.dumps({"buildId": "m", "title": "e", "outcome": "built", "cells": cells}))
    html = matrix_report(run)
    assert f"<td>{display.node_text(node, False)}</td>" in html and "node gpu-3 (1a2b3c4d5e6f) · GPU 0 · L4" in html
    assert "<td>local</td>" in html and ">here<" not in html
