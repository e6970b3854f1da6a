"""A matrix build: one parent over many cell builds (`trtls build --matrix`, `--all`; the editor's Build Matrix).

Each cell is an ordinary `Build` (its own worker, phase tree, cancel token, escalation and evidence). The parent
only fans out: Stop on the parent stops every cell, Stop on a cell stops that cell; its outcome is the cells'
outcomes folded (built only when every cell built — or was reused: a farm cell whose node found its key in the
remote store ends `reused`, its summary folded into a reuse's here) and its evidence lists the cells with where they
ran.

Where cells run: on a `[cluster]` every cell is submitted at once and the cluster queues what does not fit
("waiting for a node"); without one, cells run here one after another (two local builds side by side would
spoil each other's timing and double the memory), and a stopped parent never starts the cells still waiting.
"""

from __future__ import annotations

import asyncio
import copy
import json
import re
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trtls.builds.roots import evidence_error, write_record
from trtls.builds.supervisor.build import await_summary
from trtls.builds.supervisor.supervisor import Build, Supervisor
from trtls.core.build_state import Recorded
from trtls.core.display import cells_text, human_seconds, matrix_description
from trtls.core.farm import Cell, expand
from trtls.core.outcome import build_outcome_kind
from trtls.core.recipe import LoadedRecipe
from trtls.core.summary_record import Summary

OUTCOME_ORDER = ("killed", "forced", "failed", "cancelled")  # the parent shows the worst outcome of its cells


@dataclass
class PlannedCell:
    engine: str
    cell: Cell | None  # None: the engine's own table (no matrix)
    overrides: dict[str, Any]

    @property
    def key(self) -> str:
        return self.cell.key if self.cell else self.engine


def plan(loaded: LoadedRecipe, engines: list[str], matrix: bool, overrides: dict[str, Any]) -> list[PlannedCell]:
    """The builds a run makes: each engine once, or each cell of its matrix when `matrix` is set."""
    out: list[PlannedCell] = []
    for name in engines:
        eng = loaded.engine(name)
        if matrix and eng.matrix is not None:
            for cell in expand(name, eng.matrix, eng.run_on):
                merged = dict(cell.overrides)
                merged.update({k: v for k, v in overrides.items() if k != "settings"})
                merged["settings"] = {**cell.overrides.get("settings", {}), **overrides.get("settings", {})}
                out.append(PlannedCell(name, cell, merged))
        else:
            out.append(PlannedCell(name, None, overrides))
    return out


