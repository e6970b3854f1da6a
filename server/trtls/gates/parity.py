"""Gate 4 — parity: the runtime under test against a reference runtime, on the route's reference inputs.

Polygraphy names and semantics (`polygraphy run --atol/--rtol/--check-error-stat/--validate`):

* per output `atol`, `rtol` (defaults 1e-5 each); `tolerances` maps output name → tolerance, `*` = the rest;
* `check_error_stat = "elemwise"` (default): every element must satisfy |out - ref| <= atol + rtol * |ref|;
  `max` / `mean` / `median` / `quantile` (with `quantile`, Polygraphy's `error_quantile`, default 0.99):
  the output fails when the statistic of the absolute error exceeds atol AND the same statistic of the
  relative error (|out - ref| / |ref|) exceeds rtol — either one within tolerance passes, as in Polygraphy;
* NaN/Inf (`--validate`): a non-finite value the reference does not have is a failure on its own;
* output names, shapes and dtypes must match exactly.

Statistics recorded per output (evidence of the tolerance check): max / mean / median / p95 / p99 of the
absolute and the relative error, over every reference input.

Also checked: malformed inputs (wrong shape, wrong dtype, NaN, empty, oversized) must each get a clean
error from the runtime under test within its timeout — a hang, a crash, or outputs returned for a
malformed input fail the check; N concurrent requests must give exactly the serial outputs (bitwise by
default, `concurrency_exact=False` uses the output tolerance); the tokenizer: when the route carries a
tokenizer.json and text prompts, the token ids the runtime under test is fed must be identical to the
ids the reference tokenizer gives (see `TokenizerParity`).

A runtime that cannot run here (TensorRT without a GPU it accepts) gives a `hold` with the reason — never
a pass. A runtime with FAULT INJECTION (`perturb > 0`) is always held, whatever its numbers.

Codes: TRT801 runtime unavailable · TRT802 run failed · TRT803 signature · TRT804 NaN/Inf · TRT805 tolerance
· TRT806 tokenizer · TRT807 malformed inputs · TRT808 concurrency · TRT809 fault injection · TRT810 config.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from trtls.core.findings import TomlPath
from trtls.core.gate_result import CheckStatus, GateCheck
from trtls.runtimes import RunResult, RuntimeSpec, load_npz, run_concurrent, run_inputs

GATE = 4
ERROR_STATS = ("max", "mean", "median", "quantile", "elemwise")
DEFAULT_ATOL = 1e-5
DEFAULT_RTOL = 1e-5
DEFAULT_QUANTILE = 0.99
MALFORMED_CASES = ("wrong_shape", "wrong_dtype", "nan", "empty", "oversized")

# Runtime names a route may use (core.route.KNOWN_RUNTIMES) → adapter kind.
RUNTIME_ALIASES = {
    "onnxruntime": "onnxruntime",
    "onnx.reference": "onnx_reference",
    "onnx_reference": "onnx_reference",
    "tensorrt": "tensorrt",
    "tensorrt_rtx": "tensorrt",
    "trtmc": "command",  # the native C++ task runtime: give its runner as `command`
    "command": "command",
}


def runtime_spec(
    name: str,
    model: str | Path | None = None,
    *,
    command: Sequence[str] | None = None,
    perturb: float = 0.0,
    timeout_s: float = 60.0,
    **extra: Any,
) -> RuntimeSpec:
    """A `RuntimeSpec` from a route's runtime name (`onnxruntime`, `onnx.reference`, `tensorrt`, `trtmc`, `command`).

    `perturb` is FAULT INJECTION (tests and the sample's failing variant only).
    """
    kind = RUNTIME_ALIASES.get(name, name)
    return RuntimeSpec(
        kind,
        model=str(model) if model is not None else None,
        command=list(command) if command else None,
        perturb=perturb,
        timeout_s=timeout_s,
        **extra,
    )


# ------------------------------------------------------------------------------------------ tolerances


@dataclass(frozen=True)
class Tolerance:
    atol: float = DEFAULT_ATOL
    rtol: float = DEFAULT_RTOL
    check_error_stat: str = "elemwise"
    quantile: float | None = None  # Polygraphy: error_quantile

    @classmethod
    def of(cls, value: Any) -> Tolerance:
        """From a Tolerance, a core.route.Tolerance (any object with these attributes) or a dict."""
        if isinstance(value, Tolerance):
            return value
        get = value.get if isinstance(value, Mapping) else (lambda k, d=None: getattr(value, k, d))
        q = get("quantile", None)
        if q is None:
            q = get("error_quantile", None)
        return cls(
            atol=float(get("atol", DEFAULT_ATOL) if get("atol", None) is not None else DEFAULT_ATOL),
            rtol=float(get("rtol", DEFAULT_RTOL) if get("rtol", None) is not None else DEFAULT_RTOL),
            check_error_stat=str(get("check_error_stat", "elemwise") or "elemwise"),
            quantile=None if q is None else float(q),
        )

    def problems(self) -> list[str]:
        out = []
        if self.check_error_stat not in ERROR_STATS:
            out.append(f"check_error_stat {self.check_error_stat!r} is not one of {', '.join(ERROR_STATS)}")
        if not (self.atol >= 0 and self.rtol >= 0):
            out.append("atol and rtol must be >= 0")
        if self.quantile is not None and not (0 < self.quantile <= 1):
            out.append(f"quantile {self.quantile} must be in (0, 1]")
        return out


def tolerance_for(tolerances: Mapping[str, Any], output: str) -> tuple[Tolerance, str | None]:
    """The tolerance for `output` and the `tolerances` key it came from (None = defaults)."""
    if output in tolerances:
        return Tolerance.of(tolerances[output]), output
    if "*" in tolerances:
        return Tolerance.of(tolerances["*"]), "*"
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


def _stat(arr: np.ndarray, which: str, q: float) -> float:
    if arr.size == 0:
        return 0.0
    if which == "max":
        return float(arr.max())
    if which == "mean":
        return float(arr.mean())
    if which == "median":
        return float(np.median(arr))
    return float(np.quantile(arr, q, method="higher"))


@dataclass
class OutputComparison:
    name: str
    passed: bool
    message: str
    tolerance: Tolerance
    tolerance_key: str | None
    stats: dict[str, float] = field(default_factory=dict)


def compare_output(
    name: str, outs: Sequence[np.ndarray], refs: Sequence[np.ndarray], tol: Tolerance, tolerance_key: str | None = None
) -> OutputComparison:
    """Compare one output over every reference input (`outs[i]` vs `refs[i]`, same shapes)."""
    parts = [error_arrays(o, r) for o, r in zip(outs, refs)]
    absdiff = np.concatenate([p[0] for p in parts]) if parts else np.zeros(0)
    reldiff = np.concatenate([p[1] for p in parts]) if parts else np.zeros(0)
    absref = np.concatenate([p[2] for p in parts]) if parts else np.zeros(0)
    stats = error_stats(absdiff, reldiff)
    stat = tol.check_error_stat
    where = f"output {name!r}"
    if stat == "elemwise":
        bad = absdiff > tol.atol + tol.rtol * absref
        n_bad = int(bad.sum())
        if n_bad:
            msg = (
                f"{where}: elemwise check failed: {n_bad} of {absdiff.size} elements outside atol {tol.atol:g} + rtol {tol.rtol:g} * |ref| "
                f"(max abs error {stats['max_abs']:.3g}, max rel error {stats['max_rel']:.3g})"
            )
            return OutputComparison(name, False, msg, tol, tolerance_key, stats)
        return OutputComparison(
            name,
            True,
            f"{where}: elemwise within atol {tol.atol:g} + rtol {tol.rtol:g} * |ref| (max abs error {stats['max_abs']:.3g})",
            tol,
            tolerance_key,
            stats,
        )
    q = tol.quantile if tol.quantile is not None else DEFAULT_QUANTILE
    label = f"quantile({q:g})" if stat == "quantile" else stat
    a, r = _stat(absdiff, stat, q), _stat(reldiff, stat, q)
    stats[f"checked_{stat}_abs"], stats[f"checked_{stat}_rel"] = a, r
    if a > tol.atol and r > tol.rtol:
        msg = f"{where}: {label} abs error {a:.3g} > atol {tol.atol:g} and {label} rel error {r:.3g} > rtol {tol.rtol:g} (check_error_stat = {stat})"
        return OutputComparison(name, False, msg, tol, tolerance_key, stats)
    return OutputComparison(
        name,
        True,
        f"{where}: {label} abs error {a:.3g} (atol {tol.atol:g}), {label} rel error {r:.3g} (rtol {tol.rtol:g})",
        tol,
        tolerance_key,
        stats,
    )


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


# ------------------------------------------------------------------------------------- malformed inputs


def malformed_cases(
    feed: Mapping[str, np.ndarray], max_input_bytes: int
) -> list[tuple[str, dict[str, np.ndarray] | None, str]]:
    """(case, feed or None when not applicable, description). Each changes the first input only."""
    if not feed:
        return []
    name = next(iter(feed))
    base = np.asarray(feed[name])
    cases: list[tuple[str, dict[str, np.ndarray] | None, str]] = []

    def with_(arr: np.ndarray) -> dict[str, np.ndarray]:
        out = dict(feed)
        out[name] = arr
        return out

    cases.append(
        ("wrong_shape", with_(base[..., np.newaxis]), f"{name!r} with an extra axis: shape {base.shape + (1,)}")
    )
    other = np.int32 if base.dtype.kind == "f" else np.float32
    cases.append(("wrong_dtype", with_(base.astype(other)), f"{name!r} as {np.dtype(other)} instead of {base.dtype}"))
    if base.dtype.kind in "fc" and base.size:
        nan = base.copy()
        nan.flat[0] = np.nan
        cases.append(("nan", with_(nan), f"{name!r} with a NaN"))
    else:
        cases.append(("nan", None, f"{name!r} is {base.dtype}: NaN cannot be expressed (not applicable)"))
    empty_shape = (0,) + base.shape[1:] if base.ndim else (0,)
    cases.append(("empty", with_(np.zeros(empty_shape, dtype=base.dtype)), f"{name!r} empty: shape {empty_shape}"))
    row = max(1, int(np.prod(base.shape[1:])) * base.dtype.itemsize) if base.ndim else base.dtype.itemsize
    rows = max_input_bytes // row + 1
    big_shape = (rows,) + base.shape[1:] if base.ndim else (rows,)
    cases.append(
        (
            "oversized",
            with_(np.zeros(big_shape, dtype=base.dtype)),
            f"{name!r} of {rows * row} bytes, over the {max_input_bytes}-byte cap",
        )
    )
    return cases


def _malformed_outcome(case: str, result: RunResult) -> tuple[str, str]:
    """('clean' | 'unavailable' | 'hang' | 'crash' | 'accepted', detail)."""
    if result.status == "error":
        return "clean", result.message
    if result.status == "timeout":
        return "hang", result.message
    if result.status == "crash":
        return "crash", result.message
    if result.status == "unavailable":
        return "unavailable", result.message
    return "accepted", "the runtime returned outputs instead of refusing the input"


# ------------------------------------------------------------------------------------------ tokenizer


@dataclass
class TokenizerParity:
    """Identical tokenizer output on both sides.

    `reference` is the route's tokenizer.json (the checkpoint's). The side under test is either another
    tokenizer.json — the copy the bundle carries to the native runtime — or the ids the native runner
    reported for the same texts (`under_test_ids`). Both are tokenized with the `tokenizers` library;
    the ids must be identical for every text (no tolerance: one differing id fails the check).
    """

    reference: str | Path
    texts: Sequence[str]
    under_test: str | Path | None = None
    under_test_ids: Sequence[Sequence[int]] | None = None


def check_tokenizer(tok: TokenizerParity, path: TomlPath = ()) -> GateCheck:
    name = "parity.tokenizer"
    try:
        from tokenizers import Tokenizer
    except ImportError:
        return _check(
            name,
            "hold",
            "the `tokenizers` library is not installed (pip install 'trtls[gates]'): tokenizer parity unproven",
            "TRT806",
            path,
        )
    try:
        ref = Tokenizer.from_file(str(tok.reference))
        ref_ids = [ref.encode(t).ids for t in tok.texts]
    except Exception as exc:
        return _check(
            name, "reject", f"reference tokenizer {Path(tok.reference).name} cannot be used: {exc}", "TRT806", path
        )
    if tok.under_test_ids is not None:
        test_ids = [list(ids) for ids in tok.under_test_ids]
        side = "ids reported by the runtime under test"
    elif tok.under_test is not None:
        try:
            test = Tokenizer.from_file(str(tok.under_test))
            test_ids = [test.encode(t).ids for t in tok.texts]
        except Exception as exc:
            return _check(
                name,
                "reject",
                f"the tokenizer under test {Path(tok.under_test).name} cannot be used: {exc}",
                "TRT806",
                path,
            )
        side = f"tokenizer {Path(tok.under_test).name}"
    else:
        return _check(
            name,
            "hold",
            "no tokenizer or token ids from the side under test: tokenizer parity unproven",
            "TRT806",
            path,
        )
    if not tok.texts:
        return _check(name, "hold", "no texts to tokenize: tokenizer parity unproven", "TRT806", path)
    if len(test_ids) != len(ref_ids):
        return _check(name, "reject", f"{side}: {len(test_ids)} id sequences for {len(ref_ids)} texts", "TRT806", path)
    for i, (a, b) in enumerate(zip(ref_ids, test_ids)):
        if a != b:
            pos = next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
            return _check(
                name,
                "reject",
                f"text {i}: token ids differ at position {pos} (reference {a[pos : pos + 5]}, {side} {b[pos : pos + 5]}; lengths {len(a)} vs {len(b)})",
                "TRT806",
                path,
                {"text_index": i, "position": pos},
            )
    return _check(
        name, "pass", f"identical token ids for {len(ref_ids)} texts ({side})", "TRT806", path, {"texts": len(ref_ids)}
    )


# -------------------------------------------------------------------------------------------- the gate


def _check(
    name: str, status: CheckStatus, message: str, code: str, path: TomlPath, evidence: dict[str, Any] | None = None
) -> GateCheck:
    return GateCheck(GATE, name, status, message, code, tuple(path), True, dict(evidence or {}))


# keys of a `[routes.NAME]` table (core.route.RouteModel) a check may concern
ROUTE_KEYS = (
    "runtime",
    "reference",
    "reference_inputs",
    "tolerances",
    "canary_inputs",
    "thresholds",
    "previous_bundle",
    "bundle",
)


def toml_path(paths: Mapping[str, TomlPath], key: str) -> TomlPath:
    """The TOML key a check concerns: `paths[key]`, else route + (key,) for a route field, else the route."""
    if key in paths:
        return tuple(paths[key])
    route = tuple(paths.get("route", ()))
    return route + (key,) if route and key in ROUTE_KEYS else route


_p = toml_path


def _feed_of(item: Any) -> dict[str, np.ndarray]:
    return dict(item) if isinstance(item, Mapping) else load_npz(item)


def check_parity(
    reference: RuntimeSpec,
    under_test: RuntimeSpec,
    inputs: Sequence[str | Path | Mapping[str, np.ndarray]],
    *,
    tolerances: Mapping[str, Any] | None = None,
    concurrency: int = 4,
    concurrency_exact: bool = True,
    malformed: bool = True,
    tokenizer: TokenizerParity | None = None,
    paths: Mapping[str, TomlPath] | None = None,
) -> list[GateCheck]:
    """Gate 4's checks. `inputs`: reference inputs (.npz paths or {name: array}), one request each.

    `paths` maps what each check concerns to its TOML key: "runtime", "reference", "reference_inputs",
    "tolerances" (a per-output check lands on tolerances.<output> or tolerances."*" when that key exists),
    "tokenizer", "route" (fallback for anything not given).
    """
    paths = dict(paths or {})
    tolerances = dict(tolerances or {})
    checks: list[GateCheck] = []
    p_rt, p_ref, p_in, p_tol = (
        _p(paths, "runtime"),
        _p(paths, "reference"),
        _p(paths, "reference_inputs"),
        _p(paths, "tolerances"),
    )

    if under_test.perturb:
        checks.append(
            _check(
                "parity.fault_injection",
                "hold",
                f"FAULT INJECTION enabled on the runtime under test (perturb = {under_test.perturb:g}): a route with it is never supported",
                "TRT809",
                p_rt,
                {"perturb": under_test.perturb},
            )
        )
    if tokenizer is not None:
        checks.append(check_tokenizer(tokenizer, _p(paths, "tokenizer")))

    config = [f"runtime: {p}" for p in under_test.problems()] + [f"reference: {p}" for p in reference.problems()]
    tol_problems = {key: Tolerance.of(v).problems() for key, v in tolerances.items()}
    for key, probs in tol_problems.items():
        for prob in probs:
            checks.append(_check("parity.config", "hold", f"tolerances.{key}: {prob}", "TRT810", p_tol + (key,)))
    if config:
        checks.append(_check("parity.config", "hold", "; ".join(config), "TRT810", p_rt))
        return checks
    if any(tol_problems.values()):
        return checks
    if not inputs:
        checks.append(_check("parity.run", "hold", "no reference inputs: parity unproven", "TRT802", p_in))
        return checks
    try:
        feeds = [_feed_of(i) for i in inputs]
    except (OSError, ValueError) as exc:
        checks.append(_check("parity.run", "hold", f"reference inputs unreadable: {exc}", "TRT802", p_in))
        return checks

    ref_res = run_inputs(reference, feeds)
    test_res = run_inputs(under_test, feeds)
    for side, res, path in (("reference", ref_res, p_ref), ("runtime under test", test_res, p_rt)):
        if res.status == "unavailable":
            checks.append(
                _check(
                    "parity.runtime_available" if side != "reference" else "parity.reference_available",
                    "hold",
                    f"{side} {reference.label if side == 'reference' else under_test.label} unavailable: {res.message}",
                    "TRT801",
                    path,
                )
            )
    if ref_res.status == "unavailable" or test_res.status == "unavailable":
        return checks
    checks.append(
        _check("parity.runtime_available", "pass", f"{under_test.kind} and {reference.kind} ran here", "TRT801", p_rt)
    )
    if not ref_res.ok:
        checks.append(
            _check(
                "parity.run",
                "hold",
                f"the reference failed on the reference inputs ({ref_res.summary()}): parity unproven",
                "TRT802",
                p_ref,
            )
        )
    if not test_res.ok:
        checks.append(
            _check(
                "parity.run",
                "reject",
                f"the runtime under test failed on the reference inputs ({test_res.summary()})",
                "TRT802",
                p_rt,
            )
        )
    if not (ref_res.ok and test_res.ok):
        return checks
    checks.append(
        _check("parity.run", "pass", f"both runtimes answered {len(feeds)} reference input(s)", "TRT802", p_rt)
    )

    sig = sorted({p for t, r in zip(test_res.outputs, ref_res.outputs) for p in signature_problems(t, r)})
    if sig:
        checks.append(_check("parity.signature", "reject", "; ".join(sig[:5]), "TRT803", p_rt, {"problems": sig}))
    else:
        checks.append(_check("parity.signature", "pass", "output names, shapes and dtypes match", "TRT803", p_rt))

    bad_test: list[str] = []
    bad_ref: list[str] = []
    for t, r in zip(test_res.outputs, ref_res.outputs):
        bt, br = nonfinite_problems(t, r)
        bad_test += bt
        bad_ref += br
    if bad_test:
        checks.append(_check("parity.finite", "reject", "; ".join(sorted(set(bad_test))[:5]), "TRT804", p_rt))
    elif bad_ref:
        checks.append(
            _check(
                "parity.finite",
                "hold",
                "; ".join(sorted(set(bad_ref))[:5]) + ": fix the reference inputs",
                "TRT804",
                p_in,
            )
        )
    else:
        checks.append(_check("parity.finite", "pass", "no NaN/Inf the reference does not have", "TRT804", p_rt))

    stats_by_output: dict[str, dict[str, float]] = {}
    if not sig:
        for name in ref_res.outputs[0]:
            tol, key = tolerance_for(tolerances, name)
            cmp = compare_output(
                name, [o[name] for o in test_res.outputs], [o[name] for o in ref_res.outputs], tol, key
            )
            stats_by_output[name] = cmp.stats
            evidence = {
                "output": name,
                "stats": cmp.stats,
                "atol": tol.atol,
                "rtol": tol.rtol,
                "check_error_stat": tol.check_error_stat,
            }
            if tol.check_error_stat == "quantile":
                evidence["quantile"] = tol.quantile if tol.quantile is not None else DEFAULT_QUANTILE
            path = p_tol + (key,) if key is not None and p_tol else p_tol
            checks.append(
                _check(
                    f"parity.tolerance:{name}",
                    "pass" if cmp.passed else "reject",
                    cmp.message,
                    "TRT805",
                    path,
                    evidence,
                )
            )

    if malformed:
        checks.append(_check_malformed(under_test, feeds[0], p_rt))
    if concurrency and concurrency > 1 and not sig:
        checks.append(
            _check_concurrency(
                under_test, feeds[0], test_res.outputs[0], concurrency, concurrency_exact, tolerances, p_rt
            )
        )
    return checks


def _check_malformed(spec: RuntimeSpec, feed: dict[str, np.ndarray], path: TomlPath) -> GateCheck:
    cases = malformed_cases(feed, spec.max_input_bytes)
    runnable = [(c, f, d) for c, f, d in cases if f is not None]
    # each case is its own child with its own timeout; run them side by side so a hanging runtime costs one timeout
    with ThreadPoolExecutor(max_workers=max(1, len(runnable))) as pool:
        results = list(pool.map(lambda c: run_inputs(spec, [c[1]]), runnable))
    outcomes: dict[str, dict[str, str]] = {
        c: {"outcome": "not_applicable", "detail": d} for c, f, d in cases if f is None
    }
    for (case, _, desc), res in zip(runnable, results):
        outcome, detail = _malformed_outcome(case, res)
        outcomes[case] = {"outcome": outcome, "detail": detail[:300], "input": desc}
    failing = {c: o for c, o in outcomes.items() if o["outcome"] in ("hang", "crash", "accepted")}
    unavailable = {c: o for c, o in outcomes.items() if o["outcome"] == "unavailable"}
    evidence = {"cases": outcomes, "timeout_s": spec.timeout_s}
    if failing:
        parts = [f"{c}: {o['outcome']} ({o['detail'][:120]})" for c, o in failing.items()]
        return _check(
            "parity.malformed",
            "reject",
            "malformed inputs not refused cleanly: " + "; ".join(parts),
            "TRT807",
            path,
            evidence,
        )
    if unavailable:
        return _check(
            "parity.malformed",
            "hold",
            "malformed-input cases could not run: " + next(iter(unavailable.values()))["detail"],
            "TRT807",
            path,
            evidence,
        )
    clean = [c for c, o in outcomes.items() if o["outcome"] == "clean"]
    return _check(
        "parity.malformed",
        "pass",
        f"every malformed input got a clean error ({', '.join(clean)})",
        "TRT807",
        path,
        evidence,
    )


def _check_concurrency(
    spec: RuntimeSpec,
    feed: dict[str, np.ndarray],
    serial: dict[str, np.ndarray],
    n: int,
    exact: bool,
    tolerances: Mapping[str, Any],
    path: TomlPath,
) -> GateCheck:
    res = run_concurrent(spec, feed, n)
    if res.status == "unavailable":
        return _check("parity.concurrency", "hold", f"concurrent run unavailable: {res.message}", "TRT808", path)
    if not res.ok:
        return _check(
            "parity.concurrency", "reject", f"{n} concurrent requests failed ({res.summary()})", "TRT808", path
        )
    diffs = []
    for k, out in enumerate(res.outputs):
        sig = signature_problems(out, serial)
        if sig:
            diffs.append(f"request {k}: {sig[0]}")
            continue
        for name in serial:
            if exact:
                if not np.array_equal(out[name], serial[name], equal_nan=out[name].dtype.kind in "fc"):
                    diffs.append(
                        f"request {k}: output {name!r} differs from the serial run (max abs diff {float(np.max(np.abs(out[name].astype(np.float64) - serial[name].astype(np.float64)))):.3g})"
                    )
            else:
                tol, _ = tolerance_for(tolerances, name)
                cmp = compare_output(name, [out[name]], [serial[name]], tol)
                if not cmp.passed:
                    diffs.append(f"request {k}: {cmp.message}")
    mode = "bitwise" if exact else "within tolerance"
    if diffs:
        return _check(
            "parity.concurrency",
            "reject",
            f"{len(diffs)} of {n} concurrent outputs differ from serial ({mode}): " + "; ".join(diffs[:3]),
            "TRT808",
            path,
            {"n": n, "exact": exact},
        )
    return _check(
        "parity.concurrency",
        "pass",
        f"{n} concurrent requests gave the serial outputs ({mode})",
        "TRT808",
        path,
        {"n": n, "exact": exact},
    )


# ------------------------------------------------------------------------------ orchestrator hook (run.py)

RUNTIME_OPTIONS = (
    "threads",
    "timeout_s",
    "command",
    "perturb",
    "perturb_seed",
    "max_input_bytes",
    "model",
    "concurrency",
    "malformed",
    "concurrency_exact",
)


def route_runtimes(ctx: Any) -> tuple[RuntimeSpec | None, RuntimeSpec | None, dict[str, Any], list[GateCheck]]:
    """(runtime under test, reference, gate-4 options, config checks) from a `run.GateContext` (duck-typed).

    Models: onnxruntime / onnx.reference run the route engine's ONNX model; tensorrt / tensorrt_rtx run the
    engine file the recipe writes (`engines.X.output`); `trtmc` / `command` run `runtime_options.command`
    (argv list or a shell-style string, run from the recipe folder). `runtime_options.model` overrides the model.
    """
    import shlex

    route = ctx.route
    base: TomlPath = ("routes", ctx.route_name)
    opts = dict(getattr(route, "runtime_options", None) or {})
    problems: list[GateCheck] = []
    for key in opts:
        if key not in RUNTIME_OPTIONS:
            problems.append(
                _check(
                    "parity.config",
                    "hold",
                    f"unknown runtime option {key!r} (known: {', '.join(RUNTIME_OPTIONS)})",
                    "TRT810",
                    base + ("runtime_options", key),
                )
            )
    eng = ctx.loaded.engine(route.engine)
    onnx_path, engine_path = ctx.resolve(eng.onnx), ctx.resolve(eng.output)

    def spec_for(name: str, options: dict[str, Any], key: str) -> RuntimeSpec | None:
        kind = RUNTIME_ALIASES.get(name)
        if kind is None:
            problems.append(
                _check(
                    "parity.config",
                    "hold",
                    f"runtime {name!r} is not one gate 4 can run (known: {', '.join(RUNTIME_ALIASES)})",
                    "TRT810",
                    base + (key,),
                )
            )
            return None
        model = options.get("model")
        model_path = (
            ctx.resolve(model)
            if model
            else (engine_path if kind == "tensorrt" else onnx_path if kind != "command" else None)
        )
        command = options.get("command")
        if isinstance(command, str):
            command = shlex.split(command)
        kw = {
            k: options[k]
            for k in ("threads", "timeout_s", "perturb", "perturb_seed", "max_input_bytes")
            if k in options
        }
        try:
            return RuntimeSpec(
                kind,
                model=str(model_path) if model_path else None,
                command=list(command) if command else None,
                cwd=str(ctx.recipe_dir),
                **kw,
            )
        except TypeError as exc:
            problems.append(
                _check("parity.config", "hold", f"runtime options: {exc}", "TRT810", base + ("runtime_options",))
            )
            return None

    under_test = spec_for(route.runtime, opts, "runtime")
    reference = spec_for(route.reference, {}, "reference")
    return under_test, reference, opts, problems


def route_tokenizer(ctx: Any, texts: Sequence[str], folder: Path) -> tuple[TokenizerParity | None, str | None]:
    """The route's tokenizer parity: the checkpoint's tokenizer.json (reference) against the copy the bundle
    carries (its `tokenizer.json` section, written to `folder`). (parity, None), or (None, why it cannot run)."""
    from trtls.gates.source import resolve_layout

    route = ctx.route
    layout = resolve_layout(ctx.resolve(route.checkpoint.path), route.checkpoint.revision, route.checkpoint.id)
    snapshot = layout.files_dir
    if layout.problem or snapshot is None:
        return (
            None,
            f"the checkpoint's files cannot be located ({layout.problem or 'no snapshot for the pinned revision'})",
        )
    ref = snapshot / "tokenizer.json"
    if not ref.is_file():
        return None, "the checkpoint has no tokenizer.json"
    if not ref.resolve().is_relative_to(layout.root):  # gate 1's rule: never follow a path out of the checkpoint
        return None, "the checkpoint's tokenizer.json resolves outside the checkpoint"
    try:
        from trtls.bundle import BundleError, read_bundle

        bundle = read_bundle(ctx.resolve(route.bundle))
        if "tokenizer.json" not in bundle.sections:
            return None, f"the bundle {Path(route.bundle).name} carries no tokenizer.json section"
        section = bundle.read_section("tokenizer.json")
    except ImportError:  # pragma: no cover - bundle.py ships with trtls
        return None, "trtls.bundle is not installed"
    except (BundleError, OSError) as exc:
        return None, f"the bundle's tokenizer.json (what the runtime gets) cannot be read: {exc}"
    carried = folder / "bundle-tokenizer.json"
    carried.write_bytes(section)
    return TokenizerParity(reference=ref, texts=list(texts), under_test=carried), None


def run_gate(ctx: Any) -> list[GateCheck]:
    """Gate 4 for `trtls.gates.run` (`hook(ctx) -> list[GateCheck]`); writes validation_status/runtime_target."""
    import tempfile

    from trtls.core.gate_result import decide

    base: TomlPath = ("routes", ctx.route_name)
    under_test, reference, opts, checks = route_runtimes(ctx)
    if under_test is not None and reference is not None and not checks:
        ref_inputs = getattr(ctx.route, "reference_inputs", None)
        inputs = [ctx.resolve(ref_inputs)] if ref_inputs else []
        texts = getattr(ctx.route, "tokenizer_texts", None)
        p_tok = base + ("tokenizer_texts",)
        with tempfile.TemporaryDirectory(prefix="trtls-tokenizer-") as tmp:
            tokenizer, why_not = route_tokenizer(ctx, texts, Path(tmp)) if texts else (None, None)
            checks = check_parity(
                reference,
                under_test,
                inputs,
                tolerances=dict(getattr(ctx.route, "tolerances", None) or {}),
                concurrency=int(opts.get("concurrency", 4)),
                concurrency_exact=bool(opts.get("concurrency_exact", True)),
                malformed=bool(opts.get("malformed", True)),
                tokenizer=tokenizer,
                paths={"route": base, "tokenizer": p_tok},
            )
        if why_not is not None:
            checks.insert(
                0, _check("parity.tokenizer", "hold", f"tokenizer parity unproven: {why_not}", "TRT806", p_tok)
            )
        ctx.record["runtime_target"] = under_test.label
    ctx.record["validation_status"] = {"supported": "pass", "reject": "reject"}.get(decide(checks), "hold")
    return checks
