"""Gate 4's numbers: per-output tolerances (Polygraphy semantics), error statistics, signature and NaN/Inf checks."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pydantic import ValidationError

from trtls.core.gate_result import CheckStatus
from trtls.core.route import Tolerance

DEFAULT_QUANTILE = 0.99


# ------------------------------------------------------------------------------------------ tolerances


def as_tolerance(value: Any) -> tuple[Tolerance, list[str]]:
    """A route's tolerance entry (a `core.route.Tolerance`, or a table of its keys) and what is wrong with it
    (then the defaults stand in, and gate 4 holds on the key)."""
    if isinstance(value, Tolerance):
        return value, []
    data = dict(value) if isinstance(value, Mapping) else {}
    if "error_quantile" in data and "quantile" not in data:  # Polygraphy's name
        data["quantile"] = data.pop("error_quantile")
    try:
        return Tolerance.model_validate(data), []
    except ValidationError as exc:
        return Tolerance(), [f"{'.'.join(map(str, e['loc'])) or 'value'}: {e['msg']}" for e in exc.errors()]


def tolerance_for(tolerances: Mapping[str, Any], output: str) -> tuple[Tolerance, str | None]:
    """The tolerance for `output` and the `tolerances` key it came from (None = defaults)."""
    if output in tolerances:
        return as_tolerance(tolerances[output])[0], output
    if "*" in tolerances:
        return as_tolerance(tolerances["*"])[0], "*"
    return Tolerance(), None


# ------------------------------------------------------------------------------------------ statistics


def error_arrays(out: np.ndarray, ref: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(absdiff, reldiff, |ref|) in float64 over elements where both are finite; identical non-finite
    values (NaN vs NaN, +Inf vs +Inf) count as equal and are left out."""
    o = np.asarray(out, dtype=np.float64).ravel()
    r = np.asarray(ref, dtype=np.float64).ravel()
    both = np.isfinite(o) & np.isfinite(r)
    o, r = o[both], r[both]
    absdiff = np.abs(o - r)
    absref = np.abs(r)
    with np.errstate(divide="ignore", invalid="ignore"):
        reldiff = np.where(absref > 0, absdiff / np.where(absref > 0, absref, 1.0), np.where(absdiff > 0, np.inf, 0.0))
    return absdiff, reldiff, absref


def nonfinite_mismatches(out: np.ndarray, ref: np.ndarray) -> int:
    """Elements where one side is NaN or ±Inf and the other is not the same value: errors `error_arrays` leaves out
    (they have no finite distance), so they are counted here and never read as "0 outside"."""
    o = np.asarray(out, dtype=np.float64).ravel()
    r = np.asarray(ref, dtype=np.float64).ravel()
    finite = np.isfinite(o) & np.isfinite(r)
    same = (np.isnan(o) & np.isnan(r)) | (o == r)
    return int((~finite & ~same).sum())


def error_stats(absdiff: np.ndarray, reldiff: np.ndarray) -> dict[str, float]:
    """max / mean / median / p95 / p99 of the absolute and relative error (0 for no elements)."""
    stats: dict[str, float] = {"elements": float(absdiff.size)}
    for kind, arr in (("abs", absdiff), ("rel", reldiff)):
        if arr.size == 0:
            for s in ("max", "mean", "median", "p95", "p99"):
                stats[f"{s}_{kind}"] = 0.0
            continue
        finite = arr[np.isfinite(arr)]
        stats[f"max_{kind}"] = float(arr.max())
        stats[f"mean_{kind}"] = float(arr.mean()) if finite.size == arr.size else math.inf
        stats[f"median_{kind}"] = float(np.median(arr))
        stats[f"p95_{kind}"] = (
            float(np.quantile(arr, 0.95, method="linear"))
            if finite.size == arr.size
            else float(np.quantile(arr, 0.95, method="higher"))
        )
        stats[f"p99_{kind}"] = (
            float(np.quantile(arr, 0.99, method="linear"))
            if finite.size == arr.size
            else float(np.quantile(arr, 0.99, method="higher"))
        )
    return stats


# absolute-error histogram bins, fixed so two runs (or two routes) read alike: under 1e-9, each decade to 1, 1 and over
HISTOGRAM_EDGES = (0.0, *(10.0**e for e in range(-9, 1)), math.inf)


