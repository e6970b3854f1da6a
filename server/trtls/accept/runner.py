"""Run acceptance scenarios with real builds in a scratch copy of the recipe's folder.

The user's folder is only ever read: the recipe folder is copied (without `.trtls` and without any
engine output or timing cache) into a scratch directory; one good build there is the template every
scenario starts from (a previous good engine, and history for stall baselines). Each scenario gets
its own copy of the template, provokes its fault, runs a retry, and returns an `Observation` that
`criteria.judge` turns into verdicts.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trtls.accept.criteria import Observation
from trtls.accept.lsp_client import LspClient
from trtls.builds.artifacts import sha256_file
from trtls.builds.history import History
from trtls.builds.orphans import process_alive
from trtls.builds.supervisor import Build, Supervisor
from trtls.builds.timing_cache import identity_path, save_merged
from trtls.core.atomic import TEMP_MARK
from trtls.core.events import ProtocolError, parse_event
from trtls.core.phase_tree import PhaseTree
from trtls.core.recipe import LoadedRecipe, load_recipe

TICK_S = 0.2  # live snapshots while a build runs (besides one per phase start/finish)


class AcceptError(Exception):
    """Bad input: the recipe, the engine or the scenario list (exit 2)."""


@dataclass
class Context:
    source_recipe: Path  # the user's trtls.toml (read only)
    engine: str
    scratch: Path
    template: Path = Path()
    baseline: dict[str, Any] = field(default_factory=dict)  # the template build's summary
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
    if loaded.recipe is None:
        raise AcceptError("; ".join(f"{loaded.location(f)}: {f.code} {f.message}" for f in loaded.errors))
    if engine not in loaded.recipe.engines:
        raise AcceptError(
            f"{recipe_path}: TRT107 no engine named {engine} (engines: {', '.join(loaded.recipe.engines) or 'none'})"
        )
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
    scratch = Path(tempfile.mkdtemp(prefix="trtls-accept-", dir=scratch))
    template = scratch / "template"

    def ignore(directory: str, names: list[str]) -> set[str]:
        d = Path(directory)
        return {n for n in names if n == ".trtls" or (d / n).resolve() in outputs or TEMP_MARK in n}

    shutil.copytree(folder, template, ignore=ignore, symlinks=True)
    ctx = Context(loaded.path, engine, scratch, template, log=log)
    log(f"scratch folder {scratch}; template build of {engine}…")
    summary, _, _ = build_sync(template, engine)
    if summary.get("outcome") != "built":
        raise AcceptError(
            f"the template build of {engine} did not succeed ({summary.get('outcome')}: {summary.get('error')}); nothing to accept"
        )
    ctx.baseline = summary
    ctx.phase_count = len(summary.get("phaseTree") or [])
    runs = template / ".trtls" / "runs"
    shutil.rmtree(runs, ignore_errors=True)
    return ctx


def workspace(ctx: Context, name: str, fresh: bool = False) -> Path:
    """A copy of the template (previous good engine + history), or of the bare folder when fresh."""
    ws = ctx.scratch / name
    if ws.exists():
        shutil.rmtree(ws)
    shutil.copytree(ctx.template, ws, symlinks=True)
    if fresh:
        shutil.rmtree(ws / ".trtls", ignore_errors=True)
        for p in _engine_paths(load_recipe(ws / "trtls.toml"), ctx.engine).values():
            if p.suffix != ".onnx" and p.exists():
                p.unlink()
    return ws


# -- builds ------------------------------------------------------------------------------------------
Trigger = Callable[[Build, Supervisor, "asyncio.Future"], None]


async def _build(
    ws: Path,
    engine: str,
    overrides: dict | None,
    faults: dict | None,
    grace: float | None,
    trigger: Trigger | None,
    at_phase: int | None,
    hist: dict,
) -> tuple[dict, Build, list]:
    sup = Supervisor()
    build = sup.start(load_recipe(ws / "trtls.toml"), engine, overrides=overrides, faults=faults)
    if grace is not None:
        build.grace_s = grace
    live: list[list[dict]] = []
    seen = {"n": 0}
    waiter = asyncio.ensure_future(build.wait())

    def listener(b: Build, ev: Any) -> None:
        if ev is None:
            return
        if ev.type == "build_started":
            hist["had"] = bool((hist["data"].get(ev.build_config_hash) or {}).get("phases"))
        if ev.type in ("phase_start", "phase_finish"):
            live.append(b.snapshot()["phases"])
        if ev.type == "phase_start":
            if trigger is not None and seen["n"] == at_phase:
                trigger(b, sup, waiter)
            seen["n"] += 1

    build.listeners.append(listener)

    async def ticker() -> None:
        while build.running:
            await asyncio.sleep(TICK_S)
            if build.running and build.tree.phases:
                live.append(build.snapshot()["phases"])

    tick = asyncio.ensure_future(ticker())
    try:
        summary = await waiter
    except asyncio.CancelledError:
        summary = await build.wait()
    await tick
    return summary, build, live


def _history(ws: Path) -> dict:
    try:
        return json.loads((ws / ".trtls" / "history.json").read_text())
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
) -> tuple[dict, Build, dict]:
    hist = {"data": _history(ws), "had": False}
    summary, build, live = asyncio.run(_build(ws, engine, overrides, faults, grace, trigger, at_phase, hist))
    return summary, build, {"live": live, "history_had_baselines": hist["had"]}


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
        with open(lock, "a+") as fh:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                fcntl.flock(fh, fcntl.LOCK_UN)
                out[str(lock.relative_to(ws))] = True
            except BlockingIOError:
                out[str(lock.relative_to(ws))] = False
    return out


def read_evidence(ws: Path, build_id: str | None) -> tuple[dict | None, list[dict]]:
    if not build_id:
        return None, []
    run = ws / ".trtls" / "runs" / build_id
    try:
        summary = json.loads((run / "summary.json").read_text())
    except (OSError, ValueError):
        summary = None
    events = []
    try:
        for line in (run / "events.jsonl").read_text(errors="replace").splitlines():
            try:
                events.append(json.loads(line))
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

    def after(self, summary: dict | None, extra: dict | None = None, pids: list[int] | None = None) -> None:
        o = self.obs
        o.summary = summary
        build_id = (summary or {}).get("buildId")
        o.summary_on_disk, o.events = read_evidence(self.ws, build_id)
        o.engine_sha_after = _sha(self.paths["output"])
        o.cache_sha_after = _sha(self.paths.get("timing_cache"))
        o.leftovers = leftovers(self.ws)
        for k, v in (extra or {}).items():
            setattr(o, k, v)
        o.pids.extend(p for p in (pids or []) if p)
        if summary and summary.get("workerPid"):
            o.pids.append(summary["workerPid"])

    def retry(self, overrides: dict | None = None) -> None:
        """Retry the way the evidence advises; then check the engine in a runtime where one exists."""
        s = self.obs.summary or {}
        policy = s.get("retryPolicy") or "retry_cold"
        ov = json.loads(json.dumps(overrides or {}))
        if policy == "retry_cold":
            ov["cache_mode"] = "off"
        summary, build, _ = build_sync(self.ws, self.ctx.engine, overrides=ov)
        disk, _ = read_evidence(self.ws, summary.get("buildId"))
        des = None
        if summary.get("outcome") == "built":
            des = deserializes(self.paths["output"])
        self.obs.retry = {"summary": summary, "summary_on_disk": disk, "deserializes": des, "policy": policy}
        self.obs.pids.append(build.pid or 0)

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
        q = ((o.summary or {}).get("timingCache") or {}).get("quarantined_to")
        o.quarantined_exists = bool(q) and os.path.exists(q)  # judged after the scratch folder is gone
        return o


def deserializes(engine: Path) -> bool | None:
    out = subprocess.run(
        [sys.executable, "-m", "trtls.accept.probe", "deserialize", str(engine)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    try:
        return json.loads(out.stdout.strip().splitlines()[-1])["deserializes"]
    except (ValueError, IndexError, KeyError):
        raise RuntimeError(f"deserialise probe failed: {out.stderr.strip()[-300:]}") from None


def real_cache_bytes() -> bytes:
    out = subprocess.run(
        [sys.executable, "-m", "trtls.accept.probe", "cache-bytes"], capture_output=True, text=True, timeout=300
    )
    try:
        return bytes.fromhex(json.loads(out.stdout.strip().splitlines()[-1])["hex"])
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


def sc_cold_cache(ctx: Context) -> Observation:
    ws = workspace(ctx, "cold_cache", fresh=True)
    rec = Recorder(
        ctx,
        "cold_cache",
        ws,
        {"cancel_source": None, "outcome": "built", "cache_decisions": ["cold", "not_applicable"]},
    )
    rec.before()
    summary, build, extra = build_sync(ws, ctx.engine)
    rec.after(summary, extra)
    rec.retry()
    # the second build of the same config must show the usual durations the first one recorded
    rs = rec.obs.retry["summary"] if rec.obs.retry else {}
    rec.obs.extra["note"] = (
        f"second build baselines: {sum(1 for p in rs.get('phaseTree') or [] if p.get('baselineS') is not None)} phases"
    )
    return rec.finish()


def sc_api_cancel(ctx: Context) -> Observation:
    return in_process_stop(ctx, "api_cancel", "api")


def sc_deep_tactics(ctx: Context) -> Observation:
    return in_process_stop(ctx, "deep_tactics", "api", overrides={"settings": {"optimization_level": 5}})


def sc_slow_settings(ctx: Context) -> Observation:
    return in_process_stop(
        ctx,
        "slow_settings",
        "ci_timeout",
        overrides={"settings": {"optimization_level": 4, "avg_timing_iterations": 16}},
    )


def sc_service_shutdown(ctx: Context) -> Observation:
    return in_process_stop(
        ctx, "service_shutdown", "service_shutdown", action=lambda b, sup, w: asyncio.ensure_future(sup.shutdown())
    )


def sc_event_loop(ctx: Context) -> Observation:
    return in_process_stop(ctx, "event_loop", "event_loop", action=lambda b, sup, waiter: waiter.cancel())


def sc_worker_sigkill(ctx: Context) -> Observation:
    return in_process_stop(
        ctx, "worker_sigkill", None, action=lambda b, sup, w: os.kill(b.pid, signal.SIGKILL), expect={"killed": True}
    )


def sc_silent_builder(ctx: Context) -> Observation:
    # The k-th phase_start blocks for 60 s (no callbacks): the cancel sent when it starts is never seen.
    k = ctx.middle
    return in_process_stop(
        ctx,
        "silent_builder",
        "api",
        faults={"stall": {"at_phase": k, "seconds": 60}},
        grace=1.0,
        at_phase=k - 1,
        expect={"forced": True},
    )


def sc_disk_full(ctx: Context) -> Observation:
    size = (ctx.baseline.get("engineArtifact") or {}).get("size") or (1 << 21)
    limit = max(4096, min(1 << 20, size // 2))
    obs = in_process_stop(ctx, "disk_full", None, faults={"fsize_limit_bytes": limit}, expect={"outcome": "failed"})
    obs.extra["note"] = f"file size limit {limit} bytes for a {size}-byte engine: {(obs.summary or {}).get('error')}"
    return obs


def sc_readonly_output(ctx: Context) -> Observation:
    ws = workspace(ctx, "readonly_output")
    rec = Recorder(ctx, "readonly_output", ws, {"cancel_source": None, "outcome": "failed"})
    folder = rec.paths["output"].parent
    how = _make_readonly(folder)
    if how is None:
        rec.obs.skipped = "running as root and `chattr +i` is not available or not supported by this filesystem: nothing here makes a folder unwritable for root"
        return rec.obs
    try:
        rec.before()
        summary, build, extra = build_sync(ws, ctx.engine)
    finally:
        _undo_readonly(folder, how)
    rec.after(summary, extra)
    rec.obs.extra["note"] = f"output folder made unwritable with {how}: {(summary or {}).get('error')}"
    rec.retry()
    return rec.finish()


def _make_readonly(folder: Path) -> str | None:
    folder.mkdir(parents=True, exist_ok=True)
    if shutil.which("chattr"):
        r = subprocess.run(["chattr", "+i", str(folder)], capture_output=True)
        if r.returncode == 0:
            probe = folder / ".trtls-accept-probe"
            try:
                probe.write_bytes(b"x")
                probe.unlink()
                subprocess.run(["chattr", "-i", str(folder)], capture_output=True)
            except OSError:
                return "chattr +i"
    if os.geteuid() != 0:
        folder.chmod(0o555)
        return "chmod 0555"
    return None


def _undo_readonly(folder: Path, how: str) -> None:
    if how == "chattr +i":
        subprocess.run(["chattr", "-i", str(folder)], capture_output=True)
    else:
        folder.chmod(0o755)


def sc_network_change(ctx: Context) -> Observation:
    ws = workspace(ctx, "network_change")
    rec = Recorder(
        ctx,
        "network_change",
        ws,
        {"cancel_source": None, "outcome": "built", "config_hash_differs_from": ctx.baseline.get("buildConfigHash")},
    )
    _change_network(rec.paths["onnx"])
    rec.before()
    summary, build, extra = build_sync(ws, ctx.engine)
    rec.after(summary, extra)
    same_identity = (summary.get("timingCache") or {}).get("identity") == (ctx.baseline.get("timingCache") or {}).get(
        "identity"
    )
    rec.obs.extra["note"] = (
        "the cache identity does not include the network (TensorRT timing caches are per layer, shareable across networks), so it is unchanged; "
        "the buildConfigHash changed, so history baselines of the old network were not applied"
        if same_identity
        else "the cache identity changed with the network"
    )
    rec.retry()
    return rec.finish()


def _change_network(onnx_path: Path) -> None:
    """The same graph with different weights: another network for the builder, valid ONNX."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(onnx_path))
    for i, init in enumerate(model.graph.initializer):
        arr = numpy_helper.to_array(init)
        if arr.dtype.kind == "f" and arr.size:
            model.graph.initializer[i].CopyFrom(
                numpy_helper.from_array((arr * 1.5 + 0.01).astype(arr.dtype), init.name)
            )
            break
    else:
        model.doc_string = (model.doc_string or "") + " trtls-accept network_change"
    onnx.save(model, str(onnx_path))


