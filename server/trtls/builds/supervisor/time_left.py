"""Time left in a running build, from the engine's own history: "~40 s left, 25–60 s", or "no estimate".

The basis is the history of builds of the very same network and settings (`.trtls/history.json`, keyed by
buildConfigHash: the same key the "usual 30 s" of a quiet phase comes from), never a guess:
- per phase: each phase id is a position in the tree, the same across such builds, and the history keeps its median
  duration. A phase not started yet has its median left; a running phase with children has what its children have
  left (recursively) plus its own time outside them in proportion; a running leaf has its median minus its elapsed
  time (never below zero) or, when it reports steps, the mean of that and its median times the share of steps left
  (in the recorded `large` build of tests/data, its silent compile "Determining refit engines" reports 171 steps:
  the clock alone cannot tell a build that is ahead from one that is behind). The phases cover what TensorRT
  reports; the time after the last one (serializing, writing and hashing the engine) is the median whole-build
  duration less the phases' medians and less the time this build took before its first phase.
- the interval: the spread of the recorded whole-build durations around their median (in seconds: what varies
  between builds of one config is mostly a fixed cost), and never narrower than `MIN_BAND` around the point (with
  two or three builds the spread says little). How often it held the truth is measured in docs/performance.md.
With no successful build of this config recorded, the estimate comes from similar builds of the project's other
engines, with a wider interval and said so ("~40 s left, 25–90 s, from 3 similar builds": supervisor/similar_builds.py);
with none similar either there is no basis: "no estimate". A build already past the slowest recorded one by more
than the band has none either (history no longer describes it).
"""

from __future__ import annotations

import statistics
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from trtls.builds.supervisor.similar_builds import estimate_from_similar, model_facts, similar
from trtls.core.display import time_left_text
from trtls.core.phase_tree import NS, PhaseTree

MIN_BAND = (0.75, 1.35)  # the interval's ratios to the point estimate, at the narrowest
PACE_LIMITS = (0.5, 2.0)  # with `pace`: a build runs at most twice as fast or as slow as its history
# (recipe, build id) → recorded durations of its config, and the similar configs' scaled durations (read once)
_PAST: OrderedDict[tuple[str, str], tuple[list[float], list[tuple[float, int]]]] = OrderedDict()
_PAST_KEEP = 256


@dataclass(frozen=True)
class TimeLeft:
    seconds: float | None  # the point estimate; None: no estimate
    low: float | None
    high: float | None
    builds: int  # recorded builds the estimate rests on
    basis: str  # why there is or is not an estimate, in words
    similar: bool = False  # from similar builds of other engines, not from this engine's own history


def _children_of(baselines: dict[str, float]) -> dict[str | None, list[str]]:
    out: dict[str | None, list[str]] = {}
    for pid in baselines:
        parent = pid.rpartition(".")[0] or None
        out.setdefault(parent, []).append(pid)
    return out


def _left_in(
    pid: str, baselines: dict[str, float], kids: dict[str | None, list[str]], tree: PhaseTree, now_ns: int, steps: bool
) -> float:
    usual = baselines[pid]
    phase = tree.phases.get(pid)
    if phase is None:
        return usual  # not started yet
    if phase.status != "running":
        return 0.0
    children = [c for c in kids.get(pid, []) if c in baselines]
    if not children:
        by_clock = max(usual - (now_ns - phase.t_start_ns) / NS, 0.0)
        if steps and phase.num_steps > 1 and phase.step is not None:  # steps done say how far along it is, at any pace
            return (by_clock + usual * (1 - (phase.step + 1) / phase.num_steps)) / 2
        return by_clock
    usual_children = sum(baselines[c] for c in children)
    left_children = sum(_left_in(c, baselines, kids, tree, now_ns, steps) for c in children)
    own = max(usual - usual_children, 0.0)
    share_left = left_children / usual_children if usual_children > 0 else 0.0
    return left_children + own * share_left


def _pace(tree: PhaseTree, baselines: dict[str, float]) -> float:
    """How this build runs against its history so far: the finished phases' durations over their medians (the
    outermost finished phases only, so no time counts twice), within PACE_LIMITS; 1 before any phase finished."""
    took = usual = 0.0
    for p in tree.phases.values():
        parent = tree.phases.get(p.parent_id) if p.parent_id is not None else None
        if p.status == "done" and p.t_finish_ns and p.id in baselines and (parent is None or parent.status != "done"):
            took += (p.t_finish_ns - p.t_start_ns) / NS
            usual += baselines[p.id]
    if usual <= 0:
        return 1.0
    return min(max(took / usual, PACE_LIMITS[0]), PACE_LIMITS[1])