def error_histogram(absdiff: np.ndarray, nonfinite: int = 0) -> list[dict[str, Any]]:
    """Counts of absolute errors per decade (`HISTOGRAM_EDGES`), then NaN/Inf where the reference has a number."""
    counts, _ = np.histogram(absdiff, bins=np.asarray(HISTOGRAM_EDGES))
    out = []
    for lo, hi, n in zip(HISTOGRAM_EDGES[:-1], HISTOGRAM_EDGES[1:], counts, strict=True):
        label = f"< {hi:.0e}" if lo == 0 else f">= {lo:.0e}" if math.isinf(hi) else f"{lo:.0e} – {hi:.0e}"
        out.append({"bin": label, "count": int(n)})
    out.append({"bin": "NaN/Inf", "count": int(nonfinite)})
    return out


def largest_error(outs: Sequence[np.ndarray], refs: Sequence[np.ndarray]) -> dict[str, Any] | None:
    """Where the largest absolute error is: the reference input, the element's index in the output, both values
    (a NaN or Inf where the reference has a number counts as the largest)."""
    best: dict[str, Any] | None = None
    best_err = -1.0
    for i, (out, ref) in enumerate(zip(outs, refs, strict=True)):
        o = np.asarray(out, dtype=np.float64)
        r = np.asarray(ref, dtype=np.float64)
        if o.shape != r.shape or o.size == 0:
            continue
        finite = np.isfinite(o) & np.isfinite(r)
        same = (np.isnan(o) & np.isnan(r)) | (o == r)
        with np.errstate(invalid="ignore"):
            err = np.where(finite, np.abs(o - r), np.where(same, 0.0, np.inf))
        k = int(np.argmax(err))
        if float(err.flat[k]) > best_err:
            best_err = float(err.flat[k])
            index = [int(x) for x in np.unravel_index(k, o.shape)]
            ref_v = float(r.flat[k])
            best = {
                "input": i,
                "index": index,
                "value": float(o.flat[k]),
                "reference": ref_v,
                "abs_error": best_err,
                "rel_error": best_err / abs(ref_v) if ref_v else (0.0 if best_err == 0 else math.inf),
            }
    return best


