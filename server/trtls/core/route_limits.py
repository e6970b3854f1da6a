"""What gates 4 and 5 judge a route by: per-output tolerances (Polygraphy's names and semantics), golden reference
outputs with their provenance, and the release thresholds. `core.route.RouteModel` holds them (re-exported there)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from trtls.core.validation import RECIPE_TABLE


class _Model(BaseModel):
    # the recipe's strict tables (`warmup = "5"`, `atol = "1e-4"` are located TRT102s, never converted); inf and nan
    # are refused there too: an infinite limit or tolerance passes every measurement (a pass that judged nothing)
    model_config = RECIPE_TABLE


class Tolerance(_Model):
    """Polygraphy names and semantics: |out - ref| <= atol + rtol * |ref|, aggregated by check_error_stat."""

    atol: float = Field(1e-5, ge=0, description="Absolute tolerance.")
    rtol: float = Field(1e-5, ge=0, description="Relative tolerance.")
    check_error_stat: Literal["max", "mean", "median", "elemwise", "quantile"] = Field(
        "elemwise", description="How errors are aggregated before comparing (Polygraphy --check-error-stat)."
    )
    quantile: float | None = Field(None, gt=0, le=1, description="Quantile used when check_error_stat = quantile.")
    cosine_min: float | None = Field(
        None,
        ge=-1,
        le=1,
        description="Smallest accepted cosine similarity of any vector of the output (its last axis: an embedding, "
        "a token's hidden state) with the reference's, as TRTMC's BERT comparator judges (0.99 there). Gate 4 "
        "judges it as `parity.cosine:<output>`; left out, the similarity is recorded as a figure, not judged.",
    )


class GoldenOutputsRef(_Model):
    """Reference outputs recorded elsewhere (Polygraphy RunResults JSON, `polygraphy run --save-outputs`)."""

    path: str = Field(description="The RunResults JSON file, relative to this recipe.")
    framework: str = Field(min_length=1, description="What computed them, e.g. `torch`, `transformers`.")
    framework_version: str = Field(min_length=1, description="Its version, e.g. `2.5.1`.")
    inputs_sha256: str = Field(
        pattern=r"^[0-9a-f]{64}$",
        description="sha256 of the `reference_inputs` file the outputs were computed from (gate 4 compares only "
        "when it matches).",
    )


class Thresholds(_Model):
    latency_p50_ms: float | None = Field(None, gt=0, description="Largest accepted p50 latency, ms.")
    latency_p95_ms: float | None = Field(None, gt=0, description="Largest accepted p95 latency, ms.")
    latency_p99_ms: float | None = Field(None, gt=0, description="Largest accepted p99 latency, ms.")
    memory_mib: float | None = Field(None, gt=0, description="Largest accepted peak memory of the runtime, MiB.")
    gpu_memory_mib: float | None = Field(
        None, gt=0, description="Largest accepted GPU memory of the runtime, MiB (measured only where a GPU runs it)."
    )
    min_throughput_rps: float | None = Field(
        None, gt=0, description="Smallest accepted serial throughput, requests per second."
    )
    max_warmup_s: float | None = Field(
        None, gt=0, description="Largest accepted warm-up cost (load + first request), seconds."
    )
    max_build_s: float | None = Field(
        None, gt=0, description="Largest accepted cold build time (the build's summary.json durationS), seconds."
    )
    max_regression: float = Field(
        0.25,
        ge=0,
        description="Largest accepted rise over the recorded baseline (p95 latency, peak memory), as a fraction: 0.25 "
        "= 25 %.",
    )
    regression_floor_ms: float = Field(
        0.1,
        ge=0,
        description="A p95 rise smaller than this many ms is measurement noise, never a regression, whatever its "
        "percentage "
        "(microsecond latencies vary by tens of percent run to run).",
    )
    regression_floor_mib: float = Field(
        16.0, ge=0, description="A peak-memory rise smaller than this many MiB is never a regression."
    )
    warmup: int = Field(5, ge=0, description="Warm-up runs before timing.")
    iterations: int = Field(50, ge=1, description="Timed runs.")