def estimate_time_left(
    tree: PhaseTree,
    baselines: dict[str, float],
    durations: list[float],
    t_start_ns: int,
    now_ns: int,
    *,
    steps: bool = True,
    pace: bool = False,
) -> TimeLeft:
    """The time left of a build started at `t_start_ns` (monotonic ns) whose phases are `tree`, from its config's
    median phase durations (`History.baselines`) and its recorded whole-build durations (`History.builds`).
    `steps=False` ignores a running leaf's steps; `pace=True` scales the phases left by this build's pace so far
    (off: on the loaded 2-core host an early pace did not predict the rest, benchmarks/bench_time_left.py)."""
    if not durations or not baselines:
        return TimeLeft(None, None, None, 0, "no finished build of this engine with these settings")
    usual_total = statistics.median(durations)
    elapsed = (now_ns - t_start_ns) / NS
    kids = _children_of(baselines)
    roots = kids.get(None, [])
    if not tree.roots or usual_total <= 0:
        point = max(usual_total - elapsed, 0.0)
    else:
        before_first_phase = (min(tree.phases[r].t_start_ns for r in tree.roots) - t_start_ns) / NS
        in_phases = sum(_left_in(r, baselines, kids, tree, now_ns, steps) for r in roots)
        after_last_phase = max(usual_total - sum(baselines[r] for r in roots) - before_first_phase, 0.0)
        point = in_phases * (_pace(tree, baselines) if pace else 1.0) + after_last_phase
    n = len(durations)
    basis = f"{n} finished build{'s' if n != 1 else ''} of this engine with these settings"
    if elapsed > max(durations) * MIN_BAND[1]:
        return TimeLeft(None, None, None, n, f"longer than every one of the {basis}")
    # the recorded builds' spread as seconds, not as a ratio: what varies between builds of one config is mostly a
    # fixed cost (worker start, the write), so a ratio of a remaining 0.3 s could not cover a 0.8 s difference
    low = max(min(point * MIN_BAND[0], point + min(durations) - usual_total), 0.0)
    high = max(point * MIN_BAND[1], point + max(durations) - usual_total)
    return TimeLeft(point, low, high, n, basis)


def past_durations(build: Any) -> list[float]:
    """The recorded whole-build durations of `build`'s config, read from its history once per build."""
    return _past(build)[0]


def _past(build: Any) -> tuple[list[float], list[tuple[float, int]]]:
    if not build.config_hash:
        return [], []
    key = (str(build.recipe_path), build.id)  # an id is unique within one recipe's runs, not across recipes
    if key not in _PAST:
        history = build.history()
        own = [float(b["durationS"]) for b in history.builds(build.config_hash)]
        facts = model_facts(build) if not own else None
        _PAST[key] = own, similar(facts, history.others(build.config_hash)) if facts else []
        while len(_PAST) > _PAST_KEEP:
            _PAST.popitem(last=False)
    return _PAST[key]


def build_time_left(build: Any, now_ns: int) -> TimeLeft:
    """From the engine's own history; with none, from similar builds of the project (supervisor/similar_builds.py)."""
    own, scaled = _past(build)
    if own or not scaled:
        return estimate_time_left(build.tree, build.baselines, own, build.t_start_ns, now_ns)
    elapsed = (now_ns - build.t_start_ns) / NS
    found = estimate_from_similar(scaled, elapsed)
    if found is None:
        return TimeLeft(None, None, None, 0, "longer than every similar build would take")
    point, low, high, n = found
    return TimeLeft(point, low, high, n, f"{n} similar build{'s' if n != 1 else ''} of other engines", similar=True)


def with_time_left(build: Any, text: str, now_ns: int) -> str:
    """A running build's progress line with its time left (`… · ~40 s left, 25–60 s`, `… · no estimate`)."""
    left = build_time_left(build, now_ns)
    return f"{text} · {time_left_words(left)}"


def time_left_now(build: Any, now_ns: int) -> str | None:
    """The tree row's time left (`trtls/buildTree`'s `timeLeft`): the progress message's words while the build runs
    its phases, None before (starting, waiting for a node) and after."""
    if not build.running or not build.tree.roots:
        return None
    return time_left_words(build_time_left(build, now_ns))


def time_left_words(left: TimeLeft) -> str:
    """The words every face shows (core.display.time_left_text)."""
    return time_left_text(left.seconds, left.low, left.high, left.builds if left.similar else 0)
