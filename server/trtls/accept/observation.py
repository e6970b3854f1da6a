"""What one acceptance scenario observed, and the verdict shape a criterion returns (no judging here).

`measured(num, obs)` lists the values criterion `num` judges, so the report can show them beside the verdict.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trtls.core.evidence import record_problems

PASS, FAIL, NA, NOT_CHECKED = "pass", "fail", "n/a", "not_checked"


@dataclass
class Verdict:
    status: str  # pass | fail | not_checked | n/a
    message: str
    measured: dict[str, Any] = field(default_factory=dict)  # the values this verdict judged

    @property
    def ok(self) -> bool:
        return self.status in (PASS, NA)


@dataclass
class Observation:
    """Everything one scenario saw. `expect` says what the scenario set out to provoke."""

    scenario: str
    expect: dict[str, Any] = field(default_factory=dict)
    # expect keys: cancel_source (str|None), forced (bool), outcome (str), killed (bool),
    # cache_decisions (list), config_hash_differs_from (str), identity_differs_from (dict),
    # cache_consistent (bool), user_told (bool), previous_engine (bool: a good engine existed before)
    events: list[dict[str, Any]] = field(default_factory=list)  # the stopped build's events.jsonl
    live: list[list[dict[str, Any]]] = field(default_factory=list)  # phase-tree snapshots taken while it ran
    history_had_baselines: bool = False  # history held durations for this build's config before it ran
    summary: dict[str, Any] | None = None  # as the face returned it
    summary_on_disk: dict[str, Any] | None = None  # .trtls/runs/<id>/summary.json
    previous_engine_sha: str | None = None
    engine_sha_after: str | None = None
    leftovers: list[str] = field(default_factory=list)  # temp files anywhere in the scratch folder
    cache_path: str | None = None
    cache_sha_before: str | None = None
    cache_sha_after: str | None = None
    retry: dict[str, Any] | None = None  # {policy, action: rebuilt|kept_previous|none, summary, deserializes, ...}
    pids: list[int] = field(default_factory=list)  # every process the scenario started
    alive_pids: list[int] = field(default_factory=list)
    locks: dict[str, bool] = field(default_factory=dict)  # lock file → a non-blocking flock succeeded
    extra: dict[str, Any] = field(default_factory=dict)
    quarantined_exists: bool | None = None  # the quarantined cache file was there when the run ended
    skipped: str | None = None  # the scenario could not run here, and why
    error: str | None = None  # the scenario itself broke (harness error)
    fault: dict[str, str] = field(default_factory=dict)  # {"kind": real|simulated, "how": ...} as produced
    evidence_dir: str | None = None  # the scenario's folder (kept when it failed)


def measured(num: str, obs: Observation) -> dict[str, Any]:
    """The values criterion `num` judged, for the report (so a reader can check the verdict)."""
    s, r = obs.summary or {}, obs.retry or {}
    if num == "1":
        return {
            "phaseStarts": sum(1 for e in obs.events if e.get("type") == "phase_start"),
            "liveSnapshots": len(obs.live),
        }
    if num == "2":
        running = [p for snap in obs.live for p in snap if p.get("status") == "running"]
        quiet = [p["quietForS"] for p in running if p.get("quietForS") is not None]
        return {
            "runningSamples": len(running),
            "maxQuietS": max(quiet, default=None),
            "samplesWithBaseline": sum(1 for p in running if p.get("baselineS") is not None),
            "historyHadBaselines": obs.history_had_baselines,
        }
    if num == "3":
        keys = ("outcome", "cancelSource", "forced", "cancelLatencyMs", "cleanupLatencyMs")
        acks = [e.get("source") for e in obs.events if e.get("type") == "cancel_acknowledged"]
        return {**{k: s.get(k) for k in keys}, "acknowledgedBy": acks[:1], "exitCode": obs.extra.get("exit_code")}
    if num == "4":
        return {
            "outcome": s.get("outcome"),
            "previousEngineSha256": obs.previous_engine_sha,
            "engineSha256After": obs.engine_sha_after,
            "leftovers": obs.leftovers,
        }
    if num == "5":
        cache = s.get("timingCache") or {}
        return {
            "timingCacheMode": s.get("timingCacheMode"),
            "reason": cache.get("reason"),
            "writtenBack": cache.get("written_back"),
            "cacheSha256Before": obs.cache_sha_before,
            "cacheSha256After": obs.cache_sha_after,
            "buildConfigHash": s.get("buildConfigHash"),
        }
    if num == "6":
        rs = r.get("summary") or {}
        return {
            "advised": s.get("retryPolicy"),
            "applied": r.get("policy"),
            "action": r.get("action"),
            "retryOutcome": rs.get("outcome"),
            "previousVerified": r.get("previous_verified"),
            "deserializes": r.get("deserializes"),
        }
    if num == "7":
        disk = obs.summary_on_disk or {}
        return {"problems": record_problems(disk) if obs.summary_on_disk else ["no summary.json"]}
    return {"pids": obs.pids, "alivePids": obs.alive_pids, "locks": obs.locks}
