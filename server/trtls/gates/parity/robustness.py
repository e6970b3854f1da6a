"""Gate 4's robustness checks: malformed inputs must get a clean error; N concurrent requests give the serial
outputs."""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

import numpy as np

from trtls.core.findings import TomlPath
from trtls.core.gate_result import GateCheck, gate_check
from trtls.gates.parity.compare import compare_output, signature_problems, tolerance_for
from trtls.gates.parity.text_malformed import TEXT_MUST_REFUSE, over_long_observed, text_cases
from trtls.runtimes import RunResult, RuntimeSpec, run_concurrent, run_inputs

GATE = 4
MALFORMED_CASES = ("wrong_shape", "wrong_dtype", "nan", "empty", "oversized")
# a runtime must refuse these: outputs for a tensor of another shape or type are garbage served as an answer. For the
# others, outputs are an acceptable answer (NaN propagated, an empty batch answered, a large batch served); a hang
# or a crash never is.
MUST_REFUSE = ("wrong_shape", "wrong_dtype")
# What an answered negative token id is: the operator's defined reading, said as observed and left out of the pass
# (docs/gates.md, "Tokenizer and model, and the figures of a comparison", says why it is not judged).
NEGATIVE_ID_OBSERVED = (
    "id -1 was answered with outputs, not refused: ONNX's Gather defines a negative index as counted from the end of "
    "the table, the operator's documented reading and no fault of this model; a service that takes token ids from "
    "clients must refuse negative ids itself"
)

_check = partial(gate_check, GATE)


# ------------------------------------------------------------------------------------- malformed inputs


def malformed_cases(
    feed: Mapping[str, np.ndarray], max_input_bytes: int
) -> list[tuple[str, dict[str, np.ndarray] | None, str]]:
    """(case, feed or None when not applicable, description). The shape, dtype, NaN and empty cases change the first
    input only; `oversized` enlarges every input consistently (`oversized_case`)."""
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
    cases.append(oversized_case(feed, max_input_bytes))
    return cases


# The oversized probe's own bound on its work: at most this many rows, and at most this many bytes of expected output
# (rows x the output bytes per row the reference-size input gives). When the smallest batch over max_input_bytes is
# larger (a small encoder input under the 64 MiB default is ~260,000 rows, gigabytes of output), the probe runs at a
# lowered cap instead — the runtime is told that cap (TRTLS_MAX_INPUT_BYTES) and gets the smallest batch just over it.
OVERSIZED_MAX_ROWS = 1024
OVERSIZED_MAX_OUTPUT_BYTES = 64 * 1024 * 1024


