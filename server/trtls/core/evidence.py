"""The evidence record of one build, and the rule that turns an outcome into retry advice.

`summary.json` carries at least the stuck-build summary fields of the runbook (framework,
tensorrtVersion, language, buildConfigHash, gpuSku, timingCacheMode, cancelSource, cancelLatencyMs,
cleanupStatus, retryPolicy, validationStatus). A build never claims the engine is correct:
validationStatus is `pending` after a good build (nothing has run it) and `not_applicable` otherwise.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from trtls.core.protocol import CANCEL_SOURCES

SEED_FIELDS = (
    "framework",
    "tensorrtVersion",
    "language",
    "buildConfigHash",
    "gpuSku",
    "timingCacheMode",
    "cancelSource",
    "cancelLatencyMs",
    "cleanupStatus",
    "retryPolicy",
    "validationStatus",
)
RETRY_POLICIES = ("not_needed", "retry_cold", "retry_with_cache", "rollback", "investigate")
CACHE_DECISIONS = ("cold", "reused", "updated", "discarded", "quarantined", "not_applicable")
CLEANUP_STATUSES = ("cleaned", "quarantined", "failed", "not_needed")
VALIDATION_STATUSES = ("not_applicable", "pending", "pass", "fail")
OUTCOMES = ("built", "cancelled", "failed", "forced", "killed")
LANGUAGES = ("python", "cpp")
UNKNOWN = "unknown"  # a figure that was not measured (never a guess)
NO_DEVICE = "no device"  # measured: the CUDA driver answered no device, or there is no CUDA driver
SHA256 = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class RetryAdvice:
    policy: str
    rule: str


def retry_advice(
    outcome: str,
    cache_decision: str | None,
    previous_engine_intact: bool,
    repeated_stop_phase: str | None = None,
    failure: dict[str, Any] | None = None,
) -> RetryAdvice:
    """First matching rule wins; the rule text goes into the evidence so people can see why."""
    if outcome == "built":
        return RetryAdvice("not_needed", "the build succeeded")
    kind = (failure or {}).get("kind")
    if outcome == "failed" and kind == "internal_error":
        layer = (failure or {}).get("layer")
        at = f" at layer {layer}" if layer else ""
        what = "that layer or its opset" if layer else "the model's export (opset, control flow such as If/Loop)"
        return RetryAdvice(
            "investigate",
            f"TensorRT hit an internal error{at}: a blind retry fails the same way. Change what the builder sees "
            f"({what}, precision, memory pool limits, optimization level) or the TensorRT version, "
            "and report it to NVIDIA with this evidence folder",
        )
    if outcome in ("failed", "killed") and kind == "out_of_memory":  # core.builder_errors.memory_exhaustion
        return RetryAdvice("investigate", str((failure or {}).get("advice")))
    if outcome == "failed" and kind in ("setting", "plugin", "precision"):
        return RetryAdvice(
            "investigate",
            f"the build configuration could not be applied ({kind}): fix the recipe; a retry fails the same way",
        )
    if outcome == "killed":
        return RetryAdvice(
            "investigate", "the worker died by itself (OOM killer or crash); the same build is likely to die again"
        )
    if repeated_stop_phase is not None:
        return RetryAdvice(
            "investigate",
            f"builds keep stopping in phase '{repeated_stop_phase}': retry with a reduced tactic search to diagnose",
        )
    if cache_decision == "quarantined":
        return RetryAdvice("retry_cold", "the timing cache was quarantined as suspect; the next build runs cold")
    if outcome == "failed":
        if previous_engine_intact:
            return RetryAdvice("rollback", "the build failed and the previous good engine is intact: keep serving it")
        return RetryAdvice("investigate", "the build failed and there is no previous engine to fall back on")
    if outcome == "forced":
        return RetryAdvice(
            "retry_cold", "the builder ignored the cooperative cancel and was terminated; its state is not trusted"
        )
    if cache_decision in ("reused", "updated", "discarded"):
        return RetryAdvice(
            "retry_with_cache", "the cancelled build never wrote its cache back, so the existing cache is still trusted"
        )
    return RetryAdvice("retry_cold", "there is no trusted timing cache to reuse")


def validation_status(outcome: str) -> str:
    return "pending" if outcome == "built" else "not_applicable"


def missing_seed_fields(summary: dict[str, Any]) -> list[str]:
    return [k for k in SEED_FIELDS if k not in summary]


def gpu_sku(environment: dict[str, Any]) -> str:
    """The device that was measured, `no device` when the probe ran and found none, `unknown` when the
    environment was never captured (the worker died first)."""
    if not environment or not environment.get("module"):
        return UNKNOWN
    return environment.get("device_name") or NO_DEVICE


def build_target(environment: dict[str, Any], effective: dict[str, Any]) -> dict[str, Any]:
    """What the engine is built for: part of the buildConfigHash, so durations measured for one target are
    never shown as the usual duration on another. TensorRT-RTX builds for the listed compute capabilities;
    full TensorRT builds for the device it runs on (and, with a hardware-compatibility level, for a family)."""
    return {
        "computeCapabilities": effective.get("compute_capabilities") or "builder default",
        "hardwareCompatibilityLevel": effective.get("hardware_compatibility_level") or "builder default",
        "device": environment.get("device_name"),
        "deviceComputeCapability": environment.get("compute_capability"),
    }


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0


def record_problems(s: dict[str, Any]) -> list[str]:
    """What is wrong with one evidence record: missing runbook fields, wrong types, nulls where the runbook
    needs a value, and fields that contradict each other. Empty when the record holds together."""
    problems = [f"lacks {k}" for k in missing_seed_fields(s)]
    if problems:
        return problems
    outcome = s.get("outcome")
    if outcome not in OUTCOMES:
        problems.append(f"outcome {outcome!r} is not one of {', '.join(OUTCOMES)}")
    for key in ("framework", "tensorrtVersion", "gpuSku"):
        if not isinstance(s.get(key), str) or not s[key]:
            problems.append(f"{key} is {s.get(key)!r}, not a non-empty string")
    if s.get("language") not in LANGUAGES:
        problems.append(f"language {s.get('language')!r} is not one of {', '.join(LANGUAGES)}")
    raw_env = s.get("environment")
    env: dict[str, Any] = raw_env if isinstance(raw_env, dict) else {}
    if env.get("module"):
        if s.get("tensorrtVersion") != env.get("version"):
            problems.append(f"tensorrtVersion {s.get('tensorrtVersion')!r} is not the measured {env.get('version')!r}")
        if s.get("gpuSku") != gpu_sku(env):
            problems.append(f"gpuSku {s.get('gpuSku')!r} does not match the measured device ({gpu_sku(env)!r})")
    elif s.get("tensorrtVersion") != UNKNOWN or s.get("gpuSku") != UNKNOWN:
        problems.append("the environment was not captured, yet tensorrtVersion/gpuSku are not 'unknown'")
    h = s.get("buildConfigHash")
    reached_builder = bool(s.get("phaseTree"))
    if h is None:
        if outcome == "built" or reached_builder:
            problems.append("buildConfigHash is null for a build that reached the builder")
    elif not isinstance(h, str) or not SHA256.match(h):
        problems.append(f"buildConfigHash {h!r} is not a sha256")
    if s.get("timingCacheMode") not in CACHE_DECISIONS:
        problems.append(f"timingCacheMode {s.get('timingCacheMode')!r} is not one of {', '.join(CACHE_DECISIONS)}")
    src, lat = s.get("cancelSource"), s.get("cancelLatencyMs")
    if src is not None and src not in CANCEL_SOURCES:
        problems.append(f"cancelSource {src!r} is not a known source")
    if outcome in ("cancelled", "forced") and src is None:
        problems.append(f"a {outcome} build has no cancelSource")
    if src is not None and not _number(lat):
        problems.append(f"cancelled by {src}, but cancelLatencyMs is {lat!r}")
    if src is None and lat is not None:
        problems.append(f"cancelLatencyMs is {lat!r} although nothing cancelled the build")
    problems.extend(_cleanup_problems(s))
    policy = s.get("retryPolicy")
    if policy not in RETRY_POLICIES:
        problems.append(f"retryPolicy {policy!r} is not one of {', '.join(RETRY_POLICIES)}")
    elif (outcome == "built") != (policy == "not_needed"):
        problems.append(f"retryPolicy {policy} contradicts outcome {outcome}")
    v = s.get("validationStatus")
    if v not in VALIDATION_STATUSES:
        problems.append(f"validationStatus {v!r} is not one of {', '.join(VALIDATION_STATUSES)}")
    elif (outcome == "built") != (v != "not_applicable"):
        problems.append(f"validationStatus {v} contradicts outcome {outcome}")
    return problems


def _cleanup_problems(s: dict[str, Any]) -> list[str]:
    """The cleanup status must say what the artifact inventory shows."""
    status = s.get("cleanupStatus")
    if status not in CLEANUP_STATUSES:
        return [f"cleanupStatus {status!r} is not one of {', '.join(CLEANUP_STATUSES)}"]
    temps = [a for a in s.get("artifacts") or [] if isinstance(a, dict) and a.get("kind") == "temp"]
    actions = {a.get("action") for a in temps}
    want = "failed" if "kept" in actions else "quarantined" if "quarantined" in actions else None
    if want is not None and status != want:
        return [f"cleanupStatus {status} but the inventory shows a temp file {want}"]
    if status in ("failed", "quarantined") and want != status:
        return [f"cleanupStatus {status} but the inventory has no temp file {status}"]
    if status == "not_needed" and temps:
        return [f"cleanupStatus not_needed but the inventory lists {len(temps)} temp file(s)"]
    if status == "not_needed" and s.get("outcome") in ("cancelled", "forced", "killed"):
        return [f"cleanupStatus not_needed for a {s.get('outcome')} build (a stopped build always cleans up)"]
    return []
