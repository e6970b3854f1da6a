"""Retention for `.trtls/`: which runs' evidence to remove (`trtls gc`, and a light pass after each build).

Every build leaves `.trtls/runs/<build id>/` (76 KB for `demo`, 356 KB for `large`). The bounds come from the recipe's
`[evidence]` table (core/evidence_table.py): keep the `keep_runs` newest runs, remove runs older than `max_age_days`,
and keep the total under `max_size_mb` by removing the oldest first. Whatever the bounds say, a run is never removed
while a record still points to it (`pins`):

- a build that is running or was interrupted and not yet recovered (`running.json`), or has no summary yet;
- the latest run, the latest run of each engine and each engine's last good (`built`) run;
- every run a record outside `runs/` names: gates and route records (`.trtls/routes/…`), promotions, reports —
  any JSON under `.trtls/` except the ledgers that list every build (`history.json`, `engines/*.json`, whose newest
  entry per engine is pinned as the last good build anyway);
- the cells of a kept matrix run and the matrix of a kept cell.

`history.json` is bounded separately (builds/supervisor/history.py keeps the most recently used build configs).
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trtls.builds.roots import state_root
from trtls.builds.supervisor.history import History
from trtls.builds.supervisor.running_state import RUNNING
from trtls.core.evidence_table import EvidenceTable
from trtls.core.recipe_file import recipe_snapshot
from trtls.fs import Kind, ensure_folder, open_lock_file, read_text, remove_tree
from trtls.fs.lock import try_lock

if TYPE_CHECKING:  # the supervisor imports this module before a build's worker starts, pydantic after (issue 31)
    from trtls.core.summary_record import Summary

RUN_ID = re.compile(r"[A-Za-z0-9_.\-]+-\d{8}-\d{6}-[0-9a-f]{6}")  # builds.supervisor.job.new_build_id and matrix ids
LEDGERS = ("history.json",)  # files that list every build: they do not pin runs
NOT_RECORDS = ("runs", "locks", "quarantine", "engines", "precision")  # folders under .trtls/ that pin nothing
MAX_RECORD_BYTES = 8 << 20  # a record larger than this is not read for references (it pins nothing)
AUTO_SLACK_RUNS = 10  # the light pass after a build starts only past keep_runs + this (not after every build)
AUTO_MAX_REMOVE = 20  # and removes at most this many runs (the next build continues)


@dataclass(frozen=True)
class Policy:
    keep_runs: int
    max_age_days: float
    max_size_mb: float
    auto_gc: bool = True


@dataclass
class Run:
    id: str
    path: Path
    started: float
    size: int
    summary: Summary | None = None  # None: not read, or no record that holds together
    running: bool = False

    @property
    def engine(self) -> str | None:
        return self.summary.engine if self.summary else None


def policy_for(
    folder: Path, keep_runs: int | None = None, max_age_days: float | None = None, max_size_mb: float | None = None
) -> Policy:
    """The recipe's `[evidence]` bounds (defaults when there is no recipe, no table, or it does not validate:
    retention is upkeep, never a reason to fail), overridden by the given values."""
    table = EvidenceTable()
    try:
        raw = recipe_snapshot(folder / "trtls.toml").data.get("evidence")
        if isinstance(raw, dict):
            table = EvidenceTable(**raw)
    except (OSError, ValueError):
        pass
    return Policy(
        keep_runs if keep_runs is not None else table.keep_runs,
        max_age_days if max_age_days is not None else table.max_age_days,
        max_size_mb if max_size_mb is not None else table.max_size_mb,
        table.auto_gc,
    )


def policy_of(table: EvidenceTable | None) -> Policy:
    t = table or EvidenceTable()
    return Policy(t.keep_runs, t.max_age_days, t.max_size_mb, t.auto_gc)


def _size(folder: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(folder):  # os.walk does not follow symlinked folders
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, name)).st_size
    return total


def scan_runs(runs_dir: Path, read_summaries: bool = True) -> list[Run]:
    """Every run folder, newest first: a real folder (not a link) whose name is a build id trtls makes. Anything
    else in `runs/` is not trtls's and is neither counted nor ever removed."""
    runs: list[Run] = []
    try:
        entries = list(os.scandir(runs_dir))
    except OSError:
        return []
    for entry in entries:
        if not entry.is_dir(follow_symlinks=False) or not RUN_ID.fullmatch(entry.name):
            continue
        path = Path(entry.path)
        summary = None
        if read_summaries:  # never through a link, never more than a record holds; a damaged one is no record
            from trtls.core.summary_record import SUMMARY_NAME, SummaryProblem, read_summary

            found = read_summary(path / SUMMARY_NAME, within=state_root(path))  # `.trtls/runs` linked out: none
            summary = None if isinstance(found, SummaryProblem) else found
        started = summary.startedAt if summary else None
        if started is None:
            started = entry.stat(follow_symlinks=False).st_mtime
        running = (path / RUNNING).exists() or not (path / "summary.json").exists()
        runs.append(Run(entry.name, path, float(started), _size(path), summary, running))
    runs.sort(key=lambda r: r.started, reverse=True)
    return runs


