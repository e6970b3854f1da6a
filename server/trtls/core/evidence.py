"""The evidence record of one build, and the rule that turns an outcome into retry advice.

`summary.json` carries at least the stuck-build summary fields of the runbook (framework,
tensorrtVersion, language, buildConfigHash, gpuSku, timingCacheMode, cancelSource, cancelLatencyMs,
cleanupStatus, retryPolicy, validationStatus). A build never claims the engine is correct:
validationStatus is `pending` after a good build (nothing has run it) and `not_applicable` otherwise.

Every record kind carries every runbook field (`RUNBOOK_FIELDS`): built, cancelled, failed, forced and killed
(builds.supervisor.summary), recovered (builds.supervisor.orphans), and the records of a run that started no worker —
reused from the
engine store, rolled back — whose builder fields say `not_applicable` (`runbook_without_worker`), so a consumer
parses one schema.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, NamedTuple

from trtls.core.tensorrt_log_words import NO_IMPLEMENTATION, NO_RUNNERS
from trtls.core.vocabulary import (  # the words of each field, which the record's checks below hold it to
    CACHE_DECISIONS,
    CANCEL_SOURCES,
    CLEANUP_STATUSES,
    LANGUAGES,
    NO_WORKER_OUTCOMES,
    NOT_APPLICABLE,
    OUTCOMES,
    RETRY_POLICIES,
    VALIDATION_STATUSES,
)

if TYPE_CHECKING:  # types only: never pydantic at run time (tests/test_layers.py)
    from trtls.core.failure_record import Failure

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
# the runbook's fields and the ones that explain them: every evidence record kind carries all of these
RUNBOOK_FIELDS = (*SEED_FIELDS, "builderModule", "cleanupLatencyMs", "retryRule")
UNKNOWN = "unknown"  # a figure that was not measured (never a guess)
NO_DEVICE = "no device"  # measured: the CUDA driver answered no device, or there is no CUDA driver
SHA256 = re.compile(r"^[0-9a-f]{64}$")


class RetryAdvice(NamedTuple):  # was a frozen dataclass
    policy: str
    rule: str


def retry_advice(
    outcome: str,
    cache_decision: str | None,
    previous_engine_intact: bool,
    repeated_stop_phase: str | None = None,
    failure: Failure | None = None,
    engine: str | None = None,
) -> RetryAdvice:
    """First matching rule wins; the rule text goes into the evidence so people can see why. `engine`: the recipe's
    name for it, in the `trtls reduce --engine …` an internal error's advice names."""
    if outcome == "built":
        return RetryAdvice("not_needed", "the build succeeded")
    kind = failure.kind if failure is not None else None
    if outcome == "failed" and kind == "internal_error":
        layer = failure.layer if failure is not None else None
        at = f" at layer {layer}" if layer else ""
        what = "that layer or its opset" if layer else "the model's export (opset, control flow such as If/Loop)"
        if failure is not None and NO_RUNNERS in (failure.message or ""):
            return RetryAdvice("investigate", _no_runners_advice(at))
        if failure is not None and NO_IMPLEMENTATION in (failure.message or ""):
            return RetryAdvice("investigate", _no_implementation_advice(at, what, engine))
        profile = PROFILE_SHAPES.search(failure.message or "") if failure is not None else None
        if profile is not None:
            return RetryAdvice("investigate", _profile_shapes_advice(profile, engine))
        return RetryAdvice(
            "investigate",
            f"TensorRT hit an internal error{at}: a blind retry fails the same way. {_model_or_profile(engine)} "
            f"Change what the builder sees ({what}, precision, memory pool limits, optimization level) or the "
            f"TensorRT version; {TO_NVIDIA}",
        )
    if outcome in ("failed", "killed") and kind == "out_of_memory":  # core.builder_errors.memory_exhaustion
        return RetryAdvice("investigate", str(failure.advice if failure is not None else None))
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


