"""A finished build's evidence, read back from `.trtls/runs/<build-id>/` for pictures (trace, report).

Everything here reads files a build already wrote — summary.json, events.jsonl, tree.json and
`.trtls/history.json` — and never runs or imports a builder. A damaged or missing file is an
`EvidenceError` with the path (the CLI prints it and exits 2), except history, which is advice: a
missing history gives an empty one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trtls.builds.roots import state_root
from trtls.builds.supervisor.history import History
from trtls.core.phase_tree import NS
from trtls.core.summary_record import SUMMARY_NAME, Summary, SummaryProblem, read_summary

QUIET_GAP_S = 0.25  # a stretch with no builder callback at least this long is drawn as a quiet gap
RECORD_LIMIT = 16 << 20  # a tree or matrix record: ~300 phases are ~1 MiB (a summary: core.summary_record's)
EVENTS_LIMIT = 256 << 20  # events.jsonl of the largest build seen is a few MiB


class EvidenceError(ValueError):
    """The build cannot be found or its evidence cannot be read; the message names the path."""


@dataclass
class Span:
    """One phase as drawn: times in seconds from the first event of the build."""

    id: str
    parent_id: str | None
    name: str
    start_s: float
    end_s: float
    status: str
    steps: int | None
    num_steps: int
    usual_s: float | None
    tid: int = 0
    detail: str | None = None  # the row's words as the build recorded them (trtls.core.display, tree.json)

    @property
    def depth(self) -> int:
        return self.id.count(".")


@dataclass
class BuildEvidence:
    run_dir: Path
    summary: Summary
    events: list[dict[str, Any]]
    t0_ns: int  # the first event's CLOCK_MONOTONIC time: 0 s in every picture
    spans: list[Span] = field(default_factory=list)
    quiet_gaps: list[tuple[float, float]] = field(default_factory=list)
    history: list[dict[str, Any]] = field(default_factory=list)  # dated builds of this config, oldest first
    peaks: list[dict[str, Any]] = field(default_factory=list)  # this config's builds' peak memory, oldest first

    @property
    def build_id(self) -> str:
        return self.run_dir.name if "buildId" not in self.summary.model_fields_set else str(self.summary.buildId)

    def seconds(self, t_ns: int | None) -> float | None:
        return None if t_ns is None else (t_ns - self.t0_ns) / NS

    def cancel_marks(self) -> dict[str, float]:
        """request / seen / return / cleanup, in seconds, for the ones the events recorded."""
        marks: dict[str, float] = {}
        for ev in self.events:
            if ev.get("type") == "cancel_acknowledged" and not ev.get("after_complete"):
                for key, t in (
                    ("request", ev.get("t_request_ns")),
                    ("seen", ev.get("t_seen_ns")),
                    ("return", ev["t_ns"]),
                ):
                    if isinstance(t, int) and t > 0:
                        marks[key] = self.seconds(t)  # type: ignore[assignment]
            elif ev.get("type") == "build_finished" and ev.get("t_cleanup_ns") and self.summary.cancelSource:
                marks["cleanup"] = self.seconds(ev["t_cleanup_ns"])  # type: ignore[assignment]
        return marks

    def end_s(self) -> float:
        return max([s.end_s for s in self.spans] + [self.seconds(e["t_ns"]) or 0.0 for e in self.events] + [0.0])


def runs_dir(recipe: Path) -> Path:
    folder = recipe if recipe.is_dir() else recipe.parent
    return folder / ".trtls" / "runs"


def find_run(target: str, recipe: Path) -> Path:
    """`latest`, a build id under the recipe's .trtls/runs, or a run folder's path. A summary that is there but is
    no regular file (a FIFO, a link to a device) is said as such; a `.trtls` swapped while it is listed is a located
    error, never a traceback."""
    direct = Path(target)
    if direct.is_dir() and _summary_kind(direct) is not None:
        return _finished_run(direct)
    runs = runs_dir(recipe)
    if target == "latest":
        done = _finished(runs)
        if not done:
            raise EvidenceError(f"{runs}: no finished build to show (build one with `trtls build`)")
        return max(done, key=lambda item: item[0])[1]
    if _summary_kind(runs / target) is not None:
        return _finished_run(runs / target)
    known = sorted(folder.name for _, folder in _finished(runs))[-5:]
    hint = f" (recent: {', '.join(known)})" if known else ""
    raise EvidenceError(f"{runs / target}: no such finished build{hint}")


def _finished(runs: Path) -> list[tuple[float, Path]]:
    """(when its summary was written, run folder) for each run whose summary.json is a regular file."""
    try:
        return [(m, p.parent) for p in runs.glob("*/summary.json") if (m := _mtime(p)) is not None]
    except OSError as exc:  # `.trtls` or `runs` swapped or removed while it was listed
        raise EvidenceError(f"{exc.filename or runs}: cannot list the builds ({exc.strerror or exc})") from None


def _summary_kind(run_dir: Path) -> int | None:
    """The file type bits of run_dir/summary.json, its own (a link is not followed); None when there is none."""
    import os

    try:
        return os.lstat(run_dir / "summary.json").st_mode
    except OSError:
        return None


def _finished_run(run_dir: Path) -> Path:
    """run_dir, when its summary.json is a regular file; otherwise say what it is instead of reading it."""
    import stat

    mode = _summary_kind(run_dir) or 0
    if stat.S_ISREG(mode):
        return run_dir
    kinds = (
        (stat.S_ISLNK, "a symlink"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISSOCK, "a socket"),
    )
    what = next((name for test, name in kinds if test(mode)), "a device")
    raise EvidenceError(f"{run_dir / 'summary.json'}: not a regular file ({what}); a build summary is never read there")


def _mtime(path: Path) -> float | None:
    """When a record was written (its own time: a link is not followed), None when it is gone or not a file."""
    import os
    import stat

    try:
        st = os.lstat(path)
    except OSError:
        return None
    return st.st_mtime if stat.S_ISREG(st.st_mode) else None


def read_json(path: Path) -> Any:
    """A record trtls wrote, read through the door: a regular file, never through a final symlink, bounded."""
    from trtls.fs import UnreadableRecord, read_json_record

    try:
        return read_json_record(path, limit=RECORD_LIMIT)
    except UnreadableRecord as exc:
        raise EvidenceError(f"{path}: {exc}") from None


def load_summary(path: Path) -> Summary:
    """A build's (or a matrix run's) evidence record, through the one loader; a damaged one is an EvidenceError."""
    summary = read_summary(path, within=state_root(path))  # a run folder linked out of its project is refused
    if isinstance(summary, SummaryProblem):
        raise EvidenceError(str(summary))
    return summary


def load_build(run_dir: Path) -> BuildEvidence:
    summary = load_summary(run_dir / SUMMARY_NAME)
    events: list[dict[str, Any]] = []
    from trtls.fs import parse_json, read_bytes

    events_name = Path(summary.events or "events.jsonl").name  # a record names a file of its own folder
    try:
        raw = read_bytes(run_dir / events_name, limit=EVENTS_LIMIT, follow=False).splitlines()
    except OSError:
        raw = []
    for line in raw:
        try:
            ev = parse_json(line)
        except ValueError:
            continue  # a line cut where a process died; the rest still draws
        if isinstance(ev, dict) and isinstance(ev.get("t_ns"), int) and isinstance(ev.get("type"), str):
            events.append(ev)
    t0 = min((e["t_ns"] for e in events), default=0)
    evidence = BuildEvidence(run_dir, summary, events, t0)
    evidence.spans = _spans(evidence)
    evidence.quiet_gaps = _quiet_gaps(evidence)
    evidence.history = _history(run_dir, summary)
    evidence.peaks = _peaks(run_dir, summary)
    return evidence


def _spans(ev: BuildEvidence) -> list[Span]:
    """Phases from the events (exact times); the summary's tree gives status and usual durations."""
    tree = {p["id"]: p for p in ev.summary.phaseTree if "id" in p}
    starts: dict[str, dict[str, Any]] = {}
    ends: dict[str, int] = {}
    last_step: dict[str, int] = {}
    for e in ev.events:
        kind = e["type"]
        if kind == "phase_start":
            starts.setdefault(e["phase_id"], e)
        elif kind == "phase_finish":
            ends.setdefault(e["phase_id"], e["t_ns"])
            if e.get("step") is not None:
                last_step[e["phase_id"]] = e["step"]
        elif kind == "step":
            last_step[e["phase_id"]] = max(last_step.get(e["phase_id"], -1), e["step"])
    end_of_build = max((e["t_ns"] for e in ev.events), default=ev.t0_ns)
    spans = []
    for pid, s in starts.items():
        node = tree.get(pid, {})
        step = last_step.get(pid)
        spans.append(
            Span(
                id=pid,
                parent_id=s.get("parent_id"),
                name=str(s.get("name", pid)),
                start_s=(s["t_ns"] - ev.t0_ns) / NS,
                end_s=(ends.get(pid, end_of_build) - ev.t0_ns) / NS,
                status=str(node.get("status", "done" if pid in ends else "failed")),
                steps=None if step is None else step + 1,
                num_steps=int(s.get("num_steps") or 1),
                usual_s=node.get("baselineS"),
                tid=int(s.get("tid") or 0),
                detail=node.get("detail") if isinstance(node.get("detail"), str) else None,
            )
        )
    return spans