def referenced_ids(trtls_dir: Path) -> dict[str, str]:
    """Run ids named by records outside `runs/` → the record (relative path) that names them."""
    found: dict[str, str] = {}
    for root, dirs, files in os.walk(trtls_dir):
        rel = Path(root).relative_to(trtls_dir)
        if rel.parts[:1] and rel.parts[0] in NOT_RECORDS:
            dirs[:] = []
            continue
        for name in files:
            if not name.endswith((".json", ".jsonl")) or (not rel.parts and name in LEDGERS):
                continue
            try:  # a symlink, a FIFO or a record past MAX_RECORD_BYTES pins nothing (and is never opened)
                text = read_text(Path(root) / name, limit=MAX_RECORD_BYTES, errors="replace")
            except OSError:
                continue
            for rid in RUN_ID.findall(text):
                found.setdefault(rid, str(rel / name))
    return found


def pins(runs: list[Run], trtls_dir: Path, max_age_days: float) -> dict[str, str]:
    """Run id → why it must be kept."""
    why: dict[str, str] = {}
    now = time.time()
    for r in runs:
        if (r.path / RUNNING).exists():
            why[r.id] = "running (or interrupted, not yet recovered)"
        elif r.running and now - r.started < max_age_days * 86400:
            why[r.id] = "no summary yet (starting, or waiting for its output)"
    if runs:
        why.setdefault(runs[0].id, "the latest run")
    for r in runs:  # newest first: the first of each engine wins
        if r.summary and r.engine and not r.summary.cell:
            why.setdefault(f"latest:{r.engine}", r.id)
            if r.summary.outcome == "built":
                why.setdefault(f"good:{r.engine}", r.id)
    for key in sorted((k for k in why if k.startswith(("latest:", "good:"))), key=lambda k: k[0] != "g"):
        rid, engine = why.pop(key), key.split(":", 1)[1]
        what = "the last good build" if key.startswith("good:") else "the latest run"
        why.setdefault(rid, f"{what} of engine {engine}")
    by_id = {r.id: r for r in runs}
    for rid, record in referenced_ids(trtls_dir).items():
        if rid in by_id:
            why.setdefault(rid, f"named by {record}")
    for r in runs:  # a matrix and its cells go together
        parent = r.summary.parentId if r.summary else None
        if parent in why and r.id not in why:
            why[r.id] = f"a cell of kept matrix {parent}"
        elif r.id in why and parent in by_id:
            why.setdefault(parent, f"the matrix of kept cell {r.id}")
    return why


