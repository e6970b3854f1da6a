"""Time left in a running build, from the engine's own history: "~40 s left, 25–60 s", or "no estimate".

The basis is the history of builds of the very same network and settings (`.trtls/history.json`, keyed by
buildConfigHash: the same key the "usual 30 s" of a quiet phase comes from), never a guess:
- per phase: each phase id is a position in the tree, the same across such builds, and the history keeps its median
  duration. A phase not started yet has its median left; a running phase with children has what its children have
  left (recursively) plus its own time outside them in proportion; a running leaf has its median minus its elapsed
  time (never below zero) or, when it reports steps, the mean of that and its median times the share of steps left
  (the long silent compile of `large`, "Determining refit engines", reports 171 steps: the clock alone cannot tell
  a build that is ahead from one that is behind). The phases cover what TensorRT reports; the time after the last
  one (serializing, writing and hashing the engine) is the median whole-build duration less the phases' medians
  and less the time this build took before its first phase.
- the interval: the spread of the recorded whole-build durations around their median, applied to the point
  estimate, and never narrower than `MIN_BAND` (with two or three builds the spread says little; the band's width
  is what the accuracy measurement in docs/performance.md found).
With no successful build of this config recorded there is no basis: "no estimate". A build already past the
slowest recorded one by more than the band has none either (history no longer describes it).
"""

from __future__ import annotations

import statistics
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from trtls.core.display import time_left_text
from trtls.core.phase_tree import NS, PhaseTree

MIN_BAND = (0.75, 1.35)  # the interval's ratios to the point estimate, at the narrowest
_PAST: OrderedDict[str, list[float]] = OrderedDict()  # build id → recorded durations of its config (read once)
_PAST_KEEP = 256


@dataclass(frozen=True)
class TimeLeft:
    seconds: float | None  # the point estimate; None: no estimate
    low: float | None
    high: float | None
    builds: int  # recorded builds the estimate rests on
    basis: str  # why there is or is not an estimate, in words


def _children_of(baselines: dict[str, float]) -> dict[str | None, list[str]]:
    out: dict[str | None, list[str]] = {}
    for pid in baselines:
        parent = pid.rpartition(".")[0] or None
        out.setdefault(parent, []).append(pid)
    return out


def _left_in(
    pid: str, baselines: dict[str, float], kids: dict[str | None, list[str]], tree: PhaseTree, now_ns: int
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
        if phase.num_steps > 1 and phase.step is not None:  # steps done say how far along it is, at any pace
            return (by_clock + usual * (1 - (phase.step + 1) / phase.num_steps)) / 2
        return by_clock
    usual_children = sum(baselines[c] for c in children)
    left_children = sum(_left_in(c, baselines, kids, tree, now_ns) for c in children)
    own = max(usual - usual_children, 0.0)
    share_left = left_children / usual_children if usual_children > 0 else 0.0
    return left_children + own * share_left


def estimate_time_left(
    tree: PhaseTree, baselines: dict[str, float], durations: list[float], t_start_ns: int, now_ns: int
) -> TimeLeft:
    """The time left of a build started at `t_start_ns` (monotonic ns) whose phases are `tree`, from its config's
    median phase durations (`History.baselines`) and its recorded whole-build durations (`History.builds`)."""
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
        in_phases = sum(_left_in(r, baselines, kids, tree, now_ns) for r in roots)
        after_last_phase = max(usual_total - sum(baselines[r] for r in roots) - before_first_phase, 0.0)
        point = in_phases + after_last_phase
    ratios = [d / usual_total for d in durations] if usual_total > 0 else [1.0]
    low_ratio, high_ratio = min(min(ratios), MIN_BAND[0]), max(max(ratios), MIN_BAND[1])
    n = len(durations)
    basis = f"{n} finished build{'s' if n != 1 else ''} of this engine with these settings"
    if elapsed > max(durations) * MIN_BAND[1]:
        return TimeLeft(None, None, None, n, f"longer than every one of the {basis}")
    return TimeLeft(point, point * low_ratio, point * high_ratio, n, basis)


def past_durations(build: Any) -> list[float]:
    """The recorded whole-build durations of `build`'s config, read from its history once per build."""
    if not build.config_hash:
        return []
    if build.id not in _PAST:
        _PAST[build.id] = [float(b["durationS"]) for b in build.history().builds(build.config_hash)]
        while len(_PAST) > _PAST_KEEP:
            _PAST.popitem(last=False)
    return _PAST[build.id]


def build_time_left(build: Any, now_ns: int) -> TimeLeft:
    return estimate_time_left(build.tree, build.baselines, past_durations(build), build.t_start_ns, now_ns)


def with_time_left(build: Any, text: str, now_ns: int) -> str:
    """A running build's progress line with its time left (`… · ~40 s left, 25–60 s`, `… · no estimate`)."""
    left = build_time_left(build, now_ns)
    return f"{text} · {time_left_text(left.seconds, left.low, left.high)}"
