"""Gate 5's judgement of a measurement: thresholds (latency, throughput, memory, warm-up, build time) and the
canary run."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from trtls.core.findings import TomlPath
from trtls.core.gate_result import GateCheck, gate_check
from trtls.fs import parse_json, read_text
from trtls.gates.files import RECORD_LIMIT
from trtls.gates.parity.check import toml_path
from trtls.gates.release.measure import Measurement, Thresholds
from trtls.runtimes import RuntimeSpec, run_inputs

GATE = 5
_check = partial(gate_check, GATE)


def check_performance(m: Measurement, t: Thresholds, paths: Mapping[str, TomlPath] | None = None) -> list[GateCheck]:
    """TRT901 latency, TRT902 throughput, TRT903 memory, TRT904 warm-up against thresholds."""
    paths = paths or {}
    p_thr = toml_path(paths, "thresholds")

    def key(name: str) -> TomlPath:
        return p_thr + (name,) if p_thr else p_thr

    ev = m.as_dict()
    out: list[GateCheck] = []
    lat = [
        ("latency_p50_ms", "p50", m.p50_ms, t.latency_p50_ms),
        ("latency_p95_ms", "p95", m.p95_ms, t.latency_p95_ms),
        ("latency_p99_ms", "p99", m.p99_ms, t.latency_p99_ms),
    ]
    configured = [(key, label, got, limit) for key, label, got, limit in lat if limit is not None]
    ci = m.latency_ci_ms or {}

    def interval(label: str, got: float) -> tuple[float, float]:
        lo_hi = ci.get(label)
        return (float(lo_hi[0]), float(lo_hi[1])) if lo_hi else (got, got)

    # over only when the whole interval is over; a limit inside the interval is not judged either way
    over = [x for x in configured if interval(x[1], x[2])[0] > x[3]]
    straddled = [x for x in configured if x not in over and interval(x[1], x[2])[1] > x[3]]
    figures = (
        f"p50 {m.p50_ms:.3f} ms, p95 {m.p95_ms:.3f} ms, p99 {m.p99_ms:.3f} ms over {m.iterations} requests "
        f"after {m.warmup} warm-up"
    )
    if straddled and not over:
        parts = []
        for _, label, got, limit in straddled:
            lo, hi = interval(label, got)
            parts.append(f"{label} {got:.3f} ms, 95 % CI {lo:.3f}–{hi:.3f} ms, straddles the {limit:g} ms limit")
        n, lbl, got0 = straddled[0][0], straddled[0][1], straddled[0][2]
        lo, hi = interval(lbl, got0)
        spread = (hi - lo) / 2 / got0 if got0 else 0.0  # half the interval, relative to the estimate
        out.append(
            _check(
                "release.latency",
                "not_checked",
                f"too noisy to judge: ±{spread * 100:.0f} % on {lbl} ({'; '.join(parts)}) — {figures}",
                "TRT901",
                key(n),
                ev,
            )
        )
    elif over:
        name, label, value, limit = over[0]
        msg = "; ".join(f"{lbl} latency {v:.3f} ms > {lim:g} ms ({n})" for n, lbl, v, lim in over)
        out.append(_check("release.latency", "reject", f"{msg} — {figures}", "TRT901", key(name), ev))
    elif not configured:
        out.append(
            _check(
                "release.latency",
                "not_checked",
                f"no latency limit set (thresholds.latency_p95_ms or _p99_ms), so the measured {figures} were judged "
                "against nothing",
                "TRT901",
                p_thr,
                ev,
            )
        )
    else:
        out.append(_check("release.latency", "pass", figures, "TRT901", key(configured[-1][0]), ev))

    if t.min_throughput_rps is not None and m.throughput_rps < t.min_throughput_rps:
        out.append(
            _check(
                "release.throughput",
                "reject",
                f"throughput {m.throughput_rps:.1f} req/s < {t.min_throughput_rps:g} req/s",
                "TRT902",
                key("min_throughput_rps"),
                ev,
            )
        )
    elif t.min_throughput_rps is None:
        out.append(
            _check(
                "release.throughput",
                "not_checked",
                f"no minimum throughput set (thresholds.min_throughput_rps): {m.throughput_rps:.1f} req/s (serial) "
                "was judged against nothing",
                "TRT902",
                p_thr,
                ev,
            )
        )
    else:
        out.append(
            _check(
                "release.throughput",
                "pass",
                f"throughput {m.throughput_rps:.1f} req/s (serial) >= {t.min_throughput_rps:g} req/s",
                "TRT902",
                key("min_throughput_rps"),
                ev,
            )
        )

    if m.peak_rss_mib is None:
        out.append(
            _check(
                "release.memory", "not_checked", "peak memory of the runtime could not be measured", "TRT903", p_thr, ev
            )
        )
    elif t.memory_mib is None:
        out.append(
            _check(
                "release.memory",
                "not_checked",
                f"no memory limit set (thresholds.memory_mib): peak RSS {m.peak_rss_mib:.1f} MiB was judged against "
                "nothing",
                "TRT903",
                p_thr,
                ev,
            )
        )
    elif m.peak_rss_mib > t.memory_mib:
        out.append(
            _check(
                "release.memory",
                "reject",
                f"peak RSS {m.peak_rss_mib:.1f} MiB > {t.memory_mib:g} MiB",
                "TRT903",
                key("memory_mib"),
                ev,
            )
        )
    elif t.gpu_memory_mib is not None and m.gpu_memory_mib is not None and m.gpu_memory_mib > t.gpu_memory_mib:
        out.append(
            _check(
                "release.memory",
                "reject",
                f"GPU memory {m.gpu_memory_mib:.1f} MiB > {t.gpu_memory_mib:g} MiB",
                "TRT903",
                key("gpu_memory_mib"),
                ev,
            )
        )
    else:
        gpu = f", GPU {m.gpu_memory_mib:.1f} MiB" if m.gpu_memory_mib is not None else ""
        out.append(
            _check(
                "release.memory",
                "pass",
                f"peak RSS {m.peak_rss_mib:.1f} MiB <= {t.memory_mib:g} MiB{gpu}",
                "TRT903",
                key("memory_mib"),
                ev,
            )
        )

    if t.max_warmup_s is not None and m.warmup_cost_s is not None and m.warmup_cost_s > t.max_warmup_s:
        out.append(
            _check(
                "release.warmup",
                "reject",
                f"warm-up cost (load + first request) {m.warmup_cost_s:.3f} s > {t.max_warmup_s:g} s",
                "TRT904",
                key("max_warmup_s"),
                ev,
            )
        )
    else:
        wc = "n/a" if m.warmup_cost_s is None else f"{m.warmup_cost_s:.3f} s"
        unjudged = t.max_warmup_s is None or m.warmup_cost_s is None
        out.append(
            _check(
                "release.warmup",
                "not_checked" if unjudged else "pass",
                f"warm-up cost (load + first request) {wc}"
                + (
                    ""
                    if not unjudged
                    else " was judged against nothing (no thresholds.max_warmup_s)"
                    if t.max_warmup_s is None
                    else " could not be measured"
                )
                + ("" if unjudged else f" <= {t.max_warmup_s:g} s"),
                "TRT904",
                key("max_warmup_s") if t.max_warmup_s is not None else p_thr,
                ev,
            )
        )
    return out


def check_build_time(summary_json: str | os.PathLike[str] | None, t: Thresholds, path: TomlPath = ()) -> GateCheck:
    """TRT905: cold build time from the build evidence summary (`durationS`)."""
    if summary_json is None:
        return _check(
            "release.build_time",
            "not_checked",
            "no build evidence summary: the cold build time was not measured",
            "TRT905",
            path,
        )
    p = Path(summary_json)
    try:
        data = parse_json(read_text(p, limit=RECORD_LIMIT, follow=False))
        duration = float(data["durationS"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return _check(
            "release.build_time",
            "hold",
            f"build evidence {p.name} has no readable durationS ({type(exc).__name__}): cold build time unknown",
            "TRT905",
            path,
        )
    ev = {"build_s": duration, "summary": str(p)}
    if t.max_build_s is not None and duration > t.max_build_s:
        return _check(
            "release.build_time",
            "reject",
            f"cold build took {duration:.1f} s > {t.max_build_s:g} s",
            "TRT905",
            path,
            ev,
        )
    return _check(
        "release.build_time",
        "pass" if t.max_build_s is not None else "not_checked",
        f"cold build took {duration:.1f} s"
        + (f" <= {t.max_build_s:g} s" if t.max_build_s is not None else ", judged against nothing (no max_build_s)"),
        "TRT905",
        path,
        ev,
    )


def check_canary(spec: RuntimeSpec, canary_inputs: Sequence[Any], t: Thresholds, path: TomlPath = ()) -> GateCheck:
    """TRT907: the new bundle's model on the canary inputs: answers, no NaN/Inf, each within latency_p99_ms."""
    if not canary_inputs:
        return _check("release.canary", "not_checked", "no canary inputs: the canary has not run", "TRT907", path)
    res = run_inputs(spec, list(canary_inputs), warmup=1)
    if res.status == "unavailable":
        return _check("release.canary", "not_checked", f"canary cannot run here: {res.message}", "TRT907", path)
    if not res.ok:
        return _check("release.canary", "reject", f"canary failed: {res.summary()}", "TRT907", path)
    problems = []
    for i, out in enumerate(res.outputs):
        for name, arr in out.items():
            if arr.dtype.kind in "fc" and not np.isfinite(arr).all():
                problems.append(f"request {i}: output {name!r} has NaN/Inf")
    lat_ms = [x * 1000 for x in res.latencies_s]
    if t.latency_p99_ms is not None:
        problems += [
            f"request {i}: {v:.3f} ms > {t.latency_p99_ms:g} ms" for i, v in enumerate(lat_ms) if v > t.latency_p99_ms
        ]
    ev = {"requests": len(res.outputs), "latencies_ms": lat_ms}
    if problems:
        return _check("release.canary", "reject", f"canary failed: {'; '.join(problems[:5])}", "TRT907", path, ev)
    return _check(
        "release.canary",
        "pass",
        f"canary: {len(res.outputs)} request(s) answered, finite"
        + (f", each within {t.latency_p99_ms:g} ms" if t.latency_p99_ms is not None else ""),
        "TRT907",
        path,
        ev,
    )


# -------------------------------------------------------------------------------------------- rollback