def _no_runners_advice(at: str) -> str:
    return (
        f"this TensorRT has no implementation{at}: the build failed while it chose each layer's implementation, "
        "before timing any tactic, so not for lack of memory, and a retry fails the same way. Take that op out of the "
        "engine (run it beside the engine, e.g. NonMaxSuppression in the application), give it a plugin "
        "([engines.NAME.plugins]), or build with a TensorRT version that implements it. `trtls check --capability` "
        "says this before a build (TRT133)"
    )


def _no_implementation_advice(at: str, what: str, engine: str | None) -> str:
    """Memory first, as it is the usual cause — said as "often": no allocation failure was logged, none measured."""
    return (
        f"TensorRT found no implementation{at}: this is often memory, although no allocation failure was logged — "
        "every tactic may need more workspace or GPU memory than it had. Raise "
        "builder.memory_pool_limits.workspace_mib (or remove it to use the device's memory), free GPU memory "
        "(other processes on the device), or try a lower builder.optimization_level; a blind retry fails the same way. "
        f"If it still fails: {_model_or_profile(engine)} Change what the builder sees ({what}, precision) or the "
        f"TensorRT version; {TO_NVIDIA}"
    )


# an internal error by TensorRT's words may still be the model's or its profiles' — never said as TensorRT's alone:
# `trtls reduce` tells them apart (a profile the model cannot take: triage.probe.ProfileShapesRejected; a setting;
# or the smallest model that fails), so the advice points there before NVIDIA (issue 30, item 8)
def _model_or_profile(engine: str | None) -> str:
    return (
        f"The cause may be the model or its profiles as much as TensorRT: {_reduce_command(engine)} tells them apart "
        "(a profile the model cannot take, a setting, or the smallest model that still fails)."
    )


def _reduce_command(engine: str | None) -> str:
    return f"`trtls reduce --engine {engine or '<name>'}`"


TO_NVIDIA = "a reduced model that still fails is the one to send NVIDIA, with this evidence folder"
# TensorRT's "Error Code 4: Internal Error (kOPT values for profile 0 violate shape constraints: p2o.Add.248:
# dimensions not compatible for elementwise …)": internal by name, yet the profile's shapes are what the model cannot
# take (the real PP-OCRv4 detector at a 100×100 opt point; ONNX Runtime cannot run it there either)
PROFILE_SHAPES = re.compile(r"\bk(MIN|OPT|MAX) values for profile (\d+) violate shape constraints(?:: ([^:()]+):)?")


def _profile_shapes_advice(said: re.Match[str], engine: str | None) -> str:
    point, index, node = said.group(1).lower(), said.group(2), said.group(3)
    at = f" (at {node.strip()})" if node else ""
    return (
        f"TensorRT says profile {index}'s {point} shapes violate the model's shape constraints{at}: the likely cause "
        "is the profile, not TensorRT — use shapes the model accepts at min, opt and max; a blind retry fails the "
        f"same way. {_reduce_command(engine)} checks the profile's shapes in ONNX Runtime and tells a profile "
        "the model cannot take from a model or a TensorRT cause"
    )


def validation_status(outcome: str) -> str:
    return "pending" if outcome == "built" else "not_applicable"


def runbook_without_worker(engine_build: dict[str, Any], ok: bool = True, rule: str | None = None) -> dict[str, Any]:
    """The runbook fields of a run that started no worker (a reuse, a rollback). `engine_build`: the record of the
    build that produced the engine it restored (the store entry's, a known-good record), which says what built it.
    What a builder run would have measured (language, device, timing cache, cleanup) is `not_applicable`; nothing
    cancelled it (`cancelSource` null, as in a build nobody stopped). `ok` False: the restore failed, `rule` why."""
    return {
        "framework": "trtls",
        "tensorrtVersion": engine_build.get("tensorrtVersion") or UNKNOWN,
        "builderModule": engine_build.get("builderModule"),
        "language": NOT_APPLICABLE,
        "buildConfigHash": engine_build.get("buildConfigHash"),
        "gpuSku": NOT_APPLICABLE,
        "timingCacheMode": NOT_APPLICABLE,
        "cancelSource": None,
        "cancelLatencyMs": None,
        "cleanupLatencyMs": None,
        "cleanupStatus": NOT_APPLICABLE,
        "retryPolicy": "not_needed" if ok else "investigate",
        "retryRule": "the engine was restored from the engine store" if ok else (rule or "the restore failed"),
        "validationStatus": "pending" if ok else NOT_APPLICABLE,
    }


