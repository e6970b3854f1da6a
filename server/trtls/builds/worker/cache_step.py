"""The worker's timing-cache step: the cache read and handed to TensorRT before the build (`load`), merged and written
back after the engine is committed (`write_back`), and the `cache_decision` event that says which (builds/timing_cache
decides; builds/worker/adapter_timing_cache makes the TensorRT calls)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trtls.builds import timing_cache as tc

if TYPE_CHECKING:
    from trtls.builds.worker.build import Worker
    from trtls.builds.worker.emitter import EventWriter


def spec_now(worker: Worker) -> dict[str, Any] | None:
    """The job's timing cache as the build may read it, decided before TensorRT's builder starts."""
    spec = worker.job.get("timing_cache")
    if spec and os.path.lexists(spec["path"]) and worker.never_committed():
        # sent ahead of the check (hold_commit): a cache on disk may be quarantined when read, so it is read only
        # once the supervisor has checked the job; a build never allowed to commit reads none
        return None
    return spec or None


def load(
    worker: Worker, bm: Any, adapter: Any, config: Any, environment: dict, effective: dict, spec: dict[str, Any] | None
) -> tc.CachePlan:
    """The cache decision (builds/timing_cache.plan_cache) for `spec` (`spec_now`), and the cache's bytes handed to
    TensorRT: before the build where the builder reads them; after it where it cannot (TensorRT-RTX: the decision,
    and a changed file's quarantine, are all there is, and they wait for the environment record, which the builder
    does not: builds/worker/build.py)."""
    supported = adapter.timing_cache_supported(bm)
    identity = tc.cache_identity(environment, effective)
    path = Path(spec["path"]) if spec else None
    mode, level = spec["mode"] if spec else "off", effective.get("optimization_level", 3)
    root = Path(spec["write_root"]) if spec and spec.get("write_root") else None  # judged at load, not now
    plan = tc.plan_cache(path, mode, identity, supported, level, worker.quarantine_dir, within=root)
    if plan.data is not None:
        # Corruption never raises: it is logged as an ERROR plus WARNINGs, so capture them all here,
        # and say once what they mean rather than passing raw driver errors to the user's terminal.
        worker.held_logs = []
        try:
            cache = adapter.create_timing_cache(config, plan.data)
            ok = adapter.set_timing_cache(config, cache, False)
            worker.log_sync()
        finally:
            logged, worker.held_logs = worker.held_logs, None
        plan = tc.after_load(plan, logged, ok, worker.quarantine_dir)
        if logged:
            worker.writer.emit(
                "log",
                severity="WARNING",
                msg=f"trtls: reading the timing cache {plan.path}: {plan.reason} "
                f"(TensorRT logged {len(logged)} line(s) while reading it, first: {logged[0][:160]!r})",
            )
        if plan.decision == "quarantined":  # start again from an empty cache
            adapter.set_timing_cache(config, adapter.create_timing_cache(config, b""), False)
    return plan


def emit(writer: EventWriter, plan: tc.CachePlan, written: bool) -> None:
    writer.emit(
        "cache_decision",
        decision=plan.decision,
        reason=plan.reason,
        path=str(plan.path) if plan.path else None,
        identity=plan.identity,
        written_back=written,
        quarantined_to=plan.quarantined_to,
    )


def write_back(adapter: Any, bm: Any, config: Any, plan: tc.CachePlan) -> tuple[tc.CachePlan, bool]:
    """After the engine is committed: the build's cache merged with the one on disk and written back (mode
    read_write, a builder that keeps one)."""
    supported = adapter.timing_cache_supported(bm)

    def new_cache_bytes() -> bytes:
        return adapter.serialize_timing_cache(config.get_timing_cache())

    def combine(old: bytes, new: bytes) -> bytes | None:
        a = adapter.create_timing_cache(config, old)
        b = adapter.create_timing_cache(config, new)
        return adapter.serialize_timing_cache(a) if adapter.combine_timing_cache(a, b) else None

    return tc.after_build(plan, "built", supported, new_cache_bytes, combine)
