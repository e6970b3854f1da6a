"""The phase tree, rebuilt from the real recorded TensorRT-RTX traces (tests/data/trt-rtx-traces)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trtls.core.open_phases import OpenPhases
from trtls.core.phase_tree import PhaseTree, tree_from_callbacks

TRACES = Path(__file__).parents[1] / "data" / "trt-rtx-traces"

# The 27-conv build's nesting as docs/../tensorrt.md gives it (names as TRT-RTX 1.7 printed them).
EXPECTED_NESTING = [
    (None, "Building engine"),
    ("Building engine", "Cloning network graph"),
    ("Building engine", "Preparing graph for optimization"),
    ("Building engine", "Building engine from subgraph"),
    ("Building engine from subgraph", "Optimizing graph"),
    ("Building engine from subgraph", "Computing profile costs"),
    ("Computing profile costs", "Timing tactics"),
    ("Timing tactics", "Timing graph nodes"),
    ("Timing tactics", "Timing tensor reformats"),
    ("Timing tensor reformats", "Computing reformatting costs"),
    ("Timing tensor reformats", "Computing reformatting costs"),
    ("Computing profile costs", "Determining refit engines"),
]


def load(name: str, run: str | None = None) -> list[dict]:
    recs = [json.loads(line) for line in (TRACES / name).read_text().splitlines()]
    return [r for r in recs if run is None or r.get("run") == run]


def nesting(tree: PhaseTree) -> list[tuple[str | None, str]]:
    return [(tree.phases[p.parent_id].name if p.parent_id else None, p.name) for p in tree.phases.values()]


def test_full_trace_matches_documented_nesting() -> None:
    tree = tree_from_callbacks(load("trace_full.jsonl"))
    assert nesting(tree) == EXPECTED_NESTING
    assert all(p.status == "done" for p in tree.phases.values())
    # ids are positions, not names: the two "Computing reformatting costs" phases get different ids
    reformat = [p.id for p in tree.phases.values() if p.name == "Computing reformatting costs"]
    assert reformat == ["0.2.1.0.1.0", "0.2.1.0.1.1"]
    assert tree.phases["0"].num_steps == 6


def test_phase_finishing_before_last_step_is_done() -> None:
    tree = tree_from_callbacks(load("trace_full.jsonl"))
    early = [p for p in tree.phases.values() if (p.step or 0) + 1 < p.num_steps]
    assert early, "the trace has phases that finish before num_steps (tensorrt.md)"
    assert all(p.status == "done" for p in early)
    assert tree.fraction_done() == 1.0


@pytest.mark.parametrize("name", ["trace_cancel_0.jsonl", "trace_cancel_25.jsonl", "trace_cancel_75.jsonl"])
def test_cancel_unwinds_every_open_phase(name: str) -> None:
    tree = tree_from_callbacks(load(name))
    assert not tree.running(), "every open phase got phase_finish"
    cancelled = [p for p in tree.phases.values() if p.status == "cancelled"]
    assert cancelled and cancelled[0].id == "0", "the root was open when the cancel unwound"
    # the nesting seen before the cancel is a prefix of the full build's nesting
    assert nesting(tree) == EXPECTED_NESTING[: len(tree.phases)]


def test_timing_cache_trace_runs_have_same_ids() -> None:
    runs = [tree_from_callbacks(load("trace_tcache.jsonl", run)) for run in ("run1", "run2")]
    assert list(runs[0].phases) == list(runs[1].phases), "same network + settings → same phase ids (history keys)"


def test_open_phases_reuse_of_names_gets_new_ids() -> None:
    names = OpenPhases()
    a, _ = names.start("Build", None)
    b, parent = names.start("Step", "Build")
    assert (a, b, parent) == ("0", "0.0", "0")
    assert names.finish("Step") == "0.0"
    c, _ = names.start("Step", "Build")
    assert c == "0.1"


def test_snapshot_and_stall_fields() -> None:
    tree = PhaseTree()
    tree.start("0", None, "Building engine", 4, 0)
    tree.start("0.0", "0", "Timing", 2, 1_000_000_000)
    tree.step("0.0", 0, 2_000_000_000)
    snap = {p["id"]: p for p in tree.snapshot(5_000_000_000, {"0.0": 1.5})}
    assert snap["0.0"]["quietForS"] == 3.0 and snap["0.0"]["baselineS"] == 1.5
    assert snap["0.0"]["elapsedS"] == 4.0 and snap["0"]["parentId"] is None
    tree.close_open("failed", 6_000_000_000)
    assert {p.status for p in tree.phases.values()} == {"failed"}
    assert tree.snapshot(7_000_000_000)[0]["quietForS"] is None


def test_fraction_counts_running_child() -> None:
    tree = PhaseTree()
    tree.start("0", None, "root", 4, 0)
    tree.step("0", 0, 1)
    tree.start("0.1", "0", "child", 10, 2)
    tree.step("0.1", 4, 3)
    assert tree.fraction_done() == pytest.approx((1 + 0.5) / 4)


def test_fraction_descends_into_running_grandchildren() -> None:
    tree = PhaseTree()
    tree.start("0", None, "root", 2, 0)
    tree.start("0.0", "0", "child", 1, 1)
    tree.start("0.0.0", "0.0", "grandchild", 4, 2)
    tree.step("0.0.0", 1, 3)  # 2 of 4 grandchild steps → half of the child's one step → a quarter of the root
    assert tree.fraction_done() == pytest.approx(0.25)


def test_a_worker_cannot_make_the_tree_a_cycle() -> None:
    tree = PhaseTree()
    tree.start("0", None, "root", 1, 0)
    assert tree.start("0", "0", "again", 1, 1) is None, "a repeated id is refused"
    assert tree.start("0.5", "9", "orphan", 1, 2) is None, "an unknown parent is refused"
    assert tree.rejected == 2 and [p.id for p in tree.deepest_running_path()] == ["0"]
    assert tree.render_lines(3) == ["… root 0/1 · 0.0 s"]


@pytest.mark.parametrize("name", ["trace_full.jsonl", "trace_cancel_75.jsonl"])
def test_deepest_running_view_is_what_the_whole_view_says_at_every_callback(name: str) -> None:
    """It is computed for one phase alone (a live status line's cost); it must say what the whole view says."""
    recs = [json.loads(line) for line in (TRACES / name).read_text().splitlines()]
    calls = [r for r in recs if r.get("ev") in ("phase_start", "step_complete", "phase_finish")]
    names, tree = OpenPhases(), PhaseTree()
    checked = 0
    for r in calls:
        t = r["t_ns"]
        if r["ev"] == "phase_start":
            tree.start(*names.start(r["phase"], r.get("parent")), r["phase"], r["num_steps"], t)
        elif r["ev"] == "step_complete" and (pid := names.id_of(r["phase"])) is not None:
            tree.step(pid, r["step"], t)
        elif r["ev"] == "phase_finish" and (pid := names.finish(r["phase"])) is not None:
            tree.finish(pid, t, "done")
        now = t + 3_000_000_000  # 3 s later: quiet long enough to be shown
        baselines = {p: 1.0 for p in tree.phases}
        one = tree.deepest_running_view(now, baselines)
        path = tree.deepest_running_path()
        if not path:
            assert one is None
            continue
        assert one == next(v for v in tree.view(now, baselines) if v.id == path[-1].id)
        checked += 1
    assert checked > 50