def sc_new_gpu_target(ctx: Context) -> Observation:
    ws = workspace(ctx, "new_gpu_target")
    old = {"settings": {"compute_capabilities": ["SM89"]}}
    new = {"settings": {"compute_capabilities": ["SM120"]}}
    first, b1, _ = build_sync(ws, ctx.engine, overrides=old)
    if first.get("outcome") != "built":
        obs = Observation("new_gpu_target", error=f"the SM89 build did not succeed: {first.get('error')}")
        return obs
    old_identity = (first.get("timingCache") or {}).get("identity") or {}
    rec = Recorder(
        ctx,
        "new_gpu_target",
        ws,
        {
            "cancel_source": None,
            "outcome": "built",
            "identity_differs_from": old_identity,
            "cache_decisions": ["cold", "quarantined", "not_applicable"],
        },
    )
    cache = rec.paths.get("timing_cache")
    if cache is not None:  # the cache an SM89 build would leave (TRT-RTX's builder writes none itself)
        save_merged(cache, real_cache_bytes(), old_identity, lambda o, n: None)
    rec.before()
    summary, build, extra = build_sync(ws, ctx.engine, overrides=new)
    rec.after(summary, extra, pids=[b1.pid or 0])
    rec.obs.extra["note"] = f"SM89 → SM120: decision {summary.get('timingCacheMode')}"
    rec.retry(new)
    return rec.finish()


