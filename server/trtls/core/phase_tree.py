"""The builder's nested phases, as a tree with stable ids.

TensorRT names phases in English text, reuses a name once its phase ends, changes names between
versions, and identifies the parent of a new phase only by its name. So:

- `OpenPhases` (core.open_phases, used by the progress monitor in the worker) turns the name-based callbacks into ids.
  An id is the phase's position: the dotted path of sibling indexes ("0", "0.1", "0.3.2"). It never
  depends on a name, and the same network + settings give the same ids, so history can give a
  running phase its usual duration (`baseline`).
- `PhaseTree` (used by the supervisor) folds id-based events into phases with status and times.
- `PhaseTree.view` is what every face shows of it (terminal, LSP `trtls/buildTree`, the VS Code tree, the
  evidence): the stall rule and the folding rule are applied here, once, and the faces only render the result.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from trtls.core.display import STATUS_MARK, folded_detail, folded_label, phase_detail, step_text
from trtls.core.open_phases import OpenPhases  # the worker's half
from trtls.core.vocabulary import PhaseStatus

NS = 1_000_000_000

# The stall rule. The builder's silence (time since its last callback) is a property of the build, shown on
# the phases that are waiting on it.
QUIET_SHOW_S = 2.0  # shorter silences are normal between two TensorRT callbacks: not shown
STALL_WITHOUT_BASELINE_S = 30.0  # with no history for the phase, this much silence is a stall
# The folding rule: TensorRT starts dozens of "Computing reformatting costs" phases under one parent, each a
# few milliseconds long, and with several optimization profiles it repeats whole subtrees ("Timing tactics" and
# its reformats, once per profile). Finished siblings of one name, this many or more, each finished with all of
# its subtree, are shown as one row (their subtrees with it: the row stands for all of them).
FOLD_AT = 3


def is_stalled(quiet_s: float | None, baseline_s: float | None) -> bool:
    """A running phase is stalled when the builder has been silent longer than the phase usually takes in all
    (or STALL_WITHOUT_BASELINE_S without history) — the moment to wonder whether to press Stop."""
    if quiet_s is None or quiet_s < QUIET_SHOW_S:
        return False
    return quiet_s > max(baseline_s, QUIET_SHOW_S) if baseline_s is not None else quiet_s >= STALL_WITHOUT_BASELINE_S


def finished_subtrees(phases: dict[str, Phase]) -> set[str]:
    """Ids of the phases done with all of their subtree, in one pass: `phases` is in start order, so reversed, a
    phase's children come before it."""
    done: set[str] = set()
    for p in reversed(phases.values()):
        if p.status == "done" and all(c in done for c in p.children):
            done.add(p.id)
    return done


def fold_groups(siblings: list[Phase], finished: set[str]) -> dict[str, str]:
    """Phase id → the id of the first phase of its folded group, for the siblings that fold (FOLD_AT); `finished`:
    finished_subtrees of the tree."""
    by_name: dict[str, list[str]] = {}
    for p in siblings:
        if p.id in finished:
            by_name.setdefault(p.name, []).append(p.id)
    return {pid: ids[0] for ids in by_name.values() if len(ids) >= FOLD_AT for pid in ids}


@dataclass
class Phase:
    id: str
    parent_id: str | None
    name: str
    num_steps: int
    t_start_ns: int
    step: int | None = None  # last completed step index
    status: PhaseStatus = "running"
    t_finish_ns: int | None = None
    t_last_ns: int = 0  # last callback that touched this phase
    children: list[str] = field(default_factory=list)

    def elapsed_s(self, now_ns: int) -> float:
        return ((self.t_finish_ns or now_ns) - self.t_start_ns) / NS

    def fraction(self) -> float:
        return (
            1.0
            if self.status == "done"
            else min(((self.step + 1) if self.step is not None else 0) / self.num_steps, 1.0)
        )


