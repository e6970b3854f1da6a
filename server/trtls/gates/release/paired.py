"""Gate 5's baseline rule for a runtime that runs in trtls's own child process (ONNX Runtime, the ONNX reference,
TensorRT): the candidate and the baseline artifact loaded in ONE process and alternated request by request
(`runtimes.benchmark_paired`), a fixed number of pairs, and one stated statistic — so that a rerun on the same
artifacts ends the same way, on a loaded machine too.

Why CPU time: on the CPU, a request's wall time is its CPU time plus the time another process held the core. On a
shared 2-core machine that second part is the noise (a burner beside the run moved per-round p95 ratios of one
artifact against itself between 0.7 and 8.6), and it says nothing about the artifact. A request's CPU time
(`process_time`: every thread of the process, a runtime's own pool included) leaves it out. For TensorRT the work
is on the GPU, invisible to the CPU clock, so wall time is the statistic there (the GPU is not shared with a burner).
With more than one intra-op thread, ONNX Runtime's workers spin while they wait and that spin is CPU time too: both
sides pay it alike, but the ratio is noisier than at one thread (the interval says so).

The statistic, per input set (never pooled across shapes): the median over pairs of candidate / baseline time, the
two requests of a pair running the same input back to back, the order alternating. Its 95 % interval: a seeded
bootstrap over blocks of consecutive pairs (a burst that slows a stretch of requests moves whole blocks, so the
interval widens with it instead of hiding it). The decision, with `limit = 1 + max_regression`:

* reject: the whole interval is over the limit and the median rise is over `regression_floor_ms`;
* pass: the whole interval is at or under the limit, or the largest rise the interval allows is under the floor;
* otherwise `not_checked`: the interval straddles the limit (an effect as large as the noise is not judged).

The budget is fixed (`max(thresholds.iterations, MIN_PAIRS)` pairs after `thresholds.warmup`), never "measure
until it looks decided": an adaptive stop would end differently on every rerun.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

STATUS_ORDER = {"pass": 0, "not_checked": 1, "reject": 2}
MIN_PAIRS = 60
BOOTSTRAP = 2000
BLOCKS = 20  # blocks per resample: a block is n // BLOCKS consecutive pairs
SEED = 20
CPU_CLOCK_KINDS = ("onnxruntime", "onnx_reference")


def clock_of(kind: str) -> str:
    """`cpu` where the runtime computes on the CPU (its CPU time is the work), `wall` where a GPU does (TensorRT)."""
    return "cpu" if kind in CPU_CLOCK_KINDS else "wall"


def block_interval(log_ratios: np.ndarray) -> tuple[float, float]:
    """95 % bootstrap interval of exp(median(log_ratios)), resampling blocks of consecutive pairs (seeded: the same
    figures give the same interval)."""
    n = int(log_ratios.size)
    block = max(1, n // BLOCKS)
    per = max(1, n // block)
    rng = np.random.default_rng(SEED)
    starts = rng.integers(0, n - block + 1, size=(BOOTSTRAP, per))
    index = (starts[..., None] + np.arange(block)).reshape(BOOTSTRAP, -1)
    medians = np.median(log_ratios[index], axis=1)
    low, high = np.exp(np.percentile(medians, [2.5, 97.5]))
    return float(low), float(high)


def judge_set(
    cand_s: Sequence[float], base_s: Sequence[float], *, clock: str, max_regression: float, floor_ms: float
) -> dict[str, Any]:
    """One input set's verdict: `status`, `message` and the figures it rests on."""
    cand = np.asarray(cand_s, dtype=np.float64) * 1000.0
    base = np.asarray(base_s, dtype=np.float64) * 1000.0
    what = "CPU time" if clock == "cpu" else "wall time"
    n = int(cand.size)
    med_c, med_b = float(np.median(cand)), float(np.median(base))
    out: dict[str, Any] = {"pairs": n, "clock": clock, "median_ms": med_c, "baseline_median_ms": med_b}
    if n < 2 or med_b <= 0 or med_c <= 0 or (base <= 0).any() or (cand <= 0).any():
        out.update(
            status="not_checked",
            message=f"the {what} of a request read 0 (the clock is coarser than one request): nothing to compare",
        )
        return out
    log_ratios = np.log(cand / base)
    ratio = float(np.exp(np.median(log_ratios)))
    low, high = block_interval(log_ratios)
    limit = 1.0 + max_regression
    rise_ms = med_c - med_b
    most_ms = (high - 1.0) * med_b  # the largest rise the interval allows, in ms
    change = f"{'rose' if ratio > 1 else 'fell'} {abs(ratio - 1) * 100:.1f} %" if ratio != 1 else "unchanged"
    figures = (
        f"{what} per request {med_c:.4f} ms vs baseline {med_b:.4f} ms (median); median pair ratio {ratio:.3f} "
        f"({change}), 95 % CI {low:.3f}–{high:.3f} over {n} interleaved pairs"
    )
    out.update(ratio=ratio, ci=[low, high], limit=limit, rise_ms=rise_ms, largest_rise_ms=most_ms)
    if low > limit and rise_ms > floor_ms:
        out.update(status="reject", message=f"regression: the whole interval is over the {limit:.2f} limit: {figures}")
    elif high <= limit:
        out.update(
            status="pass", message=f"no regression: the whole interval is under the {limit:.2f} limit: {figures}"
        )
    elif most_ms <= floor_ms:
        out.update(
            status="pass",
            message=f"no regression: the largest rise the interval allows, +{most_ms:.4f} ms, is under the "
            f"{floor_ms:g} ms floor — {figures}",
        )
    else:
        out.update(
            status="not_checked",
            message=f"too noisy to judge: the interval straddles the {limit:.2f} limit — {figures}",
        )
    return out


def judge_paired(
    paired: Mapping[str, Sequence[Any]],
    set_names: Sequence[str],
    *,
    clock: str,
    max_regression: float,
    floor_ms: float,
) -> dict[str, Any]:
    """Every input set judged on its own pairs; the worst set decides (reject > not_checked > pass)."""
    index = np.asarray(paired["input"], dtype=np.int64)
    side = "cpu" if clock == "cpu" else "wall"
    cand = np.asarray(paired[f"cand_{side}_s"], dtype=np.float64)
    base = np.asarray(paired[f"base_{side}_s"], dtype=np.float64)
    wall_c = np.asarray(paired["cand_wall_s"], dtype=np.float64)
    wall_b = np.asarray(paired["base_wall_s"], dtype=np.float64)
    per_set: dict[str, dict[str, Any]] = {}
    for k, name in enumerate(set_names):
        mine = index == k
        if not mine.any():
            continue
        verdict = judge_set(cand[mine], base[mine], clock=clock, max_regression=max_regression, floor_ms=floor_ms)
        verdict["wall_p95_ms"] = float(np.percentile(wall_c[mine], 95) * 1000.0)
        verdict["baseline_wall_p95_ms"] = float(np.percentile(wall_b[mine], 95) * 1000.0)
        per_set[name] = verdict
    worst = max(per_set.values(), key=lambda v: STATUS_ORDER[v["status"]])
    named = len(per_set) > 1
    message = "; ".join(
        f"{name}: {v['message']}" if named else v["message"]
        for name, v in per_set.items()
        if not named or v["status"] == worst["status"]
    )
    return {
        "status": worst["status"],
        "message": message,
        "statistic": f"median over interleaved pairs (one process) of candidate / baseline {clock} time per request, "
        "per input set; 95 % block-bootstrap interval against 1 + max_regression",
        "clock": clock,
        "sets": per_set,
    }
