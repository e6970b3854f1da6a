"""Scenario bodies whose fault is produced for real through a face: the CLI under a real `--timeout`, SIGTERM to
the CLI and to the language server, a real full filesystem (a size-limited tmpfs in a private mount namespace),
a network whose types change between builds, a setting checked to deepen the builder's work on this machine,
and a timing cache trtls did not write. Each sets `obs.fault` to what it actually did (real or simulated).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from trtls.accept.cli_run import cli_build, cli_observation
from trtls.accept.criteria import Observation
from trtls.accept.lsp_client import LspClient
from trtls.accept.runner import RECORD_LIMIT, Context, Recorder, _history, build_sync, in_process_stop, workspace
from trtls.core.summary_record import Summary, SummaryProblem, read_summary
from trtls.fs import (
    Kind,
    atomic_write_bytes,
    atomic_write_text,
    ensure_folder,
    parse_json,
    read_bytes,
    read_text,
    remove_tree,
    signal_child,
)
from trtls.fs.models import load_onnx


def real(how: str) -> dict[str, str]:
    return {"kind": "real", "how": how}


def simulated(how: str) -> dict[str, str]:
    return {"kind": "simulated", "how": how}


def set_builder_settings(recipe: Path, engine: str, settings: dict[str, Any], *, within: Path) -> None:
    """Write builder settings into a scratch recipe (the CLI has no flag for every setting), inside `within` (the
    run's scratch folder)."""
    lines = read_text(recipe, limit=RECORD_LIMIT).splitlines()
    header = f"[engines.{engine}.builder]"
    if header not in [ln.strip() for ln in lines]:
        lines += ["", header]
    start = next(i for i, ln in enumerate(lines) if ln.strip() == header)
    end = next((i for i in range(start + 1, len(lines)) if lines[i].lstrip().startswith("[")), len(lines))
    body = [ln for ln in lines[start + 1 : end] if ln.split("=")[0].strip() not in settings]
    body += [f"{k} = {json.dumps(v)}" for k, v in settings.items()]
    text = "\n".join(lines[: start + 1] + body + lines[end:]) + "\n"
    atomic_write_text(recipe, text, kind=Kind.scratch, within=within)


def first_timeout(baseline: Summary) -> float:
    """When the CI timer should fire to land inside the builder's work: the template build's time before its
    first phase (worker start, parse) plus 40 % of its root phase."""
    tree = baseline.phaseTree or []
    total = float(baseline.durationS or 2.0)
    root = float(tree[0].get("elapsedS") or total) if tree else total
    return round(max(0.5, total - root + 0.4 * root), 2)


def sc_slow_settings(ctx: Context, attempts: int = 3) -> Observation:
    """Level 4 and 16 timing iterations, stopped by the CLI's own --timeout timer. The timer is real, so on a
    machine whose load changes it can fire too late (the build finished) or too early (before the first
    phase): then the scenario runs again with the timer moved, up to `attempts` times, and says so."""
    timeout, tried, earlier = first_timeout(ctx.baseline), [], []
    for _ in range(attempts):
        ws = workspace(ctx, "slow_settings")
        slow = {"optimization_level": 4, "avg_timing_iterations": 16}
        set_builder_settings(ws / "trtls.toml", ctx.engine, slow, within=ctx.scratch)
        rec = Recorder(ctx, "slow_settings", ws, {"cancel_source": "ci_timeout", "exit_code": 124})
        rec.before()
        run = cli_build(ctx, ws, ["--timeout", str(timeout)])
        got: Summary = run["summary"] or Summary()  # none: the CLI sent no summary (or one that did not hold)
        outcome, phases = got.outcome, len(got.phaseTree or [])
        tried.append(f"--timeout {timeout}: {outcome} after {phases} phases")
        if outcome == "built":
            timeout = round(timeout * 0.5, 2)
        elif outcome == "cancelled" and phases == 0:
            timeout = round(timeout * 1.5, 2)
        else:
            break
        earlier += [run["pid"], got.workerPid or 0]
    obs = cli_observation(rec, run)
    obs.pids.extend(earlier)  # an earlier attempt's processes must be gone too
    obs.fault = real(f"`trtls build --timeout {timeout}`: the CLI's own timer ({'; '.join(tried)})")
    rec.retry()
    return rec.finish()


def sc_service_shutdown(ctx: Context) -> Observation:
    ws = workspace(ctx, "service_shutdown")
    rec = Recorder(ctx, "service_shutdown", ws, {"cancel_source": "service_shutdown", "exit_code": 130})
    rec.before()
    obs = cli_observation(rec, cli_build(ctx, ws, signal_at_phase=ctx.middle, sig=signal.SIGTERM))
    obs.fault = real(f"SIGTERM to a running `trtls build` process at phase start {ctx.middle}")
    rec.retry()
    return rec.finish()


# -- SIGTERM to a real language server ----------------------------------------------------------------------
def sc_server_shutdown(ctx: Context) -> Observation:
    rec = asyncio.run(_server_sigterm(ctx))
    rec.retry()
    return rec.finish()


async def _server_sigterm(ctx: Context) -> Recorder:
    name = "server_shutdown"
    ws = workspace(ctx, name)
    rec = Recorder(ctx, name, ws, {"cancel_source": "service_shutdown"})
    rec.before()
    hist = _history(ws)
    client = LspClient()
    await client.start(ws, ctx.scratch / f"{name}-server.log", within=ctx.scratch)
    found: Summary | SummaryProblem | None = None  # the build's summary.json, read once the server is gone
    try:
        await client.initialize(ws)
        build_id, worker_pid = await client.build_past_phase(ws, ctx.engine, ctx.middle, timeout=600)
        assert client.proc is not None
        signal_child(client.proc, signal.SIGTERM)  # the server this scenario started, not yet reaped
        code = await asyncio.wait_for(client.proc.wait(), timeout=600)
        rec.obs.extra["exit_code"] = code
        path = ws / ".trtls" / "runs" / build_id / "summary.json"
        found = read_summary(path) if path.is_file() else None
        live = [t.get("phases") or [] for t in client.build_trees(build_id)]
        summary = found if isinstance(found, Summary) else None
        had = bool((hist.get(None if summary is None else summary.buildConfigHash) or {}).get("phases"))
    finally:
        await client.close()
    rec.after(summary, {"live": live, "history_had_baselines": had}, pids=[client.pid or 0, worker_pid or 0])
    rec.obs.fault = real("SIGTERM to a running `trtls serve` (over stdio, building through trtls.buildEngine)")
    if found is None:
        rec.obs.error = "the language server exited without writing the build's summary.json"
    elif isinstance(found, SummaryProblem):
        rec.obs.error = str(found)
    return rec


# -- a real full disk ------------------------------------------------------------------------------------------
def mount_namespace_works(scratch: Path) -> str | None:
    """None when this process may mount a tmpfs in a private mount namespace; otherwise why not."""
    if shutil.which("unshare") is None:
        return "no `unshare` command"
    probe = scratch / "tmpfs-probe"
    ensure_folder(probe, within=scratch)
    r = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(probe)],
        capture_output=True,
        text=True,
    )
    remove_tree(probe, kind=Kind.scratch, within=scratch)  # empty: the tmpfs went with the namespace
    return None if r.returncode == 0 else f"unshare -m + mount tmpfs refused: {r.stderr.strip()[:200]}"