@dataclass(frozen=True)
class PhaseView:
    """One phase as every face shows it; `to_json` is its `trtls/buildTree` (and evidence) form."""

    id: str
    parent_id: str | None
    name: str
    num_steps: int
    step: int | None
    status: PhaseStatus
    elapsed_s: float
    start_s: float  # seconds after the build's start
    baseline_s: float | None  # the usual duration from earlier builds of the same config
    quiet_for_s: float | None  # the builder's silence, on running phases (measured, always sent)
    quiet_s: float | None  # the same silence when it is worth showing (≥ QUIET_SHOW_S), else None
    stalled: bool  # is_stalled: silent longer than the phase usually takes
    folded_into: str | None  # id of the first phase of the folded row this phase is shown in (FOLD_AT)
    # the words every face shows (trtls.core.display), sent as data so no face formats them again
    steps_text: str | None = None  # `2/3`; None on a finished phase
    detail: str = ""  # `2/3 · 4.1 s · quiet 42 s · usual 30 s · stalled`
    group_label: str | None = None  # on the first phase of a folded row: `Computing reformatting costs ×26`
    group_detail: str | None = None  # and its `0.4 s in all`

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "parentId": self.parent_id,
            "name": self.name,
            "numSteps": self.num_steps,
            "step": self.step,
            "status": self.status,
            "elapsedS": self.elapsed_s,
            "startS": self.start_s,
            "baselineS": self.baseline_s,
            "quietForS": self.quiet_for_s,
            "quietS": self.quiet_s,
            "stalled": self.stalled,
            "foldedInto": self.folded_into,
            "stepsText": self.steps_text,
            "detail": self.detail,
            "groupLabel": self.group_label,
            "groupDetail": self.group_detail,
        }