def plan_removal(runs: list[Run], pinned: dict[str, str], policy: Policy) -> list[tuple[Run, str]]:
    """The runs to remove (oldest first) and why."""
    now = time.time()
    remove: dict[str, tuple[Run, str]] = {}
    for rank, r in enumerate(runs):
        if r.id in pinned:
            continue
        age_days = (now - r.started) / 86400
        if age_days > policy.max_age_days:
            remove[r.id] = (r, f"older than {policy.max_age_days:g} days ({age_days:.0f} days)")
        elif rank >= policy.keep_runs:
            remove[r.id] = (r, f"beyond the {policy.keep_runs} newest runs")
    total = sum(r.size for r in runs if r.id not in remove)
    limit = policy.max_size_mb * 1e6
    for r in reversed(runs):  # oldest first
        if total <= limit:
            break
        if r.id in pinned or r.id in remove:
            continue
        remove[r.id] = (r, f"over the {policy.max_size_mb:g} MB bound for .trtls/runs")
        total -= r.size
    return sorted(remove.values(), key=lambda item: item[0].started)


def refusal(trtls_dir: Path) -> dict[str, str] | None:
    """TRT118, located, when `.trtls` or `.trtls/runs` is a symlink (or not a folder): gc deletes only run folders
    trtls made in this recipe's folder, never another folder a link leads to. None when both are real folders (or
    missing: nothing to collect)."""
    for folder in (trtls_dir, trtls_dir / "runs"):
        try:
            st = os.lstat(folder)
        except FileNotFoundError:
            return None
        except OSError as exc:
            return {"code": "TRT413", "path": str(folder), "message": f"{folder}: {exc.strerror or exc}"}
        if stat.S_ISLNK(st.st_mode):
            where = os.readlink(folder)
            return {
                "code": "TRT118",
                "path": str(folder),
                "message": f"{folder} is a symlink (to {where}): trtls gc "
                "removes only run folders it made in this recipe's folder, never through a link; nothing removed",
            }
        if not stat.S_ISDIR(st.st_mode):
            return {"code": "TRT118", "path": str(folder), "message": f"{folder} is not a folder; nothing removed"}
    return None


def _remove(run: Run, runs_dir: Path) -> str | None:
    """Remove one run folder by descriptor, inside the recipe's folder (never through a link: a `.trtls` or
    `runs` swapped for a symlink since the scan is refused at the removal). The error, or None."""
    if run.path.parent != runs_dir or not RUN_ID.fullmatch(run.id):
        return "not a run folder"
    try:
        remove_tree(run.path, kind=Kind.evidence, within=runs_dir.parent.parent)
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


def collect(trtls_dir: Path, policy: Policy, *, dry_run: bool = False, max_remove: int | None = None) -> dict[str, Any]:
    """Apply `policy` to `.trtls/`: the result says what was (or would be) removed, what was kept and why; with
    `refused` (TRT118, located) nothing was: `.trtls` or its `runs` is a symlink."""
    runs_dir = trtls_dir / "runs"
    result: dict[str, Any] = {"removed": [], "kept": [], "freedBytes": 0, "historyConfigsDropped": 0, "dryRun": dry_run}
    result["policy"] = {
        "keepRuns": policy.keep_runs,
        "maxAgeDays": policy.max_age_days,
        "maxSizeMb": policy.max_size_mb,
    }
    if (refused := refusal(trtls_dir)) is not None:
        result["refused"] = refused
        return result
    if not runs_dir.is_dir():
        return result
    try:
        with _gc_lock(trtls_dir) as held:
            if not held:
                result["skipped"] = "another trtls gc is running on this folder"
                return result
            _collect_held(trtls_dir, policy, dry_run, max_remove, result)
    except OSError as exc:  # the lock's folder or the history swapped for a link, a full disk: said, not raised
        # the door works by descriptor: a bare file name is said with the folder it is in
        name = exc.filename if isinstance(exc.filename, str) else None
        where = Path(name) if name and (os.path.isabs(name) or os.sep in name) else trtls_dir / (name or "")
        result["refused"] = {"code": "TRT413", "path": str(where), "message": f"{where}: {exc.strerror or exc}"}
    return result


