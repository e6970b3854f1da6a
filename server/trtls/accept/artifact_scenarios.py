"""Acceptance scenarios about what a build leaves on disk: the cold cache, a full disk, a read-only output, a
changed network or GPU target, a corrupted or concurrently written timing cache."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from trtls.accept.criteria import Observation
from trtls.accept.runner import (  # the harness
    Context,
    Recorder,
    build_sync,
    real_cache_bytes,
    workspace,
)
from trtls.builds.timing_cache import identity_path, save_merged
from trtls.fs import Kind, atomic_write_bytes, chmod, ensure_folder, parse_json, read_bytes, read_text, remove_file
from trtls.fs.attrs import set_immutable
from trtls.fs.models import load_onnx

CACHE_LIMIT = 1 << 30  # a timing cache of one scratch build; its sidecar is a few hundred bytes


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
    return rec.finish()


def sc_readonly_output(ctx: Context) -> Observation:
    ws = workspace(ctx, "readonly_output")
    rec = Recorder(ctx, "readonly_output", ws, {"cancel_source": None, "outcome": "failed", "error_has": "TRT405"})
    folder = rec.paths["output"].parent
    how = _make_readonly(folder, ctx.scratch)
    if how is None:
        rec.obs.skipped = (
            "running as root and `chattr +i` is not available or not supported by this filesystem: "
            "nothing here makes a folder unwritable for root"
        )
        return rec.obs
    try:
        rec.before()
        summary, build, extra = build_sync(ws, ctx.engine)
    finally:
        _undo_readonly(folder, how, ctx.scratch)
    rec.after(summary, extra)
    rec.obs.extra["note"] = f"output folder made unwritable with {how}: {summary.error}"
    rec.retry()
    return rec.finish()


def _make_readonly(folder: Path, within: Path) -> str | None:
    """Make the scratch output folder unwritable (a hostile state, made through the door inside `within`, the
    run's scratch folder): the immutable flag (`chattr +i`, `fs.attrs.set_immutable`) when it holds even for root,
    else mode 0555 for a non-root user."""
    ensure_folder(folder, within=within)
    if set_immutable(folder, True, kind=Kind.scratch, within=within):
        probe = folder / ".trtls-accept-probe"
        try:
            atomic_write_bytes(probe, b"x", kind=Kind.scratch, within=within)
            remove_file(probe, kind=Kind.scratch, within=within)
            set_immutable(folder, False, kind=Kind.scratch, within=within)
        except OSError:
            return "chattr +i"
    if os.geteuid() != 0:
        chmod(folder, 0o555, kind=Kind.scratch, within=within)
        return "chmod 0555"
    return None


def _undo_readonly(folder: Path, how: str, within: Path) -> None:
    if how == "chattr +i":
        set_immutable(folder, False, kind=Kind.scratch, within=within)
    else:
        chmod(folder, 0o755, kind=Kind.scratch, within=within)


def sc_network_change(ctx: Context) -> Observation:
    ws = workspace(ctx, "network_change")
    rec = Recorder(
        ctx,
        "network_change",
        ws,
        {"cancel_source": None, "outcome": "built", "config_hash_differs_from": ctx.baseline.buildConfigHash},
    )
    _change_network(rec.paths["onnx"], ctx.scratch)
    rec.before()
    summary, build, extra = build_sync(ws, ctx.engine)
    rec.after(summary, extra)
    same_identity = (summary.timingCache or {}).get("identity") == (ctx.baseline.timingCache or {}).get("identity")
    rec.obs.extra["note"] = (
        "the cache identity does not include the network (TensorRT timing caches are per layer, shareable across "
        "networks), so it is unchanged; "
        "the buildConfigHash changed, so history baselines of the old network were not applied"
        if same_identity
        else "the cache identity changed with the network"
    )
    rec.retry()
    return rec.finish()


def _change_network(onnx_path: Path, within: Path) -> None:
    """The same graph with different weights: another network for the builder, valid ONNX (the scratch copy,
    rewritten inside `within` with its weights inline, as `onnx.load` read them)."""
    from onnx import numpy_helper

    model = load_onnx(onnx_path)
    for i, init in enumerate(model.graph.initializer):
        arr = numpy_helper.to_array(init)
        if arr.dtype.kind == "f" and arr.size:
            model.graph.initializer[i].CopyFrom(
                numpy_helper.from_array((arr * 1.5 + 0.01).astype(arr.dtype), init.name)
            )
            break
    else:
        model.doc_string = (model.doc_string or "") + " trtls-accept network_change"
    atomic_write_bytes(onnx_path, model.SerializeToString(), kind=Kind.scratch, within=within)


def sc_new_gpu_target(ctx: Context) -> Observation:
    ws = workspace(ctx, "new_gpu_target")
    old = {"settings": {"compute_capabilities": ["SM89"]}}
    new = {"settings": {"compute_capabilities": ["SM120"]}}
    first, b1, _ = build_sync(ws, ctx.engine, overrides=old)
    if first.outcome != "built":
        obs = Observation("new_gpu_target", error=f"the SM89 build did not succeed: {first.error}")
        return obs
    old_identity = (first.timingCache or {}).get("identity") or {}
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
        save_merged(cache, real_cache_bytes(), old_identity, lambda o, n: None, within=ctx.scratch)
    rec.before()
    summary, build, extra = build_sync(ws, ctx.engine, overrides=new)
    rec.after(summary, extra, pids=[b1.pid or 0])
    rec.obs.extra["note"] = f"SM89 → SM120: decision {summary.timingCacheMode}"
    rec.retry(new)
    return rec.finish()


def sc_tampered_cache(ctx: Context) -> Observation:
    ws = workspace(ctx, "tampered_cache")
    rec = Recorder(
        ctx, "tampered_cache", ws, {"cancel_source": None, "outcome": "built", "cache_decisions": ["quarantined"]}
    )
    cache = rec.paths.get("timing_cache")
    if cache is None:
        rec.obs.skipped = "the engine has no timing_cache in the recipe"
        return rec.obs
    identity = (ctx.baseline.timingCache or {}).get("identity") or {}
    good = real_cache_bytes()
    save_merged(cache, good, identity, lambda o, n: None, within=ctx.scratch)
    bad = bytearray(good[: max(1, len(good) // 2)])
    bad[0] ^= 0xFF  # truncated and flipped
    atomic_write_bytes(cache, bytes(bad), kind=Kind.scratch, within=ctx.scratch)
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
    identity = (ctx.baseline.timingCache or {}).get("identity") or {}
    save_merged(cache, real_cache_bytes(), identity, lambda o, n: None, within=ctx.scratch)
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

    data = read_bytes(cache, limit=CACHE_LIMIT)
    try:
        meta = parse_json(read_text(identity_path(cache), limit=1 << 20))
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