class PhaseTree:
    def __init__(self) -> None:
        self.phases: dict[str, Phase] = {}
        self.roots: list[str] = []
        self.t_last_callback_ns: int | None = None
        self.rejected = 0  # phase_start events that would have broken the tree

    # -- folding events ------------------------------------------------------------------------
    def start(self, phase_id: str, parent_id: str | None, name: str, num_steps: int, t_ns: int) -> Phase | None:
        """Add a phase. A worker that repeats an id or names an unknown parent is ignored for that event:
        the tree must stay a tree (a cycle would hang every walk over it)."""
        self.t_last_callback_ns = t_ns
        if phase_id in self.phases or (parent_id is not None and parent_id not in self.phases):
            self.rejected += 1
            return None
        phase = Phase(phase_id, parent_id, name, max(num_steps, 1), t_ns, t_last_ns=t_ns)
        self.phases[phase_id] = phase
        (self.phases[parent_id].children if parent_id is not None else self.roots).append(phase_id)
        return phase

    def step(self, phase_id: str, step: int, t_ns: int) -> None:
        phase = self.phases.get(phase_id)
        if phase is not None:
            phase.step = step if phase.step is None else max(phase.step, step)
            phase.t_last_ns = t_ns
        self.t_last_callback_ns = t_ns

    def finish(self, phase_id: str, t_ns: int, status: PhaseStatus = "done") -> None:
        """A phase may finish before its last step (TensorRT does that); `done` is still done."""
        phase = self.phases.get(phase_id)
        if phase is not None and phase.status == "running":
            phase.status = status
            phase.t_finish_ns = t_ns
            phase.t_last_ns = t_ns
        self.t_last_callback_ns = t_ns

    def close_open(self, status: PhaseStatus, t_ns: int) -> None:
        """A worker that died never sent phase_finish: close what was open, innermost first."""
        for phase in sorted(self.running(), key=lambda p: -p.id.count(".")):
            self.finish(phase.id, t_ns, status)

    def apply(self, ev: Any) -> None:
        """Fold a `core.events` phase event (phase_start, step, phase_finish); ignores the rest."""
        kind = ev.type
        if kind == "phase_start":
            self.start(ev.phase_id, ev.parent_id, ev.name, ev.num_steps, ev.t_ns)
        elif kind == "step":
            self.step(ev.phase_id, ev.step, ev.t_ns)
        elif kind == "phase_finish":
            if ev.step is not None:
                self.step(ev.phase_id, ev.step, ev.t_ns)
            self.finish(ev.phase_id, ev.t_ns, ev.status)

    # -- reading -------------------------------------------------------------------------------
    def running(self) -> list[Phase]:
        return [p for p in self.phases.values() if p.status == "running"]

    def deepest_running_path(self) -> list[Phase]:
        """Root → deepest running phase, following the most recently started running child."""
        path: list[Phase] = []
        level = self.roots
        while True:
            running = [self.phases[i] for i in level if self.phases[i].status == "running"]
            if not running:
                return path
            path.append(running[-1])
            level = running[-1].children

    def fraction_done(self) -> float:
        """Progress of the top-level phase: its finished steps plus the share of its running child,
        recursively (so a long child with many steps moves the bar). Not monotonic by itself (a phase's
        step count is only known once it starts); consumers keep the maximum."""
        if not self.roots:
            return 0.0
        root = self.phases[self.roots[-1]]
        if root.status != "running":
            return 1.0 if root.status == "done" else root.fraction()
        return min(self._progress(root), 0.999)

    def _progress(self, phase: Phase) -> float:
        done = (phase.step + 1) if phase.step is not None else 0
        running = [self.phases[c] for c in phase.children if self.phases[c].status == "running"]
        partial = self._progress(running[-1]) if running else 0.0
        return min((done + partial) / phase.num_steps, 1.0)

    def quiet_for_s(self, now_ns: int) -> float | None:
        return None if self.t_last_callback_ns is None else (now_ns - self.t_last_callback_ns) / NS

    def durations(self) -> dict[str, float]:
        """Seconds per finished-as-done phase id: the history a later build compares against."""
        return {
            p.id: (p.t_finish_ns - p.t_start_ns) / NS
            for p in self.phases.values()
            if p.status == "done" and p.t_finish_ns
        }

    def view(self, now_ns: int, baselines: dict[str, float] | None = None, t0_ns: int | None = None) -> list[PhaseView]:
        """Every phase in start order, with the stall and folding rules applied. `start_s` is the phase's start in
        seconds after `t0_ns` (the build's start; by default the first phase's), so a timeline can be drawn from
        tree.json alone."""
        baselines = baselines or {}
        quiet = self.quiet_for_s(now_ns)
        if t0_ns is None:
            t0_ns = self._first_start_ns()
        finished = finished_subtrees(self.phases)
        folded: dict[str, str] = fold_groups([self.phases[i] for i in self.roots], finished)
        for p in self.phases.values():
            folded.update(fold_groups([self.phases[c] for c in p.children], finished))
        views = [self._view_of(p, now_ns, quiet, baselines, t0_ns, folded) for p in self.phases.values()]
        return with_group_words(views) if folded else views

    def _first_start_ns(self) -> int:
        # The first phase to start is a root (a phase's parent starts before it), so the roots are enough.
        return min((self.phases[i].t_start_ns for i in self.roots), default=0)

    @staticmethod
    def _view_of(
        p: Phase, now_ns: int, quiet: float | None, baselines: dict[str, float], t0_ns: int, folded: dict[str, str]
    ) -> PhaseView:
        quiet_for = round(quiet, 3) if p.status == "running" and quiet is not None else None
        baseline = baselines.get(p.id)
        shown = quiet_for if quiet_for is not None and quiet_for >= QUIET_SHOW_S else None
        elapsed = round(p.elapsed_s(now_ns), 3)
        stalled = is_stalled(shown, baseline)
        return PhaseView(
            id=p.id,
            parent_id=p.parent_id,
            name=p.name,
            num_steps=p.num_steps,
            step=p.step,
            status=p.status,
            elapsed_s=elapsed,
            start_s=round((p.t_start_ns - t0_ns) / NS, 4),
            baseline_s=baseline,
            quiet_for_s=quiet_for,
            quiet_s=shown,
            stalled=stalled,
            folded_into=folded.get(p.id),
            steps_text=step_text(p.status, p.step, p.num_steps),
            detail=phase_detail(p.status, p.step, p.num_steps, elapsed, shown, baseline, stalled),
        )

    def deepest_running_view(self, now_ns: int, baselines: dict[str, float] | None = None) -> PhaseView | None:
        """The phase the build is waiting on (the end of `deepest_running_path`), as `view` shows it — computed for
        that phase alone: a live status line asks for it several times a second per build, and `large` has ~300
        phases (a whole `view` for each of 32 farm cells held the language server's event loop)."""
        path = self.deepest_running_path()
        if not path:
            return None
        p = path[-1]
        siblings = self.phases[p.parent_id].children if p.parent_id is not None else self.roots
        folded = fold_groups([self.phases[i] for i in siblings], finished_subtrees(self.phases))
        return self._view_of(p, now_ns, self.quiet_for_s(now_ns), baselines or {}, self._first_start_ns(), folded)

    def snapshot(
        self, now_ns: int, baselines: dict[str, float] | None = None, t0_ns: int | None = None
    ) -> list[dict[str, Any]]:
        """`view` as JSON: the `phases` of `trtls/buildTree` and the evidence's `phaseTree` (tree.json)."""
        return [v.to_json() for v in self.view(now_ns, baselines, t0_ns)]

    def render_lines(self, now_ns: int, baselines: dict[str, float] | None = None) -> list[str]:
        """Plain-text tree (CLI without a TTY, logs, tests): each row as the live tree shows it, folded rows folded."""
        views = self.view(now_ns, baselines)
        lines: list[str] = []

        def walk(parent_id: str | None, depth: int) -> None:
            for row in rows_of(views, parent_id):
                lines.append("  " * depth + row_text(row))
                if isinstance(row, PhaseView):
                    walk(row.id, depth + 1)

        walk(None, 0)
        return lines


