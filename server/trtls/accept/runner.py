"""Run acceptance scenarios with real builds in a scratch copy of the recipe's folder.

The user's folder is only ever read: the recipe folder is copied (without `.trtls` and without any
engine output or timing cache) into a scratch directory; one good build there is the template every
scenario starts from (a previous good engine, and history for stall baselines). Each scenario gets
its own copy of the template, provokes its fault, runs a retry, and returns an `Observation` that
`criteria.judge` turns into verdicts.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trtls.accept.criteria import Observation
from trtls.accept.scratch import AcceptError, scratch_for
from trtls.app.build import request_build
from trtls.app.request import refused_recipe
from trtls.app.results import Refused, Started
from trtls.builds.artifacts import sha256_file
from trtls.builds.supervisor.orphans import process_alive
from trtls.builds.supervisor.retry import RETRY_FOR_POLICY, retry_overrides
from trtls.builds.supervisor.supervisor import Build, Supervisor
from trtls.builds.timing_cache import identity_path
from trtls.core import build_view
from trtls.core.recipe import LoadedRecipe, load_recipe
from trtls.core.summary_record import Summary
from trtls.fs import Kind, open_lock_file, parse_json, read_text, remove_file, remove_tree
from trtls.fs.copy_tree import copy_tree
from trtls.fs.kinds import TEMP_MARK
from trtls.fs.lock import try_lock, unlock

RECORD_LIMIT = 16 << 20  # a summary, the history or a build's events: records of one scratch build

TICK_S = 0.2  # live snapshots while a build runs (besides one per phase start/finish)


@dataclass
class Context:
    source_recipe: Path  # the user's trtls.toml (read only)
    engine: str
    scratch: Path
    template: Path = Path()
    baseline: Summary = field(default_factory=Summary)  # the template build's evidence record
    phase_count: int = 0
    log: Callable[[str], None] = lambda msg: None

    @property
    def middle(self) -> int:
        return max(1, self.phase_count // 2)


# -- workspaces ---------------------------------------------------------------------------------------
def _engine_paths(loaded: LoadedRecipe, engine: str) -> dict[str, Path]:
    eng = loaded.engine(engine)
    paths = {"onnx": loaded.resolve(eng.onnx), "output": loaded.resolve(eng.output)}
    if eng.timing_cache is not None:
        paths["timing_cache"] = loaded.resolve(eng.timing_cache.path)
    return paths


def prepare(recipe_path: Path, engine: str, scratch: Path | None, log: Callable[[str], None]) -> Context:
    loaded = load_recipe(recipe_path)
    refused = refused_recipe(loaded, [engine])  # the refusals of every face: errors, TRT107
    if refused is not None:
        raise AcceptError("; ".join(f"{loaded.location(f)}: {f.code} {f.message}" for f in refused.findings))
    assert loaded.recipe is not None  # refused_recipe refuses a recipe with errors
    folder = loaded.path.parent
    for what, p in _engine_paths(loaded, engine).items():
        if folder not in p.parents:
            raise AcceptError(f"{what} {p} is outside the recipe folder {folder}: a scratch copy could not isolate it")
    if loaded.engine(engine).worker:
        log("note: the engine names its own worker; it is used as is")
    outputs = set()
    for name in loaded.recipe.engines:
        for what, p in _engine_paths(loaded, name).items():
            if what != "onnx":
                outputs.update({p, identity_path(p), p.with_name(p.name + ".lock")})
    scratch = scratch_for(folder, scratch)  # every write of the run stays inside it
    template = scratch / "template"

    def ignore(directory: str, names: list[str]) -> set[str]:
        d = Path(directory)
        return {n for n in names if n == ".trtls" or (d / n).resolve() in outputs or TEMP_MARK in n}

    copy_tree(folder, template, within=scratch, ignore=ignore)  # the user's folder is only read
    ctx = Context(loaded.path, engine, scratch, template, log=log)
    log(f"scratch folder {scratch}; template build of {engine}…")
    summary, _, _ = build_sync(template, engine)
    if summary.outcome != "built":
        raise AcceptError(
            f"the template build of {engine} did not succeed ({summary.outcome}: {summary.error}); nothing to accept"
        )
    ctx.baseline = summary
    ctx.phase_count = len(summary.phaseTree or [])
    remove_tree(template / ".trtls" / "runs", kind=Kind.scratch, within=scratch)
    return ctx


def workspace(ctx: Context, name: str, fresh: bool = False) -> Path:
    """A copy of the template (previous good engine + history), or of the bare folder when fresh."""
    ws = ctx.scratch / name
    remove_tree(ws, kind=Kind.scratch, within=ctx.scratch, owned=True)  # only in the run's own scratch folder
    copy_tree(ctx.template, ws, within=ctx.scratch)
    if fresh:
        remove_tree(ws / ".trtls", kind=Kind.scratch, within=ctx.scratch)
        for p in _engine_paths(load_recipe(ws / "trtls.toml"), ctx.engine).values():
            if p.suffix != ".onnx":
                remove_file(p, kind=Kind.scratch, within=ctx.scratch)
    return ws


# -- builds ------------------------------------------------------------------------------------------
Trigger = Callable[[Build, Supervisor, "asyncio.Future"], object]  # what it returns is ignored


async def _build(
    ws: Path,
    engine: str,
    overrides: dict | None,
    faults: dict | None,
    grace: float | None,
    trigger: Trigger | None,
    at_phase: int | None,
    hist: dict,
) -> tuple[Summary, Build, list]:
    sup = Supervisor()
    # through the application layer as every face; a scenario's scratch copy is never looked up in the store (it
    # must build to show its fault) nor published there
    started = await request_build(
        sup, load_recipe(ws / "trtls.toml"), engine, overrides=overrides, faults=faults, scratch=True, grace_s=grace
    )
    if isinstance(started, Refused):  # the template's recipe was checked by `prepare`: a copy changed under us
        raise AcceptError("; ".join(started.lines))
    assert isinstance(started, Started)  # no store, no registry: nothing is reused or already building
    build = started.build
    live: list[list[dict]] = []
    seen = {"n": 0}
    waiter = asyncio.ensure_future(build.wait())

    def listener(b: Build, ev: Any) -> None:
        if ev is None:
            return
        if ev.type == "build_started":
            hist["had"] = bool((hist["data"].get(ev.build_config_hash) or {}).get("phases"))
        if ev.type in ("phase_start", "phase_finish"):
            live.append(build_view.snapshot(b.state)["phases"])  # the tree a face draws (no time left: no history read)
        if ev.type == "phase_start":
            if trigger is not None and seen["n"] == at_phase:
                trigger(b, sup, waiter)
            seen["n"] += 1

    build.listeners.append(listener)

    async def ticker() -> None:
        while build.running:
            await asyncio.sleep(TICK_S)
            if build.running and build.state.tree.phases:
                live.append(build_view.snapshot(build.state)["phases"])

    tick = asyncio.ensure_future(ticker())
    try:
        summary = await waiter
    except asyncio.CancelledError:
        summary = await build.wait()
    await tick
    return summary, build, live


def _history(ws: Path) -> dict:
    try:
        return parse_json(read_text(ws / ".trtls" / "history.json", limit=RECORD_LIMIT))
    except (OSError, ValueError):
        return {}


def build_sync(
    ws: Path,
    engine: str,
    *,
    overrides: dict | None = None,
    faults: dict | None = None,
    grace: float | None = None,
    trigger: Trigger | None = None,
    at_phase: int | None = None,
) -> tuple[Summary, Build, dict]:
    hist = {"data": _history(ws), "had": False}
    record, build, live = asyncio.run(_build(ws, engine, overrides, faults, grace, trigger, at_phase, hist))
    return record, build, {"live": live, "history_had_baselines": hist["had"]}


# -- observation ---------------------------------------------------------------------------------------
def _sha(p: Path | None) -> str | None:
    return sha256_file(p) if p is not None and p.is_file() else None


def leftovers(ws: Path) -> list[str]:
    quarantine = ws / ".trtls" / "quarantine"
    return sorted(
        str(p)
        for p in ws.rglob("*")
        if (TEMP_MARK in p.name or p.name.endswith(".tmp")) and quarantine not in p.parents
    )


def lock_probe(ws: Path) -> dict[str, bool]:
    """Every lock file in the workspace: can we take it at once (nobody holds it)?"""
    out = {}
    for lock in sorted(ws.rglob("*.lock")):
        try:
            fd = open_lock_file(lock, kind=Kind.scratch, within=ws)
        except OSError:  # a lock planted as a symlink or a FIFO is not a lock anyone can take
            out[str(lock.relative_to(ws))] = False
            continue
        try:
            free = try_lock(fd)
            if free:
                unlock(fd)
            out[str(lock.relative_to(ws))] = free
        finally:
            os.close(fd)
    return out


def read_evidence(ws: Path, build_id: str | None) -> tuple[dict | None, list[dict]]:
    """The build's summary.json as JSON, unchecked (criterion 7 judges it: core.evidence.record_problems, so a
    damaged record is a failed criterion, not a broken scenario), and its events."""
    if not build_id:
        return None, []
    run = ws / ".trtls" / "runs" / build_id
    try:
        summary = parse_json(read_text(run / "summary.json", limit=RECORD_LIMIT))
    except (OSError, ValueError):
        summary = None
    events = []
    try:
        for line in read_text(run / "events.jsonl", limit=RECORD_LIMIT, errors="replace").splitlines():
            try:
                events.append(parse_json(line))
            except ValueError:
                pass
    except OSError:
        pass
    return summary, events


class Recorder:
    """Collects one scenario's observation around the build that is stopped (or faulted)."""

    def __init__(self, ctx: Context, name: str, ws: Path, expect: dict[str, Any]):
        self.ctx, self.ws = ctx, ws
        self.paths = _engine_paths(load_recipe(ws / "trtls.toml"), ctx.engine)
        self.obs = Observation(name, expect=expect)
        self.obs.cache_path = str(self.paths.get("timing_cache")) if self.paths.get("timing_cache") else None

    def before(self) -> None:
        self.obs.previous_engine_sha = _sha(self.paths["output"])
        self.obs.expect.setdefault("previous_engine", self.obs.previous_engine_sha is not None)
        self.obs.cache_sha_before = _sha(self.paths.get("timing_cache"))

    def after(self, summary: Summary | None, extra: dict | None = None, pids: list[int] | None = None) -> None:
        o = self.obs
        o.summary = None if summary is None else summary.record()  # as JSON: what the criteria judge and report
        o.summary_on_disk, o.events = read_evidence(self.ws, None if summary is None else summary.buildId)
        o.engine_sha_after = _sha(self.paths["output"])
        o.cache_sha_after = _sha(self.paths.get("timing_cache"))
        o.leftovers = leftovers(self.ws)
        for k, v in (extra or {}).items():
            setattr(o, k, v)
        o.pids.extend(p for p in (pids or []) if p)
        if summary is not None and summary.workerPid:
            o.pids.append(summary.workerPid)

    def retry(self, overrides: dict | None = None) -> None:
        """Do what the evidence advises: retry_cold / retry_with_cache rebuild (cold = cache off); rollback
        keeps the previous engine and verifies it byte-for-byte; investigate and not_needed run nothing.
        Then ask a runtime whether the resulting engine loads (None: nothing here can load one)."""
        policy = Summary.written(self.obs.summary or {}).retryPolicy
        kind = RETRY_FOR_POLICY.get(str(policy))
        if kind in ("cold", "with_cache"):  # investigate's retry (a reduced search) is a diagnosis: nothing runs
            ov = parse_json(json.dumps(overrides or {}))
            ov.update(retry_overrides(kind, 0))  # builds.supervisor.retry owns what each retry means (cold: cache off)
            summary, build, _ = build_sync(self.ws, self.ctx.engine, overrides=ov)
            disk, _ = read_evidence(self.ws, summary.buildId)
            des = deserializes(self.paths["output"]) if summary.outcome == "built" else None
            self.obs.retry = {
                "policy": policy,
                "action": "rebuilt",
                "summary": summary.record(),
                "summary_on_disk": disk,
                "deserializes": des,
            }
            self.obs.pids.append(build.state.pid or 0)
        elif policy == "rollback":
            before = self.obs.previous_engine_sha
            now = self.obs.engine_sha_after  # measured where the build wrote (for disk_full: inside its tmpfs)
            verified = before is not None and now == before
            self.obs.retry = {
                "policy": policy,
                "action": "kept_previous",
                "previous_verified": verified,
                "deserializes": deserializes(self.paths["output"])
                if verified and self.paths["output"].is_file()
                else None,
            }
        else:
            self.obs.retry = {"policy": policy, "action": "none"}

    def finish(self) -> Observation:
        o = self.obs
        o.pids = sorted({p for p in o.pids if p})
        deadline = time.monotonic() + 5.0  # a process that exits is reaped within moments
        while True:
            o.alive_pids = [p for p in o.pids if process_alive(p)]
            if not o.alive_pids or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        o.leftovers = sorted(set(o.leftovers) | set(leftovers(self.ws)))
        o.locks = lock_probe(self.ws)
        q = (Summary.written(o.summary or {}).timingCache or {}).get("quarantined_to")
        o.quarantined_exists = bool(q) and os.path.exists(str(q))  # judged after the scratch folder is gone
        return o


