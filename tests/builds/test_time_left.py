"""Time left from the engine's own history (trtls.builds.supervisor.time_left), on recorded TensorRT-RTX builds:
nothing here
depends on the clock of the machine running the tests. The traces are `tests/data/trt-rtx-traces/` (a copy of
../shared/fixtures/trt-rtx-traces/ plus `large_events.jsonl`, a real `large` build's --json stream)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from trtls.builds.supervisor.history import History
from trtls.builds.supervisor.supervisor import Build
from trtls.builds.supervisor.time_left import MIN_BAND, estimate_time_left
from trtls.core import build_view
from trtls.core.build_state import Ended
from trtls.core.display import time_left_text
from trtls.core.events import parse_event
from trtls.core.phase_tree import NS, PhaseTree

TRACES = Path(__file__).parents[1] / "data" / "trt-rtx-traces"


def large_events() -> list[Any]:
    return [parse_event(line) for line in (TRACES / "large_events.jsonl").read_text().splitlines()]


def tree_until(evs: list[Any], cut_ns: int) -> PhaseTree:
    tree = PhaseTree()
    for ev in evs:
        if ev.t_ns > cut_ns:
            break
        if ev.type in ("phase_start", "step", "phase_finish"):
            tree.apply(ev)
    return tree


@pytest.mark.parametrize("share", [0.25, 0.5, 0.75])
def test_a_build_like_its_history_is_estimated_within_its_interval(share: float) -> None:
    """With the same build as history, the estimate at 25/50/75 % of `large` is within 5 % of the build's length
    of the true time left, and the interval holds the truth."""
    evs = large_events()
    t0, t1 = evs[0].t_ns, evs[-1].t_ns
    total = (t1 - t0) / NS
    baselines = tree_until(evs, t1).durations()
    cut = t0 + int(share * (t1 - t0))
    left = estimate_time_left(tree_until(evs, cut), baselines, [total], t0, cut)
    truth = (t1 - cut) / NS
    assert left.seconds is not None and left.low is not None and left.high is not None
    assert abs(left.seconds - truth) <= 0.05 * total, (left, truth)
    assert left.low <= truth <= left.high
    assert left.low == pytest.approx(left.seconds * MIN_BAND[0]) and left.builds == 1


def test_the_phases_not_the_clock_carry_the_estimate() -> None:
    """Two builds at the same elapsed time, one whose phases ran ahead (its tree at 50 % of `large`, the other's at
    25 %): the one further along has less left. A clock-only estimate (usual total minus elapsed) gives both the same.
    """
    evs = large_events()
    t0, t1 = evs[0].t_ns, evs[-1].t_ns
    baselines = tree_until(evs, t1).durations()
    total = (t1 - t0) / NS
    now = t0 + (t1 - t0) // 4
    on_time = estimate_time_left(tree_until(evs, now), baselines, [total], t0, now)
    ahead = estimate_time_left(tree_until(evs, t0 + (t1 - t0) // 2), baselines, [total], t0, now)
    assert on_time.seconds is not None and ahead.seconds is not None
    assert ahead.seconds < on_time.seconds - 0.1 * total


def test_the_interval_is_the_spread_of_the_recorded_builds() -> None:
    evs = large_events()
    t0, t1 = evs[0].t_ns, evs[-1].t_ns
    total = (t1 - t0) / NS
    cut = t0 + (t1 - t0) // 2
    left = estimate_time_left(
        tree_until(evs, cut), tree_until(evs, t1).durations(), [total * 0.6, total, total * 2], t0, cut
    )
    # the spread in seconds around the point: 0.4 × the length below it, 1 × above it
    assert left.seconds is not None and left.low == pytest.approx(left.seconds - 0.4 * total)
    assert left.high == pytest.approx(left.seconds + total) and left.builds == 3


def test_no_basis_no_estimate() -> None:
    evs = large_events()
    cut = evs[len(evs) // 2].t_ns
    assert estimate_time_left(tree_until(evs, cut), {}, [], evs[0].t_ns, cut).seconds is None
    baselines = tree_until(evs, evs[-1].t_ns).durations()
    # a build far past every recorded one (here: recorded at 1/10 of this one's length): history no longer says
    past = estimate_time_left(tree_until(evs, cut), baselines, [(cut - evs[0].t_ns) / NS / 10], evs[0].t_ns, cut)
    assert past.seconds is None and "longer than every one" in past.basis


@pytest.mark.parametrize(
    ("seconds", "low", "high", "text"),
    [
        (40, 25, 60.4, "~40 s left, 25 s – 1 min 00 s"),
        (40, 25, 59, "~40 s left, 25–59 s"),
        (4.2, 3.1, 5.7, "~4.2 s left, 3.1–5.7 s"),
        (130, 100, 180, "~2 min 10 s left, 1 min 40 s – 3 min 00 s"),
        (None, None, None, "no estimate"),
    ],
)
def test_time_left_text(seconds: float | None, low: float | None, high: float | None, text: str) -> None:
    assert time_left_text(seconds, low, high) == text


def test_a_running_build_reads_its_history_and_says_the_time_left(tmp_path: Path, monkeypatch) -> None:
    """Through the real History file and Build: the first recorded build of this config gives the second one its
    estimate, in the progress message every face shows (LSP $/progress, the terminal)."""
    evs = large_events()
    t0, t1 = evs[0].t_ns, evs[-1].t_ns
    started = next(e for e in evs if e.type == "build_started")
    history = History(tmp_path / ".trtls" / "history.json")
    done = tree_until(evs, t1).durations()
    record = {"buildId": "large-0", "startedAt": time.time(), "durationS": (t1 - t0) / NS}
    assert history.record(started.build_config_hash, durations=done, build=record) is None

    now = {"ns": t0 + (t1 - t0) // 2}
    monkeypatch.setattr(time, "monotonic_ns", lambda: now["ns"])
    b = Build("large-1", "large", tmp_path / "trtls.toml", {"output": str(tmp_path / "large.engine")}, 5.0, ["w"])
    b.state.t_start_ns = t0  # the replayed build started when its recording did
    for ev in evs:
        if ev.t_ns > now["ns"]:
            break
        b.fold(ev)
    expected = estimate_time_left(tree_until(evs, now["ns"]), history.baselines(started.build_config_hash),
                                  [record["durationS"]], t0, now["ns"])  # fmt: skip
    message = build_view.progress_message(b.state, b.time_left)
    assert message.endswith(" · " + time_left_text(expected.seconds, expected.low, expected.high)), message
    assert " left, " in message


def test_a_running_builds_tree_message_carries_the_time_left(tmp_path: Path, monkeypatch) -> None:
    """`trtls/buildTree` (the tree the VS Code extension renders, through the LSP's sender) carries the progress
    message's time-left words in `timeLeft` while the build runs, computed once by the server; none once it ended."""
    from trtls.lsp.build_relay import build_tree

    evs = large_events()
    t0, t1 = evs[0].t_ns, evs[-1].t_ns
    started = next(e for e in evs if e.type == "build_started")
    history = History(tmp_path / ".trtls" / "history.json")
    record = {"buildId": "large-0", "startedAt": time.time(), "durationS": (t1 - t0) / NS}
    assert history.record(started.build_config_hash, durations=tree_until(evs, t1).durations(), build=record) is None
    now = {"ns": t0 + (t1 - t0) // 2}
    monkeypatch.setattr(time, "monotonic_ns", lambda: now["ns"])
    b = Build("large-1", "large", tmp_path / "trtls.toml", {"output": str(tmp_path / "large.engine")}, 5.0, ["w"])
    b.state.t_start_ns = t0  # the replayed build started when its recording did
    assert build_tree("file:///w/trtls.toml", b.snapshot()).timeLeft is None  # starting: no phase yet
    for ev in evs:
        if ev.t_ns > now["ns"]:
            break
        b.fold(ev)
    tree = build_tree("file:///w/trtls.toml", b.snapshot())
    assert tree.timeLeft is not None and " left, " in tree.timeLeft
    assert build_view.progress_message(b.state, b.time_left).endswith(" · " + tree.timeLeft)
    b.fold(Ended("built"))
    assert build_tree("file:///w/trtls.toml", b.snapshot()).timeLeft is None
