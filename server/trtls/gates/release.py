"""Gate 5 — release, canary, rollback.

What is measured (runtime under test, in its child process, `runtimes.benchmark`):
latency p50/p95/p99 of `iterations` serial requests after `warmup` untimed ones, throughput (requests/s
over the timed loop), peak memory (max RSS of the runtime child; device memory when the runtime reports
it), warm-up cost (model load + first request), and the cold build time (`durationS` of the build
evidence summary.json).

How it is judged (decision rule, documented in docs/diagnostics-gates45.md):

* a configured threshold that is exceeded → **reject** (latency, memory, throughput, warm-up, build time);
* latency and memory must be bounded: no latency threshold, or no memory threshold → **hold**;
  throughput, warm-up, GPU memory and build-time thresholds are optional (the value is recorded);
* the stored baseline (`<root>/.trtls/routes/<route>/baseline.json`, written atomically) is missing →
  **hold** (`update_baseline=True` records one for the next run); a regression over `max_regression`
  (default 25 %) of p95 latency or peak memory → **reject**;
* canary: the new bundle's model on the canary inputs — every request must answer, with no NaN/Inf, each
  within `latency_p99_ms` when set; any failure → **reject**; no canary inputs → **hold**;
* rollback is exercised, not assumed (`rollback_drill`): the previous bundle is restored over the active
  one through `core.atomic`, its sha256 verified (and against its sidecar record when there is one), a
  smoke run made on the restored bundle's model, then the new bundle is restored and its sha256 verified.
  No previous bundle → **hold**; a digest mismatch or a failed smoke run → **reject**; the smoke run
  cannot run here (engine-only bundle, no GPU) → **hold**.

Codes: TRT901 latency · TRT902 throughput · TRT903 memory · TRT904 warm-up · TRT905 build time ·
TRT906 baseline · TRT907 canary · TRT908 rollback · TRT909 measurement failed/unavailable.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from trtls.core.atomic import atomic_write_bytes, atomic_write_text, atomic_writer
from trtls.core.findings import TomlPath
from trtls.core.gate_result import CheckStatus, GateCheck
from trtls.core.route import Thresholds as RouteThresholds
from trtls.gates.parity import toml_path
from trtls.runtimes import RunResult, RuntimeSpec, benchmark, run_inputs

GATE = 5
BASELINE_FORMAT = "trtls.release-baseline/1"
MIB = 1024 * 1024
MODEL_SECTIONS = ("model.onnx", "onnx", "model")  # ONNX sections a smoke run can use (onnxruntime)
ENGINE_SECTIONS = ("engine", "model.engine", "engine.plan")  # engine sections (tensorrt: needs a GPU)


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

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _check(
    name: str, status: CheckStatus, message: str, code: str, path: TomlPath, evidence: dict[str, Any] | None = None
) -> GateCheck:
    return GateCheck(GATE, name, status, message, code, tuple(path), True, dict(evidence or {}))


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
    )


def measure(
    spec: RuntimeSpec, inputs: Sequence[Any], *, warmup: int = 5, iterations: int = 50, timeout_s: float | None = None
) -> Measurement | RunResult:
    """Benchmark in the runtime's child process; a `RunResult` when it could not run (unavailable / failed)."""
    res = benchmark(spec, inputs, warmup=warmup, iterations=iterations, timeout_s=timeout_s)
    if not res.ok or not res.latencies_s:
        return res
    return measurement_of(spec, res, warmup)