def with_group_words(views: list[PhaseView]) -> list[PhaseView]:
    """The first phase of each folded row carries the row's label and detail (the row is shown where it is)."""
    groups: dict[str, list[PhaseView]] = {}
    for v in views:
        if v.folded_into is not None:
            groups.setdefault(v.folded_into, []).append(v)
    out = []
    for v in views:
        g = groups.get(v.id) if v.folded_into == v.id else None
        if g:
            v = replace(
                v, group_label=folded_label(v.name, len(g)), group_detail=folded_detail(sum(x.elapsed_s for x in g))
            )
        out.append(v)
    return out


def rows_of(views: list[PhaseView], parent_id: str | None) -> list[PhaseView | list[PhaseView]]:
    """The children of one phase in start order: a phase, or the group of phases folded into one row."""
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


def row_text(row: PhaseView | list[PhaseView]) -> str:
    """One row of a text tree: `✓ Timing 4.1 s · usual 3.9 s`, `✓ Computing reformatting costs ×26 0.4 s in all`."""
    if isinstance(row, list):
        first = row[0]
        label = first.group_label or folded_label(first.name, len(row))
        detail = first.group_detail or folded_detail(sum(x.elapsed_s for x in row))
        return f"{STATUS_MARK['done']} {label} {detail}"
    return f"{STATUS_MARK[row.status]} {row.name} {row.detail}"


def tree_from_callbacks(records: list[dict[str, Any]]) -> PhaseTree:
    """Rebuild a tree from raw monitor callbacks (`phase_start`/`step_complete`/`phase_finish` with names),
    the format of the recorded fixture traces; this is the same path the worker's monitor takes."""
    names = OpenPhases()
    tree = PhaseTree()
    cancelled = False
    for r in records:
        ev, t = r.get("ev"), r.get("t_ns", 0)
        if ev == "phase_start":
            pid, parent = names.start(r["phase"], r.get("parent"))
            tree.start(pid, parent, r["phase"], r["num_steps"], t)
        elif ev == "step_complete":
            open_id = names.id_of(r["phase"])
            if open_id is not None:
                tree.step(open_id, r["step"], t)
            cancelled = cancelled or r.get("ret") is False
        elif ev == "phase_finish":
            finished_id = names.finish(r["phase"])
            if finished_id is not None:
                tree.finish(finished_id, t, "cancelled" if cancelled else "done")
    return tree
