"""Gate 5's measurement: latency, throughput, memory and warm-up of the runtime under test, and the thresholds they
are judged by."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from functools import partial
from typing import Any

import numpy as np

from trtls.core.gate_result import gate_check
from trtls.core.route import Thresholds as RouteThresholds
from trtls.runtimes import RunResult, RuntimeSpec, benchmark


def percentile_ci(latencies_ms: Any, q: float) -> tuple[float, float]:
    from trtls.gates.release.interleaved import percentile_ci as ci

    return ci(latencies_ms, q)


def session_words(session: dict[str, Any]) -> str:
    """An ONNX Runtime session's settings as a measurement states them."""
    return (
        f"ONNX Runtime session: {session['intra_op_threads']} intra-op / {session['inter_op_threads']} inter-op "
        f"thread(s), graph optimisation {session['graph_optimization']}, {session['provider']}"
    )


GATE = 5
_check = partial(gate_check, GATE)
MIB = 1024 * 1024


class Thresholds(RouteThresholds):
    """Gate 5's thresholds: the recipe's `[routes.NAME.thresholds]` model itself, so a key exists once (its
    description, default and bounds live in trtls.core.route)."""

    @classmethod
    def of(cls, value: Any) -> Thresholds:
        """From the recipe model, a dict (validated: a misspelt key is an error, not ignored) or None."""
        if value is None:
            return cls()
        if isinstance(value, RouteThresholds):
            return cls.model_validate(value.model_dump())
        return cls.model_validate(dict(value))


@dataclass
class Measurement:
    runtime: str
    iterations: int
    warmup: int
    p50_ms: float
    p95_ms: float
    p99_ms: float
    mean_ms: float
    throughput_rps: float
    peak_rss_mib: float | None
    gpu_memory_mib: float | None
    load_s: float | None
    first_run_s: float | None
    warmup_cost_s: float | None  # load + first request
    # 95 % bootstrap interval of each percentile ({"p50": [lo, hi], …}): an absolute limit inside it is not judged
    latency_ci_ms: dict[str, list[float]] | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def measurement_of(spec: RuntimeSpec, res: RunResult, warmup: int) -> Measurement:
    lat_ms = np.asarray(res.latencies_s, dtype=np.float64) * 1000.0
    wall = res.timed_wall_s or float(np.sum(res.latencies_s))
    load = res.load_s
    first = res.first_run_s
    return Measurement(
        runtime=spec.label,
        iterations=len(lat_ms),
        warmup=warmup,
        p50_ms=float(np.percentile(lat_ms, 50)),
        p95_ms=float(np.percentile(lat_ms, 95)),
        p99_ms=float(np.percentile(lat_ms, 99)),
        mean_ms=float(lat_ms.mean()),
        throughput_rps=float(len(lat_ms) / wall) if wall > 0 else math.inf,
        peak_rss_mib=None if res.peak_rss_bytes is None else res.peak_rss_bytes / MIB,
        gpu_memory_mib=None if res.gpu_mem_bytes is None else res.gpu_mem_bytes / MIB,
        load_s=load,
        first_run_s=first,
        warmup_cost_s=None if first is None else (load or 0.0) + first,
        latency_ci_ms={f"p{q}": list(percentile_ci(lat_ms, q)) for q in (50, 95, 99)} if lat_ms.size > 1 else None,
    )


def measure(
    spec: RuntimeSpec, inputs: Sequence[Any], *, warmup: int = 5, iterations: int = 50, timeout_s: float | None = None
) -> Measurement | RunResult:
    """Benchmark in the runtime's child process; a `RunResult` when it could not run (unavailable / failed)."""
    res = benchmark(spec, inputs, warmup=warmup, iterations=iterations, timeout_s=timeout_s)
    if not res.ok or not res.latencies_s:
        return res
    return measurement_of(spec, res, warmup)