@dataclass
class MatrixBuild:
    id: str
    title: str
    recipe_path: Path
    planned: list[PlannedCell]
    cells: list[Build] = field(default_factory=list)
    not_started: list[PlannedCell] = field(default_factory=list)
    cancel_source: str | None = None
    record: Summary | None = None  # the evidence record (summary.json, `kind: matrix`) once every cell is over
    t_start_ns: int = field(default_factory=time.monotonic_ns)
    started_at: float = field(default_factory=time.time)
    listeners: list[Callable[[MatrixBuild, Build | None, Any], object]] = field(default_factory=list)
    _done: asyncio.Future[Summary] | None = None

    @property
    def running(self) -> bool:
        return self.record is None

    @property
    def summary(self) -> dict[str, Any] | None:
        """The evidence record as JSON data, as written (what `trtls build --json` prints; `wait()` answers its
        model, `record`)."""
        return self.record.record() if self.record is not None else None

    @property
    def evidence_dir(self) -> Path:
        return self.recipe_path.parent / ".trtls" / "runs" / self.id

    @property
    def outcome(self) -> str | None:
        return self.record.outcome if self.record is not None else None

    @property
    def status(self) -> str:
        if self.record is not None:
            return str(self.record.outcome)
        return "stopping" if self.cancel_source else "running"

    @property
    def cells_done(self) -> int:
        """The finished-cell count every face shows (`cells_text`): cells that ended any way (built, cancelled,
        failed …); a cell never started is not done."""
        return sum(1 for b in self.cells if not b.running)

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        """Live on `loop`: `wait()` resolves there when the last cell is over."""
        self._done = loop.create_future()

    def cell(self, build_id: str) -> Build | None:
        return next((b for b in self.cells if b.id == build_id), None)

    def cancel(self, source: str) -> bool:
        """Stop every cell (and never start the ones still waiting here)."""
        if self.record is not None:
            return False
        self.cancel_source = self.cancel_source or source
        hit = [b.cancel(source) for b in self.cells]
        return any(hit) or bool(self.not_started)

    def force(self) -> None:
        for b in self.cells:
            if b.running:
                b.force()

    async def wait(self) -> Summary:
        """The matrix's evidence record once every cell is over, as its model (`kind: matrix`; `.record()` is the JSON
        written). Cancelling the awaiting task stops every cell (event_loop)."""
        assert self._done is not None
        return await await_summary(self._done, self.cancel)

    def snapshot(self, with_cells: bool = True) -> dict[str, Any]:
        """The parent row of the tree: its cells (each a build snapshot, phase tree included) under it; `with_cells`
        False leaves them out (a live view sends each cell on its own: 32 `large` trees are ~2 MB to build)."""
        done = self.cells_done
        record = self.record
        elapsed = (time.monotonic_ns() - self.t_start_ns) / 1e9 if record is None else float(record.durationS or 0)
        message = self.outcome_message() if record is not None else None
        row: dict[str, Any] = {
            "buildId": self.id,
            "engine": self.title,
            "kind": "matrix",
            "status": self.status,
            "outcome": self.outcome,
            "outcomeKind": build_outcome_kind(self.outcome),
            "cancelSource": self.cancel_source,
            "elapsedS": round((time.monotonic_ns() - self.t_start_ns) / 1e9, 3) if record is None else record.durationS,
            "progress": {"done": done, "total": len(self.planned)},
            "outcomeMessage": message,
            "evidencePath": str(self.evidence_dir / "summary.json") if record is not None else None,
            # the words (trtls.core.display): every face shows these, none counts the cells again
            "running": self.running,
            "cellsText": cells_text(done, len(self.planned)),
            "description": matrix_description(
                self.running, self.cancel_source, done, len(self.planned), message, elapsed
            ),
            "elapsedText": human_seconds(elapsed),
        }
        if with_cells:
            row["cells"] = [b.snapshot() for b in self.cells] + [
                {"cell": p.key, "status": "not started", "buildId": None} for p in self.not_started
            ]
        return row

    def outcome_message(self) -> str:
        counts: dict[str, int] = {}
        for c in self.record.cells if self.record is not None else []:
            counts[str(c.outcome)] = counts.get(str(c.outcome), 0) + 1
        return ", ".join(f"{n} {k}" for k, n in counts.items()) or "no cell ran"

    def _finish(self) -> None:
        cells = []
        for b in self.cells:
            s = b.state.summary
            engine = (s.engineArtifact if s is not None else None) or {}
            cells.append(
                {
                    "cell": b.cell or b.engine,
                    "engine": b.engine,
                    "buildId": b.id,
                    "outcome": b.outcome,
                    "output": str(b.output),
                    "engineSha256": engine.get("sha256"),
                    "node": s.node if s is not None else None,
                    "evidence": str(b.evidence_dir / "summary.json"),
                }
            )
        cells += [
            {"cell": p.key, "engine": p.engine, "buildId": None, "outcome": "not_started"} for p in self.not_started
        ]
        outcomes = {c["outcome"] for c in cells}
        done = bool(outcomes) and outcomes <= {"built", "reused"}  # every engine in place (reused: by its node)
        outcome = "built" if done else next((o for o in OUTCOME_ORDER if o in outcomes), "cancelled")
        summary: dict[str, Any] = {
            "buildId": self.id,
            "kind": "matrix",
            "title": self.title,
            "recipe": str(self.recipe_path),
            "outcome": outcome,
            "cancelSource": self.cancel_source,
            "startedAt": self.started_at,
            "durationS": round((time.monotonic_ns() - self.t_start_ns) / 1e9, 3),
            "cells": cells,
        }
        if any(b.remote is not None for b in self.cells):  # how the run reached its cluster: warm farm or not
            from trtls.builds.farm.cluster import connection, seconds_since_start  # no Ray import

            summary["cluster"] = {**connection, "summaryS": seconds_since_start()}
        path = self.evidence_dir / "summary.json"
        try:
            write_record(path, json.dumps(summary, indent=2, default=str))
        except OSError as exc:  # a full disk, a swapped .trtls: said in the summary every face shows, not raised
            summary["evidenceError"] = evidence_error(exc, path)
        self.record = record = Summary.written(summary)  # as written: the faces read its fields
        for listener in list(self.listeners):
            try:
                listener(self, None, None)
            except Exception:
                pass
        if self._done is not None and not self._done.done():
            self._done.set_result(record)