def oversized_rows(feed: Mapping[str, np.ndarray], max_input_bytes: int) -> tuple[int, int, int] | None:
    """(rows, bytes per row, fixed bytes) of the smallest consistent batch over the cap; None with no batch axis."""
    arrays = {k: np.asarray(v) for k, v in feed.items()}
    batched = {k: a for k, a in arrays.items() if a.ndim and a.shape[0] >= 1}
    if not batched or len({a.shape[0] for a in batched.values()}) != 1:
        return None
    per_row = sum(int(np.prod(a.shape[1:])) * a.itemsize for a in batched.values()) or 1
    fixed = sum(a.nbytes for k, a in arrays.items() if k not in batched)
    return max(1, (max_input_bytes - fixed) // per_row + 1), per_row, fixed


def bounded_cap(
    feed: Mapping[str, np.ndarray], max_input_bytes: int, output_bytes_per_row: int
) -> tuple[int, dict[str, Any]]:
    """The cap the oversized probe runs at: `max_input_bytes` when its smallest over-cap batch is within the bounds
    (OVERSIZED_MAX_ROWS rows, OVERSIZED_MAX_OUTPUT_BYTES of expected output), else the largest cap whose smallest
    over-cap batch is. Returns (cap, evidence)."""
    shape = oversized_rows(feed, max_input_bytes)
    ev: dict[str, Any] = {"max_input_bytes": max_input_bytes, "output_bytes_per_row": output_bytes_per_row}
    if shape is None:
        return max_input_bytes, ev
    rows, per_row, fixed = shape
    limit = min(OVERSIZED_MAX_ROWS, max(1, OVERSIZED_MAX_OUTPUT_BYTES // max(1, output_bytes_per_row)))
    ev.update({"rows_at_cap": rows, "expected_output_bytes_at_cap": rows * output_bytes_per_row, "row_limit": limit})
    if rows <= limit:
        return max_input_bytes, ev
    cap = fixed + (limit - 1) * per_row  # `limit` rows are the smallest batch over it
    ev["bounded_cap"] = cap
    return cap, ev


def oversized_case(
    feed: Mapping[str, np.ndarray], max_input_bytes: int
) -> tuple[str, dict[str, np.ndarray] | None, str]:
    """Every batched input enlarged along its first (batch) axis by the same number of rows, just enough for the
    feed to pass the cap: a two-input encoder (input_ids, attention_mask) gets a consistent oversized batch, not a
    shape mismatch, and the runtime does no more work than the cap forces (each row is a copy of the first)."""
    shape = oversized_rows(feed, max_input_bytes)
    if shape is None:
        return "oversized", None, "inputs have no common batch axis: an oversized batch cannot be made (not applicable)"
    rows = shape[0]
    arrays = {k: np.asarray(v) for k, v in feed.items()}
    batched = {k: a for k, a in arrays.items() if a.ndim and a.shape[0] >= 1}
    out = dict(arrays)
    for k, a in batched.items():
        out[k] = np.repeat(a[:1], rows, axis=0)
    total = sum(a.nbytes for a in out.values())
    names = ", ".join(repr(k) for k in batched)
    return (
        "oversized",
        out,
        f"{names} with {rows} rows each ({total} bytes in all), over the {max_input_bytes}-byte cap",
    )


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


def check_malformed(
    spec: RuntimeSpec, feed: dict[str, np.ndarray], path: TomlPath, text_limits: Mapping[str, int] | None = None
) -> GateCheck:
    """TRT807: each malformed input goes to the runtime under test *unfiltered* (trtls's own input validation is
    off for this check), and what the runtime does is the result: a clean error, or outputs (judged per case,
    `MUST_REFUSE`), or a hang (cut at its timeout), or a crash."""
    import dataclasses

    raw = dataclasses.replace(spec, validate_inputs=False)
    # the reference-size input first: what one row of output costs (the oversized probe's bound) and how long an
    # answer takes (what tells a hang from work)
    ref = run_inputs(raw, [dict(feed)])
    batch = next((int(np.asarray(a).shape[0]) for a in feed.values() if np.asarray(a).ndim), 1) or 1
    out_per_row = (sum(int(a.nbytes) for a in ref.outputs[0].values()) // batch) if ref.ok and ref.outputs else 0
    cap, bound = bounded_cap(feed, spec.max_input_bytes, out_per_row)
    probe = dataclasses.replace(raw, max_input_bytes=cap)  # the runtime is told the cap it is probed at
    cases = malformed_cases(feed, cap) + text_cases(feed, text_limits)  # a model over token ids: its own cases too
    runnable = [(c, f, d) for c, f, d in cases if f is not None]
    # each case is its own child with its own timeout; run them side by side so a hanging runtime costs one timeout
    with ThreadPoolExecutor(max_workers=max(1, len(runnable))) as pool:
        results = list(pool.map(lambda c: run_inputs(probe if c[0] == "oversized" else raw, [c[1]]), runnable))
    outcomes: dict[str, dict[str, Any]] = {
        c: {"outcome": "not_applicable", "detail": d} for c, f, d in cases if f is None
    }
    notes: dict[str, str] = {}  # answered cases observed, not judged, with why
    for (case, _, desc), res in zip(runnable, results, strict=True):
        outcome, detail = _malformed_outcome(case, res)
        beyond_profile = over_long_observed(text_limits, spec.kind) if case == "over_long" else None
        if outcome == "accepted" and beyond_profile:
            outcome, detail = "answered", f"{beyond_profile}; {_answer_summary(res)}"
            notes[case] = beyond_profile
        elif outcome == "accepted" and case not in MUST_REFUSE + TEXT_MUST_REFUSE:
            outcome, detail = "answered", _answer_summary(res)
            if case == "negative_id":
                detail = f"{NEGATIVE_ID_OBSERVED}; {detail}"
        elif outcome == "hang" and case == "oversized" and not _work_bounded(ref, feed, desc, spec.timeout_s):
            # the probe's batch would take longer than the timeout at the reference input's pace: the timeout cannot
            # tell a hang from work, so it is not called a hang
            outcome = "undetermined"
            detail = (
                f"still running at the {spec.timeout_s:g} s timeout on a batch that would take about that long at the "
                f"reference input's pace: a hang or work (set runtime_options.max_input_bytes to the service's real "
                f"input cap): {detail}"
            )
        outcomes[case] = {"outcome": outcome, "detail": detail[:300], "input": desc}
        if case == "oversized":
            outcomes[case]["bound"] = bound
    failing = {c: o for c, o in outcomes.items() if o["outcome"] in ("hang", "crash", "accepted")}
    unavailable = {c: o for c, o in outcomes.items() if o["outcome"] == "unavailable"}
    undetermined = {c: o for c, o in outcomes.items() if o["outcome"] == "undetermined"}
    evidence = {"cases": outcomes, "timeout_s": spec.timeout_s, "trtls_input_validation": "off"}
    if failing:
        parts = [f"{c}: {o['outcome']} ({o['detail'][:120]})" for c, o in failing.items()]
        return _check(
            "parity.malformed",
            "reject",
            "malformed inputs not handled by the runtime under test: " + "; ".join(parts),
            "TRT807",
            path,
            evidence,
        )
    if unavailable:
        return _check(
            "parity.malformed",
            "not_checked",
            "the runtime under test could not be run on malformed inputs: "
            + next(iter(unavailable.values()))["detail"],
            "TRT807",
            path,
            evidence,
        )
    if undetermined:
        return _check(
            "parity.malformed",
            "hold",
            "the runtime under test was still running at its timeout on: "
            + "; ".join(f"{c} ({o['detail'][:200]})" for c, o in undetermined.items()),
            "TRT807",
            path,
            evidence,
        )
    # a negative id that is answered is observed, not judged (NEGATIVE_ID_OBSERVED): the pass claims the other cases
    notes.update({c: NEGATIVE_ID_OBSERVED for c, o in outcomes.items() if c == "negative_id"})
    observed = {c: o for c, o in outcomes.items() if c in notes and o["outcome"] == "answered"}
    for o in observed.values():
        o["judged"] = False
    said = ", ".join(f"{c}: {o['outcome']}" for c, o in outcomes.items() if c not in observed)
    seen = "".join(f"; observed, not judged: {c} answered ({notes[c]})" for c in observed)
    return _check(
        "parity.malformed",
        "pass",
        f"the runtime under test, given each malformed input unfiltered, refused or answered it without hanging or "
        f"crashing ({said}){seen}",
        "TRT807",
        path,
        {**evidence, "observed_not_judged": sorted(observed)},
    )


def _work_bounded(ref: RunResult, feed: Mapping[str, np.ndarray], desc: str, timeout_s: float) -> bool:
    """Is the oversized probe's work bounded well within the timeout? Only then is a timeout on it a hang: the
    reference-size input answered, and the probe's rows at that pace take under a quarter of the timeout."""
    import re

    if not ref.ok:
        return False
    m = re.search(r"with (\d+) rows", desc)
    batch = next((int(np.asarray(a).shape[0]) for a in feed.values() if np.asarray(a).ndim), 1) or 1
    rows = int(m.group(1)) if m else batch
    return ref.wall_s * max(1.0, rows / batch) < timeout_s / 4


def spec_answers(spec: RuntimeSpec, feed: Mapping[str, np.ndarray]) -> bool:
    """Does the runtime answer the reference-size input (within its timeout)? What tells a hang from work."""
    return run_inputs(spec, [dict(feed)]).ok


def _answer_summary(res: RunResult) -> str:
    outs = res.outputs[0] if res.outputs else {}
    parts = []
    for name, arr in outs.items():
        finite = "finite" if arr.dtype.kind not in "fc" or np.isfinite(arr).all() else "non-finite values"
        parts.append(f"{name} {tuple(arr.shape)} ({finite})")
    return "outputs returned: " + (", ".join(parts) or "none")


def check_concurrency(
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
                        f"request {k}: output {name!r} differs from the serial run (max abs diff "
                        f"{float(np.max(np.abs(out[name].astype(np.float64) - serial[name].astype(np.float64)))):.3g})"
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