# ---------------------------------------------------------------------------------------------- checks


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
    configured = [x for x in lat if x[3] is not None]
    over = [x for x in configured if x[2] > x[3]]
    figures = f"p50 {m.p50_ms:.3f} ms, p95 {m.p95_ms:.3f} ms, p99 {m.p99_ms:.3f} ms over {m.iterations} requests after {m.warmup} warm-up"
    if over:
        name, label, value, limit = over[0]
        msg = "; ".join(f"{lbl} latency {v:.3f} ms > {lim:g} ms ({n})" for n, lbl, v, lim in over)
        out.append(_check("release.latency", "reject", f"{msg} — {figures}", "TRT901", key(name), ev))
    elif not configured:
        out.append(
            _check(
                "release.latency",
                "hold",
                f"no latency threshold (set thresholds.latency_p95_ms or _p99_ms): {figures}",
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
    else:
        out.append(
            _check(
                "release.throughput",
                "pass",
                f"throughput {m.throughput_rps:.1f} req/s (serial)"
                + ("" if t.min_throughput_rps is not None else "; no minimum set"),
                "TRT902",
                key("min_throughput_rps") if t.min_throughput_rps is not None else p_thr,
                ev,
            )
        )

    if m.peak_rss_mib is None:
        out.append(
            _check("release.memory", "hold", "peak memory of the runtime could not be measured", "TRT903", p_thr, ev)
        )
    elif t.memory_mib is None:
        out.append(
            _check(
                "release.memory",
                "hold",
                f"no memory threshold (set thresholds.memory_mib): peak RSS {m.peak_rss_mib:.1f} MiB",
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
        out.append(
            _check(
                "release.warmup",
                "pass",
                f"warm-up cost (load + first request) {wc}",
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
            "release.build_time", "hold", "no build evidence summary: cold build time unknown", "TRT905", path
        )
    p = Path(summary_json)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
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
        "pass",
        f"cold build took {duration:.1f} s" + ("" if t.max_build_s is not None else " (no limit set)"),
        "TRT905",
        path,
        ev,
    )


def baseline_path(root: str | os.PathLike[str], route: str) -> Path:
    return Path(root) / ".trtls" / "routes" / route / "baseline.json"


def load_baseline(root: str | os.PathLike[str], route: str) -> dict[str, Any] | None:
    try:
        data = json.loads(baseline_path(root, route).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return (
        data
        if isinstance(data, dict)
        and data.get("format") == BASELINE_FORMAT
        and isinstance(data.get("measurement"), dict)
        else None
    )


def write_baseline(
    root: str | os.PathLike[str], route: str, m: Measurement, *, bundle_sha256: str | None = None
) -> Path:
    path = baseline_path(root, route)
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {
        "format": BASELINE_FORMAT,
        "route": route,
        "recorded_at": datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        "bundle_sha256": bundle_sha256,
        "measurement": m.as_dict(),
    }
    atomic_write_text(path, json.dumps(record, indent=2) + "\n")
    return path


def check_baseline(m: Measurement, baseline: Mapping[str, Any] | None, t: Thresholds, path: TomlPath = ()) -> GateCheck:
    """TRT906: compare with the stored baseline (p95 latency, peak memory)."""
    if baseline is None:
        return _check(
            "release.baseline",
            "hold",
            "no stored baseline for this route: regressions cannot be judged (record one with update_baseline)",
            "TRT906",
            path,
            {"measurement": m.as_dict()},
        )
    b = baseline.get("measurement", {})
    regressions, under_floor = [], []
    compared = {}
    for key, label, unit, floor in (
        ("p95_ms", "p95 latency", "ms", t.regression_floor_ms),
        ("peak_rss_mib", "peak memory", "MiB", t.regression_floor_mib),
    ):
        old, new = b.get(key), getattr(m, key)
        if isinstance(old, (int, float)) and old > 0 and new is not None:
            change = new / old - 1.0
            compared[key] = {"baseline": old, "now": new, "change": change, "floor": floor}
            if change > t.max_regression:
                if new - old > floor:
                    regressions.append(
                        f"{label} {new:.3f} {unit} vs baseline {old:.3f} {unit} (+{change * 100:.0f} % > {t.max_regression * 100:.0f} %)"
                    )
                else:
                    under_floor.append(
                        f"{label} +{change * 100:.0f} % is only +{new - old:.3g} {unit}, under the {floor:g} {unit} noise floor"
                    )
    ev = {"compared": compared, "baseline_recorded_at": baseline.get("recorded_at"), "under_noise_floor": under_floor}
    if regressions:
        return _check(
            "release.baseline",
            "reject",
            "regression against the baseline: " + "; ".join(regressions),
            "TRT906",
            path,
            ev,
        )
    if not compared:
        return _check("release.baseline", "hold", "the stored baseline has nothing comparable", "TRT906", path, ev)
    changes = ", ".join(f"{k} {v['change'] * 100:+.0f} %" for k, v in compared.items())
    within = f"no regression over {t.max_regression * 100:.0f} % against the baseline ({changes})"
    if under_floor:
        within += "; " + "; ".join(under_floor)
    return _check("release.baseline", "pass", within, "TRT906", path, ev)


def check_canary(spec: RuntimeSpec, canary_inputs: Sequence[Any], t: Thresholds, path: TomlPath = ()) -> GateCheck:
    """TRT907: the new bundle's model on the canary inputs: answers, no NaN/Inf, each within latency_p99_ms."""
    if not canary_inputs:
        return _check("release.canary", "hold", "no canary inputs: the canary has not run", "TRT907", path)
    res = run_inputs(spec, list(canary_inputs), warmup=1)
    if res.status == "unavailable":
        return _check("release.canary", "hold", f"canary cannot run here: {res.message}", "TRT907", path)
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


def sha256_of(path: str | os.PathLike[str]) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1024 * 1024), b""):
            h.update(chunk)
    return h.hexdigest()


def restore(source: str | os.PathLike[str], target: str | os.PathLike[str]) -> str:
    """Copy `source` over `target` atomically (core.atomic); return the sha256 of what was written."""
    h = hashlib.sha256()
    with open(source, "rb") as src, atomic_writer(target) as out:
        for chunk in iter(lambda: src.read(1024 * 1024), b""):
            h.update(chunk)
            out.write(chunk)
    return h.hexdigest()


def _sidecar(path: Path) -> Path:
    try:
        from trtls.bundle import sidecar_path

        return sidecar_path(path)
    except ImportError:  # pragma: no cover - bundle.py ships with trtls
        return path.with_name(path.name + ".trtls.json")


def _recorded_sha(path: Path) -> str | None:
    try:
        data = json.loads(_sidecar(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    value = data.get("file_sha256") if isinstance(data, dict) else None
    return value if isinstance(value, str) else None


@contextlib.contextmanager
def bundle_model(bundle: str | os.PathLike[str]) -> Iterator[tuple[str, Path] | str]:
    """The bundle's runnable model extracted to a temp file: yields (kind, path), or a reason string."""
    try:
        from trtls.bundle import BundleError, read_bundle
    except ImportError:  # pragma: no cover
        yield "trtls.bundle is not available"
        return
    try:
        b = read_bundle(bundle)
    except BundleError as exc:
        yield f"bundle unreadable: {exc}"
        return
    pick = next(((n, "onnxruntime") for n in MODEL_SECTIONS if n in b.sections), None) or next(
        ((n, "tensorrt") for n in ENGINE_SECTIONS if n in b.sections), None
    )
    if pick is None:
        yield f"the bundle holds no runnable model section ({', '.join(MODEL_SECTIONS + ENGINE_SECTIONS)})"
        return
    section, kind = pick
    folder = Path(tempfile.mkdtemp(prefix="trtls-smoke-"))
    try:
        target = folder / ("model.onnx" if kind == "onnxruntime" else "model.engine")
        with open(target, "wb") as out:
            for part in b.iter_section(section):
                out.write(part)
        yield kind, target
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def bundle_smoke(bundle: str | os.PathLike[str], inputs: Sequence[Any], *, timeout_s: float = 60.0) -> RunResult:
    """Smoke run: the bundle's model (ONNX section → onnxruntime; engine → tensorrt) on `inputs`; outputs finite."""
    with bundle_model(bundle) as got:
        if isinstance(got, str):
            return RunResult("unavailable" if "no runnable" in got or "not available" in got else "error", got)
        kind, model = got
        res = run_inputs(RuntimeSpec(kind, model=str(model), timeout_s=timeout_s), list(inputs))
    if res.ok:
        for i, out in enumerate(res.outputs):
            for name, arr in out.items():
                if arr.dtype.kind in "fc" and not np.isfinite(arr).all():
                    return RunResult("error", f"smoke request {i}: output {name!r} has NaN/Inf")
    return res


SmokeFn = Callable[[Path], RunResult]


def rollback_drill(
    active: str | os.PathLike[str], previous: str | os.PathLike[str] | None, smoke: SmokeFn | None, path: TomlPath = ()
) -> GateCheck:
    """TRT908: restore `previous` over `active` (atomic), verify sha256 + smoke run, then restore the new bundle and verify.

    `active` is where the runtime loads the bundle from (the new bundle is there now and is there again at
    the end, byte for byte, whatever happens in between). Sidecars (`<bundle>.trtls.json`) move with them.
    """
    name = "release.rollback"
    if previous is None:
        return _check(name, "hold", "no previous bundle: rollback cannot be exercised", "TRT908", path)
    active, previous = Path(active), Path(previous)
    if not previous.is_file():
        return _check(name, "hold", f"previous bundle not found: {previous}", "TRT908", path)
    if not active.is_file():
        return _check(name, "hold", f"the new bundle is not in place: {active}", "TRT908", path)
    if active.resolve() == previous.resolve():
        return _check(name, "hold", "the previous bundle is the active bundle itself", "TRT908", path)
    if smoke is None:
        return _check(name, "hold", "no smoke run for the restored bundle (no smoke inputs)", "TRT908", path)
    sha_new = sha256_of(active)
    sha_prev = sha256_of(previous)
    recorded_prev = _recorded_sha(previous)
    ev: dict[str, Any] = {
        "active": str(active),
        "previous": str(previous),
        "new_sha256": sha_new,
        "previous_sha256": sha_prev,
        "previous_recorded_sha256": recorded_prev,
    }
    if sha_prev == sha_new:
        return _check(
            name,
            "hold",
            "the previous bundle is byte-identical to the new one: rollback would prove nothing",
            "TRT908",
            path,
            ev,
        )
    if recorded_prev is not None and recorded_prev != sha_prev:
        return _check(
            name,
            "reject",
            f"the previous bundle does not match its sidecar record (sha256 {sha_prev[:12]}… vs recorded {recorded_prev[:12]}…)",
            "TRT908",
            path,
            ev,
        )

    side_active = _sidecar(active)
    side_prev = _sidecar(previous)
    active_sidecar_bytes = side_active.read_bytes() if side_active.is_file() else None
    stash = active.with_name(f".{active.name}.trtls-rollback-new")
    status: CheckStatus = "pass"
    message = ""
    try:
        sha_stash = restore(active, stash)
        if sha_stash != sha_new:
            return _check(
                name,
                "reject",
                "could not keep an exact copy of the new bundle; rollback not attempted",
                "TRT908",
                path,
                ev,
            )
        # 1. roll back
        restore(previous, active)
        if side_prev.is_file():
            restore(side_prev, side_active)
        restored = sha256_of(active)
        ev["restored_sha256"] = restored
        if restored != sha_prev:
            status, message = (
                "reject",
                f"after rollback the active bundle's sha256 is {restored[:12]}…, not the previous bundle's {sha_prev[:12]}…",
            )
        else:
            # 2. smoke run on the restored bundle, where the runtime loads it from
            res = smoke(active)
            ev["smoke"] = res.summary()
            if res.status == "unavailable":
                status, message = (
                    "hold",
                    f"previous bundle restored and verified (sha256 {sha_prev[:12]}…), but the smoke run cannot run here: {res.message}",
                )
            elif not res.ok:
                status, message = (
                    "reject",
                    f"previous bundle restored (sha256 verified) but its smoke run failed: {res.summary()}",
                )
    finally:
        # 3. roll forward: the new bundle back in place, always
        if stash.is_file():
            restore(stash, active)
            stash.unlink(missing_ok=True)
        if active_sidecar_bytes is not None:
            atomic_write_bytes(side_active, active_sidecar_bytes)
        elif side_active.is_file() and side_prev.is_file():
            side_active.unlink(missing_ok=True)
    final = sha256_of(active)
    ev["final_sha256"] = final
    if final != sha_new:
        return _check(
            name,
            "reject",
            f"the new bundle was not restored: sha256 {final[:12]}… instead of {sha_new[:12]}…",
            "TRT908",
            path,
            ev,
        )
    if status != "pass":
        return _check(name, status, message, "TRT908", path, ev)
    return _check(
        name,
        "pass",
        f"rollback exercised: previous bundle restored (sha256 {sha_prev[:12]}… verified), smoke run ok; new bundle restored (sha256 {sha_new[:12]}… verified)",
        "TRT908",
        path,
        ev,
    )


# ---------------------------------------------------------------------------------------------- gate 5


def check_release(
    spec: RuntimeSpec,
    inputs: Sequence[Any],
    *,
    root: str | os.PathLike[str],
    route: str,
    thresholds: Any = None,
    canary_inputs: Sequence[Any] | None = None,
    build_summary: str | os.PathLike[str] | None = None,
    active_bundle: str | os.PathLike[str] | None = None,
    previous_bundle: str | os.PathLike[str] | None = None,
    smoke_inputs: Sequence[Any] | None = None,
    smoke: SmokeFn | None = None,
    update_baseline: bool = False,
    paths: Mapping[str, TomlPath] | None = None,
) -> list[GateCheck]:
    """Gate 5's checks.

    `spec`: the new bundle's model as a runtime; `inputs`: benchmark inputs (.npz paths or dicts);
    `root`: the folder holding `.trtls/` (the recipe's folder); `build_summary`: the build evidence
    summary.json (`durationS`); `smoke` defaults to `bundle_smoke(bundle, smoke_inputs or inputs)`.
    `paths` keys: "thresholds", "canary_inputs", "previous_bundle", "bundle", "runtime", "build", "route".
    """
    paths = dict(paths or {})
    t = Thresholds.of(thresholds)
    checks: list[GateCheck] = []
    m = (
        measure(spec, inputs, warmup=t.warmup, iterations=t.iterations)
        if inputs
        else RunResult("error", "no benchmark inputs")
    )
    if isinstance(m, RunResult):
        status: CheckStatus = "hold" if m.status == "unavailable" or not inputs else "reject"
        checks.append(
            _check(
                "release.measure",
                status,
                f"cannot measure the runtime: {m.summary()}",
                "TRT909",
                toml_path(paths, "runtime"),
            )
        )
    else:
        checks.append(
            _check(
                "release.measure",
                "pass",
                f"measured {m.iterations} requests on {m.runtime}",
                "TRT909",
                toml_path(paths, "runtime"),
                m.as_dict(),
            )
        )
        checks += check_performance(m, t, paths)
        base = load_baseline(root, route)
        checks.append(check_baseline(m, base, t, toml_path(paths, "thresholds")))
        if update_baseline:
            write_baseline(
                root,
                route,
                m,
                bundle_sha256=sha256_of(active_bundle) if active_bundle and Path(active_bundle).is_file() else None,
            )
    checks.append(check_build_time(build_summary, t, toml_path(paths, "build")))
    checks.append(check_canary(spec, list(canary_inputs or []), t, toml_path(paths, "canary_inputs")))
    if smoke is None:
        smoke_set = list(smoke_inputs or inputs or [])
        smoke = (lambda p: bundle_smoke(p, smoke_set, timeout_s=spec.timeout_s)) if smoke_set else None
    if active_bundle is None:
        checks.append(
            _check(
                "release.rollback",
                "hold",
                "no active bundle given: rollback cannot be exercised",
                "TRT908",
                toml_path(paths, "bundle"),
            )
        )
    else:
        checks.append(rollback_drill(active_bundle, previous_bundle, smoke, toml_path(paths, "previous_bundle")))
    return checks


def record_of(checks: Sequence[GateCheck]) -> dict[str, str]:
    """canary_status / rollback_status for the route summary (CBAT vocabulary)."""
    by = {c.name: c.status for c in checks}
    canary = {"pass": "pass", "reject": "failed"}.get(by.get("release.canary", ""), "not_started")
    rollback = {"pass": "tested", "reject": "failed"}.get(by.get("release.rollback", ""), "blocked")
    return {"canary_status": canary, "rollback_status": rollback}


# ------------------------------------------------------------------------------ orchestrator hook (run.py)


def _build_summary(ctx: Any) -> Path | None:
    ev = getattr(getattr(ctx, "gate2", None), "evidence", None)
    if isinstance(ev, dict) and ev.get("path"):
        return Path(ev["path"])
    try:
        from trtls.gates.environment import latest_successful_build
    except ImportError:  # pragma: no cover
        return None
    linked = latest_successful_build(Path(ctx.recipe_dir), ctx.route.engine)
    return linked[0] if linked else None


def run_gate(ctx: Any) -> list[GateCheck]:
    """Gate 5 for `trtls.gates.run`: measures the route's runtime under test on its reference inputs,
    canary on `canary_inputs`, rollback drill from `bundle` (active) to `previous_bundle`.
    Never writes the baseline (use `write_baseline` / a CLI flag to record one deliberately)."""
    from trtls.gates.parity import route_runtimes

    route = ctx.route
    base: TomlPath = ("routes", ctx.route_name)
    spec, _, _, problems = route_runtimes(ctx)
    if spec is None or problems:
        checks = problems or [_check("release.measure", "hold", "no runtime to measure", "TRT909", base + ("runtime",))]
    else:
        ref_inputs = [ctx.resolve(route.reference_inputs)] if getattr(route, "reference_inputs", None) else []
        canary = [ctx.resolve(route.canary_inputs)] if getattr(route, "canary_inputs", None) else []
        previous = ctx.resolve(route.previous_bundle) if getattr(route, "previous_bundle", None) else None
        checks = check_release(
            spec,
            ref_inputs,
            root=ctx.recipe_dir,
            route=ctx.route_name,
            thresholds=getattr(route, "thresholds", None),
            canary_inputs=canary,
            build_summary=_build_summary(ctx),
            active_bundle=ctx.resolve(route.bundle),
            previous_bundle=previous,
            paths={"route": base, "build": ("engines", route.engine)},
        )
    ctx.record.update(record_of(checks))
    return checks