def cosine_similarity(outs: Sequence[np.ndarray], refs: Sequence[np.ndarray]) -> dict[str, Any] | None:
    """Per-vector cosine similarity over the last axis (an embedding per row, or per token), as TRTMC's BERT
    comparator judges against transformers: the smallest, where it is, and the mean; None for an output that is not
    a float array of vectors."""
    sims: list[float] = []
    where: list[tuple[int, list[int]]] = []
    for i, (out, ref) in enumerate(zip(outs, refs, strict=True)):
        o, r = np.asarray(out), np.asarray(ref)
        if o.dtype.kind != "f" or o.shape != r.shape or o.ndim < 2 or o.shape[-1] < 2:
            return None
        o2 = o.astype(np.float64).reshape(-1, o.shape[-1])
        r2 = r.astype(np.float64).reshape(-1, r.shape[-1])
        norms = np.linalg.norm(o2, axis=1) * np.linalg.norm(r2, axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            cos = np.where(norms > 0, np.sum(o2 * r2, axis=1) / np.where(norms > 0, norms, 1.0), np.nan)
        for k, c in enumerate(cos):
            if np.isfinite(c):
                sims.append(float(c))
                where.append((i, [int(x) for x in np.unravel_index(k, o.shape[:-1])]))
    if not sims:
        return None
    k = int(np.argmin(sims))
    return {
        "min": sims[k],
        "mean": float(np.mean(sims)),
        "vectors": len(sims),
        "min_at": {"input": where[k][0], "index": where[k][1]},
    }


@dataclass
class OutputComparison:
    name: str
    passed: bool
    message: str
    tolerance: Tolerance
    tolerance_key: str | None
    stats: dict[str, float] = field(default_factory=dict)
    largest: dict[str, Any] | None = None  # where the largest absolute error is, with both values
    histogram: list[dict[str, Any]] = field(default_factory=list)  # absolute errors per decade
    cosine: dict[str, Any] | None = None  # per-vector cosine similarity (outputs of vectors)
    compared: int = -1  # elements with a number on both sides; 0: nothing was compared (not_checked, not a pass)

    @property
    def status(self) -> CheckStatus:
        """`parity.tolerance`'s status: pass or reject as measured, not_checked when no element was compared."""
        if self.compared == 0 and not self.stats.get("nonfinite_mismatches"):
            return "not_checked"  # Polygraphy's own verdict over no number (a fail for NaN against NaN) is no measure
        return "pass" if self.passed else "reject"


def _polygraphy_verdict(
    name: str, outs: Sequence[np.ndarray], refs: Sequence[np.ndarray], tol: Tolerance
) -> tuple[bool, dict[str, float]]:
    """Polygraphy's own comparator (`CompareFunc.simple`, what `polygraphy run --atol/--rtol/--check-error-stat`
    uses, `SimpleCompareFunc`) on each reference input: (passed on every input, the statistic it checked, worst over
    the inputs)."""
    from polygraphy.comparator import IterationResult, SimpleCompareFunc

    from trtls.checkpoint.golden import quiet_polygraphy

    quiet_polygraphy()
    compare = SimpleCompareFunc(
        atol={name: tol.atol},
        rtol={name: tol.rtol},
        check_error_stat={name: tol.check_error_stat},
        error_quantile={name: tol.quantile if tol.quantile is not None else DEFAULT_QUANTILE},
        infinities_compare_equal=True,
    )
    passed, checked = True, {"abs": 0.0, "rel": 0.0}
    for out, ref in zip(outs, refs, strict=True):
        result = compare(
            IterationResult({name: np.asarray(out)}, runner_name="runtime under test"),
            IterationResult({name: np.asarray(ref)}, runner_name="reference"),
        )[name]
        passed = passed and bool(result)
        stat = "max" if tol.check_error_stat == "elemwise" else tol.check_error_stat
        for kind in ("abs", "rel"):
            value = getattr(result, f"{stat}_{kind}diff")
            if value is not None:
                checked[kind] = max(checked[kind], float(value))
    return passed, checked


def compare_output(
    name: str, outs: Sequence[np.ndarray], refs: Sequence[np.ndarray], tol: Tolerance, tolerance_key: str | None = None
) -> OutputComparison:
    """Compare one output over every reference input (`outs[i]` vs `refs[i]`, same shapes).

    The verdict is Polygraphy's comparator's (its semantics, not a copy: an element fails `elemwise` when it is
    outside both atol and rtol; a statistic fails when both its absolute and relative values exceed them); the
    error statistics recorded as evidence (max/mean/median/p95/p99) are computed here over all inputs."""
    parts = [error_arrays(o, r) for o, r in zip(outs, refs, strict=True)]
    absdiff = np.concatenate([p[0] for p in parts]) if parts else np.zeros(0)
    reldiff = np.concatenate([p[1] for p in parts]) if parts else np.zeros(0)
    stats = error_stats(absdiff, reldiff)
    stat = tol.check_error_stat
    passed, checked = _polygraphy_verdict(name, outs, refs, tol)
    where = f"output {name!r}"
    q = tol.quantile if tol.quantile is not None else DEFAULT_QUANTILE
    label = f"quantile({q:g})" if stat == "quantile" else stat
    stats[f"checked_{stat}_abs"], stats[f"checked_{stat}_rel"] = checked["abs"], checked["rel"]
    nonfinite = sum(nonfinite_mismatches(o, r) for o, r in zip(outs, refs, strict=True))
    stats["nonfinite_mismatches"] = nonfinite
    passed = passed and nonfinite == 0  # a NaN or Inf where the reference has a number is never within tolerance
    if stat == "elemwise":
        bad = int(((absdiff > tol.atol) & (reldiff > tol.rtol)).sum()) + nonfinite
        total = sum(int(np.asarray(r).size) for r in refs)
        figures = (
            f"{bad} of {total} elements outside both atol {tol.atol:g} and rtol {tol.rtol:g}"
            + (f", {nonfinite} of them NaN or Inf where the reference is not" if nonfinite else "")
            + f" (max abs error {stats['max_abs']:.3g}, max rel error {stats['max_rel']:.3g})"
        )
        message = f"{where}: elemwise check {'passed' if passed else 'failed'}: {figures}"
    else:
        relation = "within" if passed else "over"
        message = (
            f"{where}: {label} abs error {checked['abs']:.3g} (atol {tol.atol:g}), {label} rel error "
            f"{checked['rel']:.3g} (rtol {tol.rtol:g}): {relation} tolerance (check_error_stat = {stat})"
        )
    compared = int(absdiff.size)
    if compared == 0 and nonfinite == 0:  # every element NaN/Inf alike on both sides, or none: nothing measured
        message = (
            f"{where}: not_checked: no element to compare (the output is empty, or every element is NaN or Inf on "
            "both sides alike)"
        )
    largest = largest_error(outs, refs)
    if largest is not None and largest["abs_error"] > 0:
        message += (
            f"; largest error at input {largest['input']} index {largest['index']}: {largest['value']:.6g} vs "
            f"reference {largest['reference']:.6g}"
        )
    cosine = cosine_similarity(outs, refs)
    if cosine is not None and (tol.cosine_min is not None or any(w in name for w in ("embedding", "hidden_state"))):
        judged = "judged by parity.cosine" if tol.cosine_min is not None else "a figure, not judged: no cosine_min"
        message += f"; cosine similarity min {cosine['min']:.6f} over {cosine['vectors']} vectors ({judged})"
    return OutputComparison(
        name, passed, message, tol, tolerance_key, stats, largest, error_histogram(absdiff, nonfinite), cosine, compared
    )


def judge_cosine(name: str, cosine: Mapping[str, Any] | None, cosine_min: float) -> tuple[CheckStatus, str]:
    """(status, message) of `parity.cosine:<output>`: every vector's cosine similarity with the reference's at least
    the tolerance's `cosine_min` (pass), one under it (reject), or none computed (not_checked, saying why)."""
    where = f"output {name!r}"
    if cosine is None:
        return (
            "not_checked",
            f"{where}: cosine_min {cosine_min:g} is declared but no cosine similarity could be computed (the output is "
            "not float vectors along a last axis of 2 or more, or no vector has a nonzero norm on both sides)",
        )
    at = cosine["min_at"]
    figures = (
        f"cosine similarity min {cosine['min']:.6f} at input {at['input']} vector {at['index']} (mean "
        f"{cosine['mean']:.6f} over {cosine['vectors']} vectors)"
    )
    if cosine["min"] >= cosine_min:
        return "pass", f"{where}: {figures}, at least cosine_min {cosine_min:g}"
    return "reject", f"{where}: {figures}, under cosine_min {cosine_min:g}"


def signature_problems(test: Mapping[str, np.ndarray], ref: Mapping[str, np.ndarray]) -> list[str]:
    problems = []
    missing = sorted(set(ref) - set(test))
    extra = sorted(set(test) - set(ref))
    if missing:
        problems.append(f"outputs missing from the runtime under test: {', '.join(missing)}")
    if extra:
        problems.append(f"outputs the reference does not have: {', '.join(extra)}")
    for name in sorted(set(ref) & set(test)):
        t, r = np.asarray(test[name]), np.asarray(ref[name])
        if t.shape != r.shape:
            problems.append(f"output {name!r}: shape {t.shape} but the reference gives {r.shape}")
        if t.dtype != r.dtype:
            problems.append(f"output {name!r}: dtype {t.dtype} but the reference gives {r.dtype}")
    return problems


def nonfinite_problems(test: Mapping[str, np.ndarray], ref: Mapping[str, np.ndarray]) -> tuple[list[str], list[str]]:
    """(problems of the runtime under test, problems of the reference) — NaN/Inf the other side lacks."""
    bad_test, bad_ref = [], []
    for name in sorted(set(ref) & set(test)):
        t, r = np.asarray(test[name]), np.asarray(ref[name])
        if t.dtype.kind not in "fc" and r.dtype.kind not in "fc":
            continue
        if t.shape != r.shape:
            continue
        tf, rf = np.isfinite(t.astype(np.float64)), np.isfinite(r.astype(np.float64))
        n_ref = int((~rf).sum())
        if n_ref:
            bad_ref.append(f"output {name!r}: the reference itself has {n_ref} NaN/Inf values")
        n = int((~tf & rf).sum())
        if n:
            n_nan = int((np.isnan(t.astype(np.float64)) & rf).sum())
            bad_test.append(
                f"output {name!r}: {n} non-finite values ({n_nan} NaN, {n - n_nan} Inf) where the reference is finite"
            )
    return bad_test, bad_ref
