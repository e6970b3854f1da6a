"""The route-table keys for a route's life after its gates: the canary plan a promotion carries, the revalidation
triggers (`revalidate_after_days`, `revalidate_on`), and the runbook's hold reasons (plugin libraries, integration
boundaries, tolerance precision, portability targets). `core.route.RouteModel` holds them; gates and
`gates.lifecycle` judge them.

The drift kinds are the names `revalidate_on` takes: what a verdict rests on that can change under a promoted route.
What was promoted itself (the bundle, the checkpoint's revision and its lock) always counts and is not listed.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

DriftKind = Literal[
    "builder",
    "cuda_driver",
    "cuda_runtime",
    "gpu",
    "onnxruntime",
    "python",
    "trtls",
    "recipe",
    "tolerances",
    "thresholds",
]
DRIFT_KINDS: tuple[str, ...] = (
    "builder",
    "cuda_driver",
    "cuda_runtime",
    "gpu",
    "onnxruntime",
    "python",
    "trtls",
    "recipe",
    "tolerances",
    "thresholds",
)
ALWAYS_COUNTS: tuple[str, ...] = ("bundle", "checkpoint", "lock", "rollback_artifact")  # what was promoted: never drifts
# Route keys that describe the route's life, not what the gates measured: changing them is not a drift.
LIFECYCLE_KEYS: tuple[str, ...] = ("canary_plan", "revalidate_after_days", "revalidate_on")

Precision = Literal["fp32", "tf32", "fp16", "bf16", "int8"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CanaryPlan(_Model):
    """How the promoted bundle meets real traffic: `trtls route promote` records it; `trtls route canary` follows it."""

    stages: list[float] = Field(
        min_length=1, description="Traffic percentages in order, e.g. [1, 10, 100] (each > 0 and ≤ 100)."
    )
    abort_if: str = Field(
        min_length=1,
        description="The condition that fails the canary, in words, e.g. `error rate > 0.1 % or p95 > 20 ms`.",
    )
    watch: list[str] = Field(
        default_factory=list,
        description='Figures the canary reports when it ends (`--figure NAME=VALUE` for each), e.g. ["p95_ms", '
        '"error_rate"].',
    )
    owner: str | None = Field(None, description="Who runs the canary (team or person).")


class PluginLibrary(_Model):
    """A plugin library (custom kernels) the engine loads: what it takes to trust it."""

    path: str = Field(description="The library file (.so), relative to this recipe; its sha256 is gate 3 evidence.")
    source: str | None = Field(
        None, description="Where its source is: repository URL and commit. Unset holds the route."
    )
    build_flags: str | None = Field(
        None, description="How it was built (compiler, flags, CUDA arch list). Unset holds the route."
    )
    version: str | None = Field(None, description="Its version. Unset holds the route.")
    review: str | None = Field(
        None, description="Review status, e.g. `reviewed by A. Person on 2026-11-02`. Unset holds the route."
    )
    scan: str | None = Field(
        None, description="Scan or signature result, e.g. `cosign verified` or `trivy: clean`. Unset holds the route."
    )


class IntegrationBoundary(_Model):
    """An FFI the runtime crosses (TVM-FFI, ctypes, a C ABI): named, with an owner."""

    kind: str = Field(min_length=1, description="The FFI, e.g. `tvm-ffi`, `ctypes`, `c-abi`.")
    owner: str | None = Field(None, description="Who owns the boundary (team or person). Unset holds the route.")
    description: str | None = Field(None, description="What crosses it.")
