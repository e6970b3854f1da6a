"""The evidence record of one build, and the rule that turns an outcome into retry advice.

`summary.json` carries at least the stuck-build summary fields of the runbook (framework,
tensorrtVersion, language, buildConfigHash, gpuSku, timingCacheMode, cancelSource, cancelLatencyMs,
cleanupStatus, retryPolicy, validationStatus). A build never claims the engine is correct:
validationStatus is `pending` after a good build (nothing has run it) and `not_applicable` otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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