def _quiet_gaps(ev: BuildEvidence) -> list[tuple[float, float]]:
    """Stretches of at least QUIET_GAP_S between builder callbacks (phase start/step/finish), while a phase ran.

    Steps are coalesced to one per phase per 50 ms, so a gap may read up to 50 ms long; never shorter."""
    times = sorted(e["t_ns"] for e in ev.events if e["type"] in ("phase_start", "step", "phase_finish"))
    gaps = []
    for a, b in zip(times, times[1:], strict=False):
        if (b - a) / NS >= QUIET_GAP_S:
            gaps.append(((a - ev.t0_ns) / NS, (b - ev.t0_ns) / NS))
    return gaps


def _history(run_dir: Path, summary: Summary) -> list[dict[str, Any]]:
    config = summary.buildConfigHash
    if not config:
        return []
    return History(run_dir.parent.parent / "history.json").builds(str(config))


def _peaks(run_dir: Path, summary: Summary) -> list[dict[str, Any]]:
    """The peak memory of this config's builds up to this one (History.peaks)."""
    config, started = summary.buildConfigHash, summary.startedAt
    if not config or not isinstance(started, int | float):
        return []
    peaks = History(run_dir.parent.parent / "history.json").peaks(str(config))
    return [p for p in peaks if isinstance(p.get("startedAt"), int | float) and p["startedAt"] <= round(started, 3)]