def _fold_node_reuse(build: Build) -> None:
    """A cell its node served from the remote store (no worker, nothing built): its summary says what a reuse's
    does, before any listener (the store's record, a view) reads it (builds/farm/node_reuse.py)."""
    from trtls.builds.avoidance.reuse import up_to_date_line
    from trtls.builds.farm.node_reuse import fold_node_reuse  # no Ray import

    hit = getattr(build.worker, "reused", None)
    if not isinstance(hit, dict) or build.state.record is None:
        return
    summary = copy.deepcopy(build.state.record)  # the state changes by a fold only (core/build_state.py)
    fold_node_reuse(summary, hit, up_to_date_line(hit.get("build") or {}))
    path = build.evidence_dir / "summary.json"
    try:
        write_record(path, json.dumps(summary, indent=2, default=str))
    except OSError as exc:
        summary["evidenceError"] = evidence_error(exc, path)
    build.fold(Recorded(summary))


def new_matrix_id(title: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", title).strip("-")
    return f"{slug}-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"


def start_matrix(
    sup: Supervisor,
    loaded: LoadedRecipe,
    planned: list[PlannedCell],
    title: str,
    remote_for: Callable[[PlannedCell], Any] | None = None,
    parallel: int = 1,
) -> MatrixBuild:
    """Start the parent (needs a running loop). `remote_for(cell)` gives each cell its RemoteSpec on a cluster;
    without it cells run locally, `parallel` at a time."""
    loop = asyncio.get_running_loop()
    mb = MatrixBuild(new_matrix_id(title), title, loaded.path, planned)
    mb.attach(loop)
    mb.not_started = list(planned)

    def relay(build: Build, ev: Any) -> None:
        if ev is None and build.remote is not None:  # the cell is over: the last stage of its tail
            from trtls.builds.farm.cluster import cell_mark  # no Ray import: only reached on the remote path

            cell_mark(build.id, "done")
            if build.outcome == "reused":
                _fold_node_reuse(build)
        for listener in list(mb.listeners):
            try:
                listener(mb, build, ev)
            except Exception:
                pass

    def launch(p: PlannedCell) -> Build:
        mb.not_started.remove(p)
        b = sup.start(
            loaded,
            p.engine,
            overrides=p.overrides,
            remote=remote_for(p) if remote_for else None,
            cell=p.cell.name if p.cell else None,
            parent_id=mb.id,
        )
        b.listeners.append(relay)
        mb.cells.append(b)
        return b

    async def drive() -> None:
        try:
            limit = len(planned) if remote_for else max(1, parallel)
            running: set[asyncio.Future] = set()
            while mb.not_started and mb.cancel_source is None:
                while mb.not_started and len(running) < limit and mb.cancel_source is None:
                    running.add(asyncio.ensure_future(launch(mb.not_started[0]).wait()))
                if running:
                    _, running = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
            await asyncio.gather(*(b.wait() for b in mb.cells), return_exceptions=True)
        finally:
            mb._finish()

    loop.create_task(drive(), name=f"trtls-matrix-{mb.id}")
    return mb