def missing_runbook_fields(summary: dict[str, Any]) -> list[str]:
    return [k for k in RUNBOOK_FIELDS if k not in summary]


def missing_seed_fields(summary: dict[str, Any]) -> list[str]:
    return [k for k in SEED_FIELDS if k not in summary]


def gpu_sku(environment: dict[str, Any]) -> str:
    """The device that was measured, `no device` when the probe ran and found none, `unknown` when the
    environment was never captured (the worker died first)."""
    if not environment or not environment.get("module"):
        return UNKNOWN
    return environment.get("device_name") or NO_DEVICE


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0


def record_problems(s: dict[str, Any]) -> list[str]:
    """What is wrong with one evidence record: missing runbook fields, wrong types, nulls where the runbook
    needs a value, and fields that contradict each other. Empty when the record holds together."""
    problems = [f"lacks {k}" for k in missing_runbook_fields(s)]
    if problems:
        return problems
    if s.get("outcome") in NO_WORKER_OUTCOMES or "rolledBackTo" in s:
        return _no_worker_problems(s)
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


def _no_worker_problems(s: dict[str, Any]) -> list[str]:
    """A reuse's or a rollback's record (a failed rollback's too): the builder fields `not_applicable`, nothing
    cancelled, the retry and validation following whether the engine was restored."""
    problems = []
    ok = s.get("outcome") in NO_WORKER_OUTCOMES
    if not ok and s.get("outcome") != "failed":
        problems.append(f"outcome {s.get('outcome')!r} is not one of {', '.join(NO_WORKER_OUTCOMES)} or failed")
    for key in ("language", "gpuSku", "timingCacheMode", "cleanupStatus"):
        if s.get(key) != NOT_APPLICABLE:
            problems.append(f"{key} is {s.get(key)!r} in the record of a run that started no worker")
    if s.get("framework") != "trtls" or not isinstance(s.get("tensorrtVersion"), str):
        problems.append(f"framework {s.get('framework')!r}, tensorrtVersion {s.get('tensorrtVersion')!r}")
    h = s.get("buildConfigHash")
    if h is not None and (not isinstance(h, str) or not SHA256.match(h)):
        problems.append(f"buildConfigHash {h!r} is not a sha256")
    if any(s.get(k) is not None for k in ("cancelSource", "cancelLatencyMs", "cleanupLatencyMs")):
        problems.append("a cancel is recorded for a run that started no worker")
    if s.get("retryPolicy") != ("not_needed" if ok else "investigate"):
        problems.append(f"retryPolicy {s.get('retryPolicy')} contradicts outcome {s.get('outcome')}")
    if s.get("validationStatus") != ("pending" if ok else NOT_APPLICABLE):
        problems.append(f"validationStatus {s.get('validationStatus')} contradicts outcome {s.get('outcome')}")
    return problems


def _cleanup_problems(s: dict[str, Any]) -> list[str]:
    """The cleanup status must say what the artifact inventory shows."""
    status = s.get("cleanupStatus")
    if status not in CLEANUP_STATUSES:
        return [f"cleanupStatus {status!r} is not one of {', '.join(CLEANUP_STATUSES)}"]
    if status == NOT_APPLICABLE:
        return ["cleanupStatus not_applicable in the record of a run that started a worker"]
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
