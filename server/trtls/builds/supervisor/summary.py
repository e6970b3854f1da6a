"""The evidence record of a finished build (`summary.json`): what was built, how it ended, how fast a cancel was
honoured, what the cache decided, and what a retry should do."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trtls import __version__
from trtls.builds.artifacts import sha256_file
from trtls.builds.supervisor.build import Build
from trtls.builds.supervisor.history import History
from trtls.core.build_state import CacheDiscarded, EngineCheck
from trtls.core.builder_errors import classify_failure
from trtls.core.capability import build_capability
from trtls.core.events import Artifact, CacheDecisionEvent
from trtls.core.evidence import UNKNOWN, gpu_sku, retry_advice, validation_status
from trtls.core.phase_tree import NS
from trtls.core.write_policy import job_writes_outside

ENVELOPE = {"v", "type", "t_ns"}  # an event's protocol fields: not in the record of what it said


def resources_record(build: Build) -> dict[str, Any]:
    """Peak RSS, GPU memory and (for a killed build) the OOM verdict (trtls.builds.supervisor.resources)."""
    reported = build.finished.peak_rss_bytes if build.finished is not None else None
    if build.resources is not None:
        return build.resources.record(reported, build.outcome or "killed", build.exit_code)
    if build.remote is None:
        return {"peakRssBytes": None, "how": "no worker was started", "gpuMemory": None}
    out: dict[str, Any] = {  # a node's processes cannot be sampled from this host
        "peakRssBytes": reported,
        "how": "the worker's getrusage on its node" if reported else "not measured: the worker ran on a node",
        "gpuMemory": {"peakGpuMemoryBytes": None, "how": "unknown: not sampled on remote nodes"},
    }
    if build.outcome == "killed":
        out["oom"] = {"oomKill": None, "how": "the worker ran on a remote node: this host cannot tell"}
    return out


def engine_validity_record(build: Build) -> dict[str, Any] | None:
    """Will the built engine load on this machine's GPU (builds.worker.engine_validity, asked by the worker); None when
    nothing was built."""
    if build.outcome != "built":
        return None
    sent = build.finished.engine_validity if build.finished is not None else None
    return sent or {"status": "not_checked", "reason": "the worker did not ask (an external worker)", "diagnostics": []}


def capability_record(build: Build) -> dict[str, Any]:
    """What TensorRT said of the model in this build (the worker's `build_finished.capability`: its parser's answer
    and, after a failed build, the builder's), in the words of `trtls check --capability`'s answer."""
    env = build.environment
    module = " ".join(str(p) for p in (env.module, env.version) if p) or None
    sent = build.finished.capability if build.finished is not None else None
    return build_capability(build.outcome, sent, bool(build.config_hash), module)


def model_read(build: Build) -> dict[str, Any]:
    """The model the build read, for a record of any outcome: `modelPath` (the job's `onnx`) and `modelSha256`, so a
    record says whether the model changed since even when no engine or known-good record came of it. The digest is
    the store key's when there is one: the key hashed the model through the stat-keyed digest cache
    (`store.key.file_sha256`, the recipe's `.trtls/digests.json`), so an unchanged model is stat'ed, not read; with
    no key (an external worker, injected faults) or a model too new to be cached, it is hashed now, after the worker
    is gone — never on the way to the worker's job. A model written after the build started is not vouched for
    (either version may be the one read): None, as for a model that is gone."""
    from trtls.builds.supervisor.job import state_dir
    from trtls.store.key import KeyUnavailable, file_sha256

    onnx = build.job.get("onnx")
    if not isinstance(onnx, str) or not onnx:
        return {"modelPath": None, "modelSha256": None}
    path = Path(onnx)
    sha = None
    try:
        if path.stat().st_mtime <= build.started_at:  # follows a link as the worker's read does
            sha = file_sha256(path, state_dir(build.recipe_path))
    except (KeyUnavailable, OSError, ValueError):  # gone, or unreadable
        sha = None
    return {"modelPath": str(path), "modelSha256": sha}


def timing_cache_record(build: Build) -> dict[str, Any]:
    """summary.json's `timingCache`: the worker's decision as it sent it, the supervisor's `discarded` for a worker
    terminated before it decided, or why there was none."""
    cache = build.cache
    if isinstance(cache, CacheDecisionEvent):
        return cache.model_dump(exclude=ENVELOPE)
    if isinstance(cache, CacheDiscarded):
        return {"decision": cache.decision, "reason": cache.reason, "path": cache.path, "written_back": False}
    if not build.job.get("timing_cache"):
        return {"decision": "cold", "reason": "no timing cache configured"}
    return {
        "decision": "not_applicable",
        "reason": "the build ended before the timing cache was read; the file was not touched",
    }


def artifact_rows(artifacts: list[Artifact], checks: tuple[EngineCheck, ...]) -> list[dict[str, Any]]:
    """summary.json's `artifacts`: each row as its event said it (no empty fields), a written engine's with what its
    re-read found (the sha on disk in `sha256`, the worker's kept as `reportedSha256`)."""
    rows = [artifact.model_dump(exclude=ENVELOPE, exclude_none=True) for artifact in artifacts]
    for check in checks:
        row = rows[check.index]
        if check.verified is not None:  # re-read, or tried: the file on disk says the sha
            row["sha256"] = check.on_disk
        row.update(reportedSha256=check.reported, verified=check.verified, how=check.how)
    return rows


def build_summary(build: Build, t_end: int, history: History, model: dict[str, Any] | None = None) -> dict[str, Any]:
    """The record of the build that ended at `t_end`; `model`: `model_read(build)`, computed off the event loop by
    the caller (computed here when not given)."""
    env = build.environment
    cache = timing_cache_record(build)
    artifacts = artifact_rows(build.artifacts, build.engine_checks)
    intact = None  # previous_engine_sha: settled by Build.previous_sha() before the summary is written
    previous = None  # core.display.previous_engine_state: what the faces say of the engine that was there
    if build.previous_engine_sha is not None and build.outcome != "built":
        intact = build.output.is_file() and sha256_file(build.output) == build.previous_engine_sha
        previous = "intact" if intact else "changed"
    elif build.outcome != "built":
        # never hashed: the build ended before it held the output (it waited for another build of it, or was stopped
        # first) and so never touched it — not "no previous engine" when one is there
        previous = "not_inspected" if build.output.is_file() else "absent"
    engine_written = [a for a in artifacts if a["kind"] == "engine" and a["action"] == "written"]
    repeated = (
        history.repeated_stop_phase(build.config_hash) if build.config_hash and build.outcome != "built" else None
    )
    if repeated is not None and repeated in build.tree.phases:
        repeated = f"{build.tree.phases[repeated].name} ({repeated})"
    resources = resources_record(build)
    # also for external workers, which only send the log; memory exhaustion first (core.builder_errors)
    failure = classify_failure(
        build.outcome or "killed", build.failure, build.logs, build.error, list(build.stderr_tail), resources
    )
    advice = retry_advice(
        build.outcome or "killed", cache.get("decision"), bool(intact), repeated, failure, build.engine
    )
    lat = build.token.latencies_ms()
    seen = None
    if build.cancel_seen_ns and build.token.t_ack_ns:
        seen = round((build.token.t_ack_ns - build.cancel_seen_ns) / 1e6, 3)
    return {
        "framework": "trtls",
        "trtlsVersion": __version__,
        "buildId": build.id,
        "engine": build.engine,
        "recipe": str(build.recipe_path),
        **(model if model is not None else model_read(build)),
        "outcome": build.outcome,
        "error": build.error,
        "tensorrtVersion": env.version or UNKNOWN,
        "builderModule": env.module,
        "language": env.language,  # python when the worker does not say (its default)
        "buildConfigHash": build.config_hash,
        "gpuSku": gpu_sku(env.record()),
        "computeCapability": env.compute_capability,
        "target": build.target.record() or None,  # the keys the worker sent, as sent; null when it sent none
        "network": build.network.record() or None,
        "effectiveSettings": build.effective_settings,
        "optimizationProfiles": build.optimization_profiles,
        "precision": build.precision,
        "failure": failure.record() if failure is not None else None,  # the keys it was given, as given
        "timingCacheMode": cache.get("decision"),
        "timingCache": cache,
        "cancelSource": build.token.source,
        "cancelLatencyMs": lat["cancelLatencyMs"],
        "cancelReturnAfterSeenMs": seen,  # builder return minus the callback that saw the cancel
        "cleanupLatencyMs": lat["cleanupLatencyMs"],
        "cleanupStatus": build.cleanup_status,
        "forced": build.token.forced,
        "cancelAfterComplete": build.token.after_complete,
        "laterCancelRequests": [{"source": s, "tNs": t} for s, t in build.token.later_requests],
        "retryPolicy": advice.policy,
        "retryRule": advice.rule,
        "validationStatus": validation_status(build.outcome or "killed"),
        "validationNote": "a finished build does not prove the engine correct; parity is checked by the route gates",
        "engineArtifact": engine_written[0] if engine_written else None,
        "engineValidity": engine_validity_record(build),
        "capability": capability_record(build),
        "previousEngineIntact": intact,
        "previousEngine": previous,
        "artifacts": artifacts,
        "notes": build.notes,
        "startedAt": build.started_at,
        "durationS": round((t_end - build.t_start_ns) / NS, 3),
        "outputCheck": build.output_check,
        "writesOutside": job_writes_outside(build.recipe_path, build.job),  # allowed by the recipe's allow_outside
        "resources": resources,
        "workerPid": build.pid,
        "workerExitCode": build.exit_code,
        "stderrTail": list(build.stderr_tail)[-10:],
        "cell": build.cell,
        "parentId": build.parent_id,
        "node": build.node_view(t_end) if build.remote is not None else None,
        "logs": build.logs[-50:],
        "environment": env.record(),  # the keys the worker sent, as sent
        "phaseTree": build.tree.snapshot(t_end, build.baselines, build.t_start_ns),
        "events": "events.jsonl",
    }