def sc_corrupted_cache(ctx: Context) -> Observation:
    ws = workspace(ctx, "corrupted_cache")
    rec = Recorder(
        ctx, "corrupted_cache", ws, {"cancel_source": None, "outcome": "built", "cache_decisions": ["quarantined"]}
    )
    cache = rec.paths.get("timing_cache")
    if cache is None:
        rec.obs.skipped = "the engine has no timing_cache in the recipe"
        return rec.obs
    identity = (ctx.baseline.get("timingCache") or {}).get("identity") or {}
    good = real_cache_bytes()
    save_merged(cache, good, identity, lambda o, n: None)
    bad = bytearray(good[: max(1, len(good) // 2)])
    bad[0] ^= 0xFF  # truncated and flipped
    cache.write_bytes(bytes(bad))
    rec.before()
    summary, build, extra = build_sync(ws, ctx.engine)
    rec.after(summary, extra)
    rec.retry()
    return rec.finish()


def sc_concurrent_cache(ctx: Context) -> Observation:
    ws = workspace(ctx, "concurrent_cache")
    rec = Recorder(ctx, "concurrent_cache", ws, {"cancel_source": None, "outcome": "built", "cache_consistent": True})
    cache = rec.paths.get("timing_cache")
    if cache is None:
        rec.obs.skipped = "the engine has no timing_cache in the recipe"
        return rec.obs
    identity = (ctx.baseline.get("timingCache") or {}).get("identity") or {}
    save_merged(cache, real_cache_bytes(), identity, lambda o, n: None)
    n = 40
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "trtls.accept.probe", "hammer", str(cache), json.dumps(identity), tag, str(n)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for tag in ("writer-a", "writer-b")
    ]
    codes = [p.wait(timeout=300) for p in procs]
    want = {f"{tag}:{i:05d}".encode() for tag in ("writer-a", "writer-b") for i in range(n)}
    problems = cache_consistency(cache, identity, want)
    if codes != [0, 0]:
        problems.append(f"writer exit codes {codes}")
    rec.obs.extra["cache_consistent"] = not problems
    rec.obs.extra["cache_problem"] = "; ".join(problems)
    rec.obs.extra["cache_note"] = (
        f"2 processes × {n} save_merged calls at once: sidecar sha256 matches, all {len(want)} records kept"
    )
    rec.before()
    summary, build, extra = build_sync(ws, ctx.engine)
    rec.after(summary, extra, pids=[p.pid for p in procs])
    rec.retry()
    return rec.finish()


def cache_consistency(cache: Path, identity: dict, records: set[bytes]) -> list[str]:
    """Problems with a cache after concurrent merged saves: digest/size/identity vs the sidecar, lost records."""
    import hashlib

    data = cache.read_bytes()
    try:
        meta = json.loads(identity_path(cache).read_text())
    except (OSError, ValueError) as exc:
        return [f"no readable sidecar: {exc}"]
    problems = []
    if meta.get("sha256") != hashlib.sha256(data).hexdigest() or meta.get("size") != len(data):
        problems.append("the sidecar digest does not match the file")
    if meta.get("identity") != identity:
        problems.append("the sidecar identity changed")
    lost = records - set(data.splitlines())
    if lost:
        problems.append(f"{len(lost)} of {len(records)} merged records lost")
    return problems


# -- faces: the CLI and the language server ------------------------------------------------------------------
def sc_ctrl_c(ctx: Context) -> Observation:
    ws = workspace(ctx, "ctrl_c")
    rec = Recorder(ctx, "ctrl_c", ws, {"cancel_source": "ctrl_c", "exit_code": 130})
    rec.before()
    hist = _history(ws)
    proc = subprocess.Popen(
        [sys.executable, "-m", "trtls", "build", str(ws), "--engine", ctx.engine, "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    tree, baselines, live, seen, had = PhaseTree(), {}, [], 0, False
    summary = None
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith('{"type": "summary"') or line.startswith('{"type":"summary"'):
            summary = json.loads(line)["summary"]
            continue
        try:
            ev = parse_event(line)
        except ProtocolError:
            continue
        if ev.type == "build_started":
            had = bool((hist.get(ev.build_config_hash) or {}).get("phases"))
            baselines = History(ws / ".trtls" / "history.json").baselines(ev.build_config_hash)
        if ev.type in ("phase_start", "step", "phase_finish"):
            tree.apply(ev)
            live.append(tree.snapshot(time.monotonic_ns(), baselines))
        if ev.type == "phase_start":
            if seen == ctx.middle:
                proc.send_signal(signal.SIGINT)
            seen += 1
    code = proc.wait(timeout=300)
    rec.after(summary, {"live": live, "history_had_baselines": had}, pids=[proc.pid])
    rec.obs.extra["exit_code"] = code
    rec.retry()
    return rec.finish()


def sc_ide_stop(ctx: Context) -> Observation:
    rec = asyncio.run(_lsp_scenario(ctx, "ide_stop", kill_server=False))
    rec.retry()  # outside the client's event loop: a retry runs its own
    return rec.finish()


def sc_server_killed(ctx: Context) -> Observation:
    rec = asyncio.run(_lsp_scenario(ctx, "server_killed", kill_server=True))
    rec.retry()
    return rec.finish()


async def _lsp_scenario(ctx: Context, name: str, kill_server: bool) -> Recorder:
    ws = workspace(ctx, name)
    expect = {"killed": True, "user_told": True} if kill_server else {"cancel_source": "ide_stop"}
    rec = Recorder(ctx, name, ws, expect)
    rec.before()
    hist = _history(ws)
    client = LspClient()
    await client.start(ws, ctx.scratch / f"{name}-server.log")
    pids = [client.pid or 0]
    second: LspClient | None = None
    try:
        await client.initialize(ws)
        uri = (ws / "trtls.toml").as_uri()
        client.notify(
            "textDocument/didOpen",
            {"textDocument": {"uri": uri, "languageId": "toml", "version": 1, "text": (ws / "trtls.toml").read_text()}},
        )
        result = await client.request(
            "workspace/executeCommand",
            {"command": "trtls.buildEngine", "arguments": [{"uri": uri, "engine": ctx.engine}]},
        )
        build_id = result["buildId"]

        def trees() -> list[dict]:
            return [t for t in client.of("trtls/buildTree") if t.get("buildId") == build_id]

        await client.wait_for(lambda: any(len(t.get("phases") or []) > ctx.middle for t in trees()), timeout=300)
        running = ws / ".trtls" / "runs" / build_id / "running.json"
        worker_pid = json.loads(running.read_text()).get("workerPid") if running.is_file() else None
        pids.append(worker_pid or 0)
        if kill_server:
            os.kill(client.pid, signal.SIGKILL)  # type: ignore[arg-type]
            await client.close()
            second = LspClient()
            await second.start(ws, ctx.scratch / f"{name}-server2.log")
            pids.append(second.pid or 0)
            await second.initialize(ws)
            told = await second.wait_for(
                lambda: [m for m in second.of("window/showMessage") if build_id in m.get("message", "")], timeout=120
            )
            rec.obs.extra["user_told"] = bool(told)
            rec.obs.extra["note"] = told[0]["message"]
            summary = json.loads((ws / ".trtls" / "runs" / build_id / "summary.json").read_text())
        else:
            token = next(
                r["params"]["token"]
                for r in client.server_requests
                if r.get("method") == "window/workDoneProgress/create"
            )
            client.notify("window/workDoneProgress/cancel", {"token": token})
            await client.wait_for(
                lambda: any(
                    p.get("token") == token and (p.get("value") or {}).get("kind") == "end"
                    for p in client.of("$/progress")
                ),
                timeout=300,
            )
            summary = json.loads((ws / ".trtls" / "runs" / build_id / "summary.json").read_text())
        live = [t.get("phases") or [] for t in trees()]
        had = bool(
            (hist.get(summary.get("buildConfigHash") or ctx.baseline.get("buildConfigHash")) or {}).get("phases")
        )
    finally:
        if second is not None:
            await second.close()
        await client.close()
    rec.after(summary, {"live": live, "history_had_baselines": had}, pids=pids)
    return rec
