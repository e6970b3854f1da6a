"""One registry of the runs a long-lived process (the language server) started: builds, matrix/farm runs, gates
runs, and whatever else has an id, a live state and evidence on disk.

Every id-taking command looks a run up here, whatever its kind (no `builds.get(id) or matrices.get(id)` in
handlers). Retention is bounded: a run is kept while it runs and among the last `keep_finished` finished ones;
an older finished run is forgotten (its evidence stays in `.trtls/runs/<id>/`), and `on_evict` lets the owner of
another index (the supervisor's builds) forget it too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, overload

from trtls.core.display import build_description, human_seconds
from trtls.core.outcome import build_outcome_kind

if TYPE_CHECKING:  # a registry is made before any build is (trtls build imports this, and no build core, first)
    from typing import TypeAlias

    from trtls.builds.supervisor.build import Build
    from trtls.core.gates_run_record import GatesRunRecord
    from trtls.core.summary_record import Summary
    from trtls.core.triage_records import DivergenceResult, ReductionResult

    # a run's evidence record, typed: a build's or a matrix's summary.json (`kind: matrix`), a gates run's verdict, a
    # reduction's result.json, a divergence search's divergence.json. A face reads its fields; trtls.showEvidence
    # sends its `record()` (lsp.run_kinds.evidence, the one place the JSON is made from it)
    RunRecord: TypeAlias = Summary | GatesRunRecord | ReductionResult | DivergenceResult

RunKind = Literal["build", "matrix", "gates", "reduction", "divergence"]  # lsp/run_kinds.py: what each one answers
OtherKind = Literal["matrix", "gates", "reduction", "divergence"]  # every kind but a build's
KEEP_FINISHED = 100


class Run(Protocol):
    """What every kind of run answers (Build, RestoredRun, MatrixBuild, GatesRun, ReductionRun and DivergenceRun
    all do). `record` is its evidence record as its model (`RunRecord`), None until it has finished and recorded."""

    @property
    def id(self) -> str: ...
    @property
    def running(self) -> bool: ...
    @property
    def status(self) -> str: ...
    @property
    def record(self) -> RunRecord | None: ...
    @property
    def evidence_dir(self) -> Path: ...
    def cancel(self, source: str) -> bool: ...


class BuildRun(Run, Protocol):
    """A run of kind "build": a Build (a cell, a trial) or a RestoredRun (a reuse, a rollback)."""

    @property
    def engine(self) -> str: ...
    @property
    def cell(self) -> str | None: ...
    @property
    def parent_id(self) -> str | None: ...
    @property
    def outcome(self) -> str | None: ...


class _NoCancel:
    """A finished run's cancel token: nobody asked it to stop."""

    source: str | None = None
    is_set = False


class RestoredRun:
    """A build that started no worker: an engine restored from the engine store (`reused`, builds/avoidance/lookup.py)
    or
    rolled back to a known-good one (`rolled_back`, builds/avoidance/rollback.py). Finished when it is registered;
    answers what
    a Build answers (listBuilds' row, showEvidence, buildReport, the `trtls/buildTree` payload) from its evidence."""

    def __init__(
        self, summary: Summary, recipe_path: Path, cell: str | None = None, parent_id: str | None = None
    ) -> None:
        self.record = summary  # what every kind of run answers (Run.record)
        self.id = str(summary.buildId)
        self.engine = str(summary.engine or "?")
        self.recipe_path = recipe_path
        self.outcome = str(summary.outcome or "reused")
        self.status = self.outcome
        self.cell = cell
        self.parent_id = parent_id
        self.token = _NoCancel()
        self.running = False

    @property
    def evidence_dir(self) -> Path:
        return self.recipe_path.parent / ".trtls" / "runs" / self.id

    def cancel(self, source: str) -> bool:
        return False  # it has ended

    def elapsed_s(self, now_ns: int | None = None) -> float:
        return float(self.record.durationS or 0.0)

    def outcome_message(self) -> str:
        return str(self.record.message or self.outcome)

    def snapshot(self) -> dict[str, Any]:
        """The `trtls/buildTree` payload (core.wire.BuildTree; the LSP layer adds the document uri): one finished
        row with no phases."""
        elapsed = self.elapsed_s()
        evidence = self.evidence_dir / "summary.json"
        return {
            "buildId": self.id,
            "engine": self.engine,
            "status": self.status,
            "cancelSource": None,
            "outcome": self.outcome,
            "outcomeKind": build_outcome_kind(self.outcome),
            "outcomeMessage": self.outcome_message(),
            "elapsedS": round(elapsed, 3),
            "evidencePath": str(evidence) if evidence.is_file() else None,
            "phases": [],
            "cell": self.cell,
            "parentId": self.parent_id,
            "node": None,
            "running": False,
            "description": build_description(False, self.status, self.outcome, None, elapsed),
            "where": "local",
            "elapsedText": human_seconds(elapsed),
        }


@dataclass
class Entry:
    run: Run
    kind: RunKind
    uri: str


class RunRegistry:
    def __init__(self, keep_finished: int = KEEP_FINISHED, on_evict: Callable[[str], object] | None = None) -> None:
        self.keep_finished = max(0, keep_finished)
        self.on_evict = on_evict
        self._entries: dict[str, Entry] = {}  # insertion order = start order

    @overload
    def add(self, run: BuildRun, kind: Literal["build"], uri: str) -> None: ...
    @overload
    def add(self, run: Run, kind: OtherKind, uri: str) -> None: ...
    def add(self, run: Run, kind: RunKind, uri: str) -> None:
        """Register a run (again: a no-op). Evicts the oldest finished runs beyond the limit."""
        if run.id not in self._entries:
            self._entries[run.id] = Entry(run, kind, uri)
        self.evict()

    def get(self, run_id: str, kind: RunKind | None = None) -> Run | None:
        """The run with this id (of this kind, if given), or None: unknown, or finished and forgotten."""
        entry = self._entries.get(run_id)
        return entry.run if entry is not None and (kind is None or entry.kind == kind) else None

    def uri(self, run_id: str) -> str | None:
        entry = self._entries.get(run_id)
        return entry.uri if entry is not None else None

    def kind(self, run_id: str) -> RunKind | None:
        entry = self._entries.get(run_id)
        return entry.kind if entry is not None else None

    def entries(self, kind: RunKind | None = None) -> Iterator[Entry]:
        return (e for e in list(self._entries.values()) if kind is None or e.kind == kind)

    def running(self, kind: RunKind | None = None) -> list[Run]:
        return [e.run for e in self.entries(kind) if e.run.running]

    def running_builds(self) -> list[Build]:
        """The builds running now (a restored run is finished when it is registered: never one of them)."""
        from trtls.builds.supervisor.build import Build  # a build is running: the build core is loaded

        return [r for e in self.entries("build") if isinstance(r := e.run, Build) and r.running]

    def evict(self) -> list[str]:
        """Forget the oldest finished runs beyond `keep_finished` (running ones are never evicted)."""
        finished = [rid for rid, e in self._entries.items() if not e.run.running]
        gone = finished[: max(0, len(finished) - self.keep_finished)]
        for rid in gone:
            del self._entries[rid]
            if self.on_evict is not None:
                self.on_evict(rid)
        return gone

    def __len__(self) -> int:
        return len(self._entries)