def deserializes(engine: Path) -> bool | None:
    out = subprocess.run(
        [sys.executable, "-m", "trtls.accept.probe", "deserialize", str(engine)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    try:
        return parse_json(out.stdout.strip().splitlines()[-1])["deserializes"]
    except (ValueError, IndexError, KeyError):
        raise RuntimeError(f"deserialise probe failed: {out.stderr.strip()[-300:]}") from None


def real_cache_bytes() -> bytes:
    out = subprocess.run(
        [sys.executable, "-m", "trtls.accept.probe", "cache-bytes"], capture_output=True, text=True, timeout=300
    )
    try:
        return bytes.fromhex(parse_json(out.stdout.strip().splitlines()[-1])["hex"])
    except (ValueError, IndexError, KeyError):
        raise RuntimeError(f"cache-bytes probe failed: {out.stderr.strip()[-300:]}") from None


# -- scenario bodies -------------------------------------------------------------------------------------
def in_process_stop(
    ctx: Context,
    name: str,
    source: str | None,
    *,
    overrides: dict | None = None,
    faults: dict | None = None,
    grace: float | None = None,
    action: Trigger | None = None,
    at_phase: int | None = None,
    expect: dict | None = None,
    fresh: bool = False,
) -> Observation:
    """The common shape: a build from the template, stopped (or faulted) at a phase, then a retry."""
    ws = workspace(ctx, name, fresh=fresh)
    exp = {"cancel_source": source, **(expect or {})}
    rec = Recorder(ctx, name, ws, exp)
    rec.before()
    if action is None and source is not None:
        action = lambda b, sup, waiter: b.cancel(source)  # noqa: E731
    summary, build, extra = build_sync(
        ws,
        ctx.engine,
        overrides=overrides,
        faults=faults,
        grace=grace,
        trigger=action,
        at_phase=ctx.middle if at_phase is None else at_phase,
    )
    rec.after(summary, extra)
    rec.retry(overrides)
    return rec.finish()
