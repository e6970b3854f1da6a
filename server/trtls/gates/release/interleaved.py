"""Gate 5's baseline rule, established in one run. A runtime trtls runs in its own child is judged by the paired
rule (`release.paired`: both artifacts in one process, request by request, per-request CPU time). A `command`
runner (a program per request, no shared process) by the rule below: the candidate and the baseline artifact
measured in interleaved rounds (baseline, candidate, candidate, baseline, …: drift of the machine hits both alike),
and a stated statistic.

The unit of replication is the round, not the request: requests within one round share the machine's state at that
moment (another process's burst slows a whole round), so resampling requests across pooled rounds gives an interval
far narrower than the run-to-run spread — the rule that did that rejected the very same artifact one run in three on
a loaded 2-core machine. The statistic: each round's p95 ratio (candidate / baseline, measured back to back) and a
sign test over the rounds. A regression is claimed only when every round's ratio is above `1 + max_regression`
(one-sided sign test, p = 2^-rounds: 0.031 at 5 rounds) and the pooled p95 rose by more than `regression_floor_ms`;
no regression when every round's ratio is at or below the limit, or the rise is under the floor; otherwise the check
is `not_checked`, "too noisy to judge: CV 38 %", with the figures. The reported interval is a 95 % bootstrap over
rounds (seeded: the same latencies give the same interval).

`straddles` is the same idea for an absolute threshold: a bootstrap interval of one percentile of one measurement.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from trtls.fs import Kind, atomic_writer, ensure_folder, scratch_dir
from trtls.runtimes import RunResult, RuntimeSpec, benchmark

ROUNDS = 5
BOOTSTRAP = 1000
SEED = 20


def artifact_spec(spec: RuntimeSpec, deploys: str, bundle: Path, scratch: Path) -> RuntimeSpec | str:
    """The runtime under test pointed at the artifact the route deploys, extracted from `bundle` into `scratch`."""
    from trtls.bundle import BundleError, read_bundle
    from trtls.gates.parity import on_artifact
    from trtls.gates.release.rollback import ENGINE_SECTIONS, MODEL_SECTIONS

    try:
        b = read_bundle(bundle)
    except (BundleError, OSError) as exc:
        return f"bundle unreadable: {exc}"
    names = ENGINE_SECTIONS if deploys == "engine" else MODEL_SECTIONS
    section = next((n for n in names if n in b.sections), None)
    if section is None:
        return f"the bundle carries no {deploys} section"
    try:
        ensure_folder(scratch, within=scratch.parent)
        folder = scratch_dir(prefix="artifact-", parent=scratch)
        target = folder / ("model.engine" if deploys == "engine" else "model.onnx")
        with atomic_writer(target, kind=Kind.scratch, within=folder) as out:
            for part in b.iter_section(section):
                out.write(part)
    except (BundleError, OSError) as exc:
        return f"the {section} section cannot be extracted: {exc}"
    return on_artifact(spec, (section, target, "tensorrt" if deploys == "engine" else "onnxruntime"), bundle)


def measure_interleaved(
    candidate: RuntimeSpec,
    baseline: RuntimeSpec,
    inputs: Sequence[Any],
    *,
    warmup: int,
    iterations: int,
    rounds: int = ROUNDS,
) -> tuple[list[np.ndarray], list[np.ndarray]] | RunResult:
    """(candidate latencies per round, baseline latencies per round), in ms; the failed RunResult otherwise."""
    per_round = max(10, iterations // rounds)
    cand: list[np.ndarray] = []
    base: list[np.ndarray] = []
    for r in range(rounds):
        order = [(baseline, base), (candidate, cand)] if r % 2 == 0 else [(candidate, cand), (baseline, base)]
        for spec, into in order:
            res = benchmark(spec, inputs, warmup=warmup, iterations=per_round, timeout_s=None)
            if not res.ok or not res.latencies_s:
                return res
            into.append(np.asarray(res.latencies_s, dtype=np.float64) * 1000.0)
    return cand, base


def _p95(x: np.ndarray) -> float:
    return float(np.percentile(x, 95))


def judge_regression(
    cand: Sequence[np.ndarray], base: Sequence[np.ndarray], *, max_regression: float, floor_ms: float
) -> dict[str, Any]:
    """The verdict of the baseline rule on interleaved rounds: `status` (pass | reject | not_checked), `message`, and
    the figures (ratio, ci, cv, p95s, rounds, per-round ratios, the sign test's count and p)."""
    all_c, all_b = np.concatenate(cand), np.concatenate(base)
    p95_c, p95_b = _p95(all_c), _p95(all_b)
    ratio = p95_c / p95_b if p95_b > 0 else float("inf")
    per_round = np.asarray([_p95(c) / max(_p95(b), 1e-12) for c, b in zip(cand, base, strict=True)])
    n = int(per_round.size)
    rng = np.random.default_rng(SEED)
    boots = np.median(rng.choice(per_round, (BOOTSTRAP, n)), axis=1)  # rounds resampled, not requests
    low, high = (float(v) for v in np.percentile(boots, [2.5, 97.5]))
    cv = float(per_round.std(ddof=1) / per_round.mean()) if n > 1 and per_round.mean() > 0 else 0.0
    limit = 1.0 + max_regression
    over = int((per_round > limit).sum())
    p_sign = 0.5**n  # every round on one side by chance, under "no difference"
    figures = (
        f"p95 {p95_c:.3f} ms vs baseline {p95_b:.3f} ms, ratio {ratio:.2f}; per-round ratios "
        f"{', '.join(f'{r:.2f}' for r in per_round)} ({over}/{n} over {limit:.2f}; 95 % bootstrap CI of the median "
        f"over rounds {low:.2f}–{high:.2f}), CV {cv * 100:.0f} %"
    )
    out: dict[str, Any] = {
        "statistic": "per-round p95 ratio over interleaved rounds, sign test (every round on one side of the limit)",
        "ratio": ratio,
        "median_round_ratio": float(np.median(per_round)),
        "ci": [low, high],
        "cv": cv,
        "limit": limit,
        "p95_ms": p95_c,
        "baseline_p95_ms": p95_b,
        "rounds": n,
        "per_round_ratio": per_round.tolist(),
        "rounds_over_limit": over,
        "sign_test_p": p_sign,
    }
    if p95_c <= p95_b:
        out.update(status="pass", message=f"no regression: the p95 fell ({(1 - ratio) * 100:.0f} %) — {figures}")
    elif p95_c - p95_b <= floor_ms:
        out.update(
            status="pass",
            message=f"no regression: the p95 rose {(p95_c - p95_b):.3f} ms, under the {floor_ms:g} ms floor — "
            f"{figures}",
        )
    elif n >= 5 and over == n:
        out.update(status="reject", message=f"regression established (sign test p = {p_sign:.3f}): {figures}")
    elif over == 0:
        out.update(status="pass", message=f"no regression over {max_regression * 100:.0f} % in any round: {figures}")
    else:
        out.update(
            status="not_checked",
            message=f"too noisy to judge: CV {cv * 100:.0f} %; {over} of {n} rounds over the {limit:.2f} limit "
            f"({figures})",
        )
    return out


def percentile_ci(latencies_ms: Sequence[float], q: float) -> tuple[float, float]:
    """95 % bootstrap interval of the q-th percentile of one measurement (seeded), resampling blocks of consecutive
    requests (n // 20 each), not single requests: a burst of another process slows a stretch of requests, and an
    interval that resampled requests one by one was narrower than the run-to-run spread, so a limit near the
    figure read pass on one run and too noisy on the next. A limit inside this interval stays not_checked."""
    x = np.asarray(latencies_ms, dtype=np.float64)
    n = int(x.size)
    block = max(1, n // 20)
    per = max(1, n // block)
    rng = np.random.default_rng(SEED)
    starts = rng.integers(0, n - block + 1, size=(BOOTSTRAP // 4, per))
    index = (starts[..., None] + np.arange(block)).reshape(BOOTSTRAP // 4, -1)
    boots = np.percentile(x[index], q, axis=1)
    low, high = np.percentile(boots, [2.5, 97.5])
    return float(low), float(high)


def check_baseline_interleaved(
    candidate: RuntimeSpec,
    baseline_spec: RuntimeSpec | str,
    inputs: Sequence[Any],
    m: Any,
    recorded: dict[str, Any],
    t: Any,
    path: tuple,
    set_names: Sequence[str] | None = None,
) -> Any:
    """TRT906 measured beside the baseline artifact in this run: for a runtime trtls runs in its own child, the
    paired rule (`release.paired`: both artifacts in one process, per-request CPU time, per input set); for a
    `command` runner, interleaved rounds of wall time (`judge_regression`). Peak memory (steady run to run) against
    the recorded baseline, over both max_regression and regression_floor_mib."""
    from functools import partial

    from trtls.core.gate_result import gate_check
    from trtls.gates.release.paired import MIN_PAIRS, clock_of, judge_paired
    from trtls.runtimes import benchmark_paired

    check = partial(gate_check, 5)
    ev: dict[str, Any] = {
        "baseline_recorded_at": recorded.get("recorded_at"),
        "baseline_bundle_sha256": recorded.get("bundle_sha256"),
    }
    if isinstance(baseline_spec, str):
        return check(
            "release.baseline",
            "hold",
            f"the baseline cannot be measured beside the candidate: "
            f"{baseline_spec}; record the baseline again on a bundle that is here",
            "TRT906",
            path,
            ev,
        )
    names = list(set_names) if set_names else [Path(str(p)).stem for p in inputs] if len(inputs) > 1 else ["inputs"]
    if candidate.kind != "command" and baseline_spec.kind == candidate.kind:
        pairs = max(t.iterations, MIN_PAIRS)
        res = benchmark_paired(
            candidate,
            baseline_spec,
            inputs,
            warmup=t.warmup,
            pairs=pairs,
            timeout_s=candidate.timeout_s * 2 * ROUNDS,
        )
        if not res.ok or not res.paired:
            return check(
                "release.baseline",
                "not_checked",
                f"the paired measurement could not run: {res.summary()}",
                "TRT906",
                path,
                ev,
            )
        verdict = judge_paired(
            res.paired,
            names,
            clock=clock_of(candidate.kind),
            max_regression=t.max_regression,
            floor_ms=t.regression_floor_ms,
        )
    else:
        got = measure_interleaved(candidate, baseline_spec, inputs, warmup=t.warmup, iterations=t.iterations)
        if isinstance(got, RunResult):
            return check(
                "release.baseline",
                "not_checked",
                f"the interleaved rounds could not run: {got.summary()}",
                "TRT906",
                path,
                ev,
            )
        verdict = judge_regression(got[0], got[1], max_regression=t.max_regression, floor_ms=t.regression_floor_ms)
    ev["latency"] = {k: v for k, v in verdict.items() if k not in ("status", "message")}
    status, message = verdict["status"], verdict["message"]
    old = (recorded.get("measurement") or {}).get("peak_rss_mib")
    new = m.peak_rss_mib
    if isinstance(old, (int, float)) and old > 0 and new is not None:
        change = new / old - 1.0
        ev["memory"] = {"baseline": old, "now": new, "change": change, "floor": t.regression_floor_mib}
        if change > t.max_regression and new - old > t.regression_floor_mib:
            status = "reject"
            message = (
                f"peak memory {new:.1f} MiB vs baseline {old:.1f} MiB (+{change * 100:.0f} % > "
                f"{t.max_regression * 100:.0f} %); latency: {message}"
            )
        else:
            message += f"; peak memory {change * 100:+.0f} % against the recorded baseline"
    return check("release.baseline", status, message, "TRT906", path, ev)