def sc_disk_full(ctx: Context) -> Observation:
    size = (ctx.baseline.engineArtifact or {}).get("size") or (1 << 21)
    why_not = mount_namespace_works(ctx.scratch)
    if why_not is not None:  # the simulation: a file-size limit in the worker (EFBIG, not ENOSPC)
        limit = max(4096, min(1 << 20, size // 2))
        obs = in_process_stop(ctx, "disk_full", None, faults={"fsize_limit_bytes": limit}, expect={"outcome": "failed"})
        obs.fault = simulated(f"RLIMIT_FSIZE {limit} bytes in the worker (a real full filesystem needs: {why_not})")
        return obs
    ws = workspace(ctx, "disk_full")
    rec = Recorder(ctx, "disk_full", ws, {"cancel_source": None, "outcome": "failed", "error_has": "No space left"})
    rec.before()
    folder = rec.paths["output"].parent
    # Room for the previous engine and half of a new one: the new engine's temp file fills the disk.
    tmpfs = size + size // 2
    prefix = ["unshare", "-m", "--propagation", "private", sys.executable, "-m", "trtls.accept.probe", "in-tmpfs"]
    prefix += [str(rec.paths["output"]), str(tmpfs), str(ctx.scratch), "--"]
    run = cli_build(ctx, ws, prefix=prefix)
    inside = _tmpfs_report(run["other"])
    obs = cli_observation(rec, run)
    obs.fault = real(f"`unshare -m` + tmpfs of {tmpfs} bytes on {folder.name}/ holding the {size}-byte previous engine")
    if inside is None:
        obs.error = f"the tmpfs wrapper reported nothing: {run['stderr'][-300:]}"
        return rec.finish()
    # What was in the full filesystem when the build ended (it vanishes with the namespace).
    obs.engine_sha_after = inside.get("engine_sha256")
    obs.leftovers = sorted(set(obs.leftovers) | set(inside.get("temp_files") or []))
    obs.pids.append(inside.get("cli_pid") or 0)
    said = Summary.written(obs.summary or {}).error
    obs.extra["note"] = f"tmpfs {inside.get('size')} bytes, {inside.get('free_after')} free after: {said}"
    rec.retry()
    return rec.finish()


def _tmpfs_report(lines: list[str]) -> dict[str, Any] | None:
    for line in reversed(lines):
        if line.startswith('{"type": "tmpfs"'):
            return parse_json(line)
    return None


# -- a network whose types change ---------------------------------------------------------------------------
def sc_typed_network_change(ctx: Context) -> Observation:
    ws = workspace(ctx, "typed_network_change")
    base_net = ctx.baseline.network.record() if ctx.baseline.network else {}  # the expectation, as recorded
    rec = Recorder(
        ctx,
        "typed_network_change",
        ws,
        {
            "cancel_source": None,
            "outcome": "built",
            "config_hash_differs_from": ctx.baseline.buildConfigHash,
            "network_differs_from": base_net,
            "no_baselines": True,
        },
    )
    changed = retype_io(rec.paths["onnx"], "FLOAT16", within=ctx.scratch)
    rec.before()
    summary, build, extra = build_sync(ws, ctx.engine)
    rec.after(summary, extra)
    net = summary.network
    rec.obs.fault = real(f"the ONNX's inputs/outputs retyped to float16 with Casts ({', '.join(changed)})")
    rec.obs.extra["note"] = (
        f"network types {base_net.get('inputs')}→{net.inputs if net else None}, strongly typed "
        f"{net.stronglyTyped if net else None}"
    )
    return rec.finish()


def retype_io(onnx_path: Path, dtype: str, *, within: Path) -> list[str]:
    """Give every float32 graph input and output another element type, with Casts at the boundary: the same
    computation, but a strongly-typed network whose types differ (what a precision change does to a network).
    The scratch copy of the model is rewritten inside `within` (weights inline, as `onnx.load` read them)."""
    from onnx import TensorProto, helper

    model = load_onnx(onnx_path)
    g, to = model.graph, getattr(TensorProto, dtype)
    changed = []
    for vi in g.input:
        if vi.type.tensor_type.elem_type != TensorProto.FLOAT:
            continue
        inner = vi.name + "__fp32"
        for node in g.node:
            node.input[:] = [inner if i == vi.name else i for i in node.input]
        g.node.insert(0, helper.make_node("Cast", [vi.name], [inner], name=inner, to=TensorProto.FLOAT))
        vi.type.tensor_type.elem_type = to
        changed.append(f"input {vi.name}")
    for vo in g.output:
        if vo.type.tensor_type.elem_type != TensorProto.FLOAT:
            continue
        inner = vo.name + "__fp32"
        for node in g.node:
            node.output[:] = [inner if o == vo.name else o for o in node.output]
        g.node.append(helper.make_node("Cast", [inner], [vo.name], name=vo.name + "__cast", to=to))
        vo.type.tensor_type.elem_type = to
        changed.append(f"output {vo.name}")
    atomic_write_bytes(onnx_path, model.SerializeToString(), kind=Kind.scratch, within=within)
    return changed


# -- a deeper tactic search, if this machine has one -----------------------------------------------------------
DEEP_SETTINGS = {"optimization_level": 5}


def builder_work(summary: Summary) -> dict[str, Any]:
    """What the builder did, by count (not by time: time varies with load): phases and their declared steps."""
    tree = summary.phaseTree or []
    return {"phases": len(tree), "steps": sum(int(p.get("numSteps") or 0) for p in tree)}


def sc_deep_tactics(ctx: Context) -> Observation:
    base = builder_work(ctx.baseline)
    level = (ctx.baseline.effectiveSettings or {}).get("optimization_level")
    ws = workspace(ctx, "deep_tactics_probe")
    deep, _, _ = build_sync(ws, ctx.engine, overrides={"settings": DEEP_SETTINGS})
    work = builder_work(deep)
    measured = (
        f"level {level}: {base['phases']} phases / {base['steps']} steps; "
        f"{DEEP_SETTINGS}: {work['phases']} phases / {work['steps']} steps"
    )
    if deep.outcome != "built" or work == base:
        obs = Observation(
            "deep_tactics",
            skipped=f"cannot be reproduced here: {measured} "
            "(the builder did no more work; TensorRT-RTX on the CPU times no tactics)",
        )
        obs.summary = obs.summary_on_disk = deep.record()
        obs.fault = real(f"probe build with {DEEP_SETTINGS}: {measured}")
        return obs
    obs = in_process_stop(ctx, "deep_tactics", "api", overrides={"settings": DEEP_SETTINGS})
    obs.fault = real(f"{DEEP_SETTINGS}, shown to change the builder's work here ({measured}); API cancel mid-build")
    return obs


# -- a timing cache trtls did not write ----------------------------------------------------------------------
def sc_corrupted_cache(ctx: Context) -> Observation:
    ws = workspace(ctx, "corrupted_cache")
    rec = Recorder(
        ctx,
        "corrupted_cache",
        ws,
        {
            "cancel_source": None,
            "outcome": "built",
            "cache_decisions": ["quarantined", "not_applicable", "reused", "cold"],
            "cache_reason_has": "not written by trtls",
            "no_raw_errors": True,
        },
    )
    cache = rec.paths.get("timing_cache")
    if cache is None:
        rec.obs.skipped = "the engine has no timing_cache in the recipe"
        return rec.obs
    ensure_folder(cache.parent, within=ctx.scratch)
    noise = random.Random(12).randbytes(3000)  # no sidecar: trtls never wrote it
    atomic_write_bytes(cache, noise, kind=Kind.scratch, within=ctx.scratch)
    rec.before()
    summary, build, extra = build_sync(ws, ctx.engine)
    rec.after(summary, extra)
    reason = (summary.timingCache or {}).get("reason", "")
    rec.obs.fault = real("3000 random bytes at the cache path, no sidecar (a cache another tool left)")
    rec.obs.extra["note"] = f"what could be told: {reason}"
    return rec.finish()


def in_tmpfs(output: str, size: int, within: str, cmd: list[str]) -> int:
    """Inside a private mount namespace: put a tmpfs of `size` bytes over the output's folder (keeping its
    files), run `cmd`, then report on stdout what the full filesystem holds (it vanishes with the namespace).
    Every write stays inside `within` (the run's scratch folder)."""
    import hashlib

    src = Path(output).parent
    folder = str(src)
    held = [p for p in src.iterdir() if p.is_file() and not p.is_symlink()] if src.is_dir() else []
    keep = {p.name: read_bytes(p, limit=None) for p in held}
    ensure_folder(src, within=within)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", folder], check=True)
    for name, data in keep.items():
        atomic_write_bytes(src / name, data, kind=Kind.scratch, within=within)
    child = subprocess.Popen(cmd)
    code = child.wait()
    files = {p.name: p for p in src.iterdir() if p.is_file()}
    engine = files.get(Path(output).name)
    st = os.statvfs(folder)
    report = {
        "type": "tmpfs",
        "size": size,
        "cli_pid": child.pid,
        "free_after": st.f_bavail * st.f_frsize,
        "engine_sha256": hashlib.sha256(read_bytes(engine, limit=None)).hexdigest() if engine else None,
        "temp_files": sorted(str(p) for n, p in files.items() if re.search(r"\.trtls-tmp-|\.tmp$", n)),
    }
    print(json.dumps(report), flush=True)
    return code