def _collect_held(trtls_dir: Path, policy: Policy, dry_run: bool, max_remove: int | None, result: dict) -> None:
    runs_dir = trtls_dir / "runs"
    runs = scan_runs(runs_dir)
    pinned = pins(runs, trtls_dir, policy.max_age_days)
    planned = plan_removal(runs, pinned, policy)[: max_remove if max_remove is not None else None]
    gone = set()
    for run, reason in planned:
        error = None if dry_run else _remove(run, runs_dir)
        if error is None:
            gone.add(run.id)
            result["removed"].append({"buildId": run.id, "reason": reason, "bytes": run.size})
            result["freedBytes"] += run.size
        else:
            result.setdefault("errors", []).append({"buildId": run.id, "error": error})
    for r in runs:
        if r.id not in gone:
            result["kept"].append({"buildId": r.id, "pinned": pinned.get(r.id), "bytes": r.size})
    history = History(trtls_dir / "history.json")
    result["historyConfigsDropped"] = history.prune(dry_run=dry_run)


def auto_collect(trtls_dir: Path, policy: Policy) -> dict[str, Any] | None:
    """The light pass after a build: only when the folder is past its bounds by a margin, and bounded in work
    (the runs are counted and sized without reading their summaries first). None when nothing was due."""
    if not policy.auto_gc or refusal(trtls_dir) is not None:
        return None
    runs = scan_runs(trtls_dir / "runs", read_summaries=False)
    oldest_days = (time.time() - runs[-1].started) / 86400 if runs else 0.0
    over = (
        len(runs) > policy.keep_runs + AUTO_SLACK_RUNS
        or sum(r.size for r in runs) > policy.max_size_mb * 1e6
        or oldest_days > policy.max_age_days
    )
    return collect(trtls_dir, policy, max_remove=AUTO_MAX_REMOVE) if over else None


@contextlib.contextmanager
def _gc_lock(trtls_dir: Path) -> Iterator[bool]:
    """One gc per folder at a time (a second one skips: the first is doing its work)."""
    root = trtls_dir.parent  # the recipe's folder: the lock is never opened through a swapped .trtls
    locks = ensure_folder(trtls_dir / "locks", within=root)
    fd = open_lock_file(locks / "gc.lock", kind=Kind.evidence, within=root)
    try:
        yield try_lock(fd)
    finally:
        os.close(fd)


def clean_engine_temps(folder: Path, dry_run: bool = False) -> dict[str, Any]:
    """`trtls gc`: the temps a killed restore or build left beside each engine output of the recipe
    (`<output name>.trtls-tmp-*`), removed while holding that output's lock (an output another build holds now is
    skipped: its own temp may be one of them). {"removed": [paths], "busy": [outputs]}; a recipe that does not load
    cleans nothing."""
    from trtls.builds.avoidance.reuse import OutputHeld
    from trtls.builds.roots import loaded_write_root
    from trtls.builds.supervisor.job import new_build_id, state_dir, worker_job
    from trtls.core.recipe import load_recipe
    from trtls.fs.kinds import TEMP_MARK

    result: dict[str, Any] = {"removed": [], "busy": []}
    loaded = load_recipe(folder / "trtls.toml")
    if loaded.recipe is None:
        return result
    for engine in loaded.recipe.engines:
        try:
            job = worker_job(loaded, engine, "gc")
            output = Path(job["output"])
            within = None if dry_run else Path(loaded_write_root(loaded.path.parent, Path(job["write_root"])))
            held = OutputHeld(state_dir(loaded.path), output, new_build_id(engine), engine, within=within)
            if not held.take():
                result["busy"].append(str(output))
                continue
        except (OSError, ValueError, KeyError):
            continue  # an output that cannot be placed or locked: the build says why, located
        try:
            names = held.removed
            if dry_run:
                with contextlib.suppress(OSError):
                    names = sorted(n for n in os.listdir(output.parent) if n.startswith(f"{output.name}{TEMP_MARK}"))
            result["removed"] += [str(output.parent / n) for n in names]
        finally:
            held.release()
    return result
