"""Gate 4's checks on given runtimes and inputs (`check_parity`), with no recipe in sight."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from trtls.core.findings import TomlPath
from trtls.core.gate_result import GateCheck, gate_check
from trtls.gates.parity.compare import (
    DEFAULT_QUANTILE,
    as_tolerance,
    compare_output,
    judge_cosine,
    nonfinite_problems,
    signature_problems,
    tolerance_for,
)
from trtls.gates.parity.robustness import check_concurrency, check_malformed
from trtls.gates.parity.tokenizer import TokenizerParity, check_tokenizer
from trtls.gates.parity.trtmc_feed import TrtmcFeed
from trtls.runtimes import RunResult, RuntimeSpec, load_npz, run_inputs

GATE = 4

_check = partial(gate_check, GATE)


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
    reference: RuntimeSpec | RunResult,
    under_test: RuntimeSpec,
    inputs: Sequence[str | Path | Mapping[str, np.ndarray]],
    *,
    tolerances: Mapping[str, Any] | None = None,
    concurrency: int = 4,
    concurrency_exact: bool = True,
    malformed: bool = True,
    tokenizer: TokenizerParity | None = None,
    paths: Mapping[str, TomlPath] | None = None,
    runs: dict[str, RunResult] | None = None,
    text_limits: Mapping[str, int] | None = None,
    adapter: TrtmcFeed | None = None,
) -> list[GateCheck]:
    """Gate 4's checks. `inputs`: reference inputs (.npz paths or {name: array}), one request each.

    `paths` maps what each check concerns to its TOML key: "runtime", "reference", "reference_inputs",
    "tolerances" (a per-output check lands on tolerances.<output> or tolerances."*" when that key exists),
    "tokenizer", "route" (fallback for anything not given).

    `reference` is a runtime (run here on the same inputs) or the reference's outputs already computed (a
    `RunResult`: the checkpoint's forward pass or golden outputs, see `gates.reference_outputs`).

    `adapter`: the model takes TRTMC's BERT I/O (`gates.parity.trtmc_feed`): every run goes through it, and every
    check it fed records it (`evidence["adapter"]`).
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
                f"FAULT INJECTION enabled on the runtime under test (perturb = {under_test.perturb:g}): a route with "
                "it is never supported",
                "TRT809",
                p_rt,
                {"perturb": under_test.perturb},
            )
        )
    if tokenizer is not None:
        checks.append(check_tokenizer(tokenizer, _p(paths, "tokenizer")))

    ref_spec = reference if isinstance(reference, RuntimeSpec) else None
    ref_label = ref_spec.label if ref_spec is not None else "the reference outputs"
    config = [f"runtime: {p}" for p in under_test.problems()] + [
        f"reference: {p}" for p in (ref_spec.problems() if ref_spec is not None else [])
    ]
    tol_problems = {key: as_tolerance(v)[1] for key, v in tolerances.items()}
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

    first_feed = feeds[0]
    adapted: dict[str, Any] = {}
    if adapter is not None:
        unfit = adapter.feed_problems(feeds)
        if unfit:
            checks.append(
                _check(
                    "parity.run",
                    "hold",
                    "the reference inputs cannot be fed to a model with TRTMC's BERT I/O (int32 [n] input_ids and "
                    "attention_mask): " + "; ".join(unfit[:3]),
                    "TRT802",
                    p_in,
                    {"problems": unfit},
                )
            )
            return checks
        test_res, raw, row_feeds = adapter.run(under_test, feeds)
        ref_res = (
            adapter.run(reference, feeds)[0] if isinstance(reference, RuntimeSpec) else adapter.reference(reference)
        )
        first_feed = row_feeds[0]
        first_out = raw.outputs[0] if raw.ok and raw.outputs else {}
        adapted = {"adapter": adapter.evidence()}
    else:
        ref_res = run_inputs(reference, feeds) if isinstance(reference, RuntimeSpec) else reference
        test_res = run_inputs(under_test, feeds)
        first_out = test_res.outputs[0] if test_res.ok and test_res.outputs else {}
    if runs is not None:  # the caller judges from it whether the deployed artifact was executed (TRT811)
        runs["under_test"], runs["reference"] = test_res, ref_res
    for side, res, path in (("reference", ref_res, p_ref), ("runtime under test", test_res, p_rt)):
        if res.status == "unavailable":
            checks.append(
                _check(
                    "parity.runtime_available" if side != "reference" else "parity.reference_available",
                    "hold",
                    f"{side} {ref_label if side == 'reference' else under_test.label} unavailable: {res.message}",
                    "TRT801",
                    path,
                )
            )
    if ref_res.status == "unavailable" or test_res.status == "unavailable":
        return checks
    checks.append(
        _check("parity.runtime_available", "pass", f"{under_test.kind} ran here; {ref_label} answered", "TRT801", p_rt)
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
    through = (
        f" (through the TRTMC adapter: {sum(adapter.rows_per_feed)} batch rows, each one int32 [n] request)"
        if adapter is not None
        else ""
    )
    checks.append(
        _check(
            "parity.run",
            "pass",
            f"both runtimes answered {len(feeds)} reference input(s){through}",
            "TRT802",
            p_rt,
            dict(adapted),
        )
    )

    sig = sorted({p for t, r in zip(test_res.outputs, ref_res.outputs, strict=True) for p in signature_problems(t, r)})
    if sig:
        checks.append(_check("parity.signature", "reject", "; ".join(sig[:5]), "TRT803", p_rt, {"problems": sig}))
    else:
        checks.append(_check("parity.signature", "pass", "output names, shapes and dtypes match", "TRT803", p_rt))

    bad_test: list[str] = []
    bad_ref: list[str] = []
    for t, r in zip(test_res.outputs, ref_res.outputs, strict=True):  # ok: one output per reference input
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
            tol, tol_key = tolerance_for(tolerances, name)
            cmp = compare_output(
                name, [o[name] for o in test_res.outputs], [o[name] for o in ref_res.outputs], tol, tol_key
            )
            stats_by_output[name] = cmp.stats
            evidence = {
                "output": name,
                "stats": cmp.stats,
                "atol": tol.atol,
                "rtol": tol.rtol,
                "check_error_stat": tol.check_error_stat,
                "largest_error": cmp.largest,
                "histogram": cmp.histogram,
                **({"cosine": cmp.cosine, "cosine_min": tol.cosine_min} if cmp.cosine is not None else {}),
                **adapted,
            }
            if tol.check_error_stat == "quantile":
                evidence["quantile"] = tol.quantile if tol.quantile is not None else DEFAULT_QUANTILE
            path = p_tol + (tol_key,) if tol_key is not None and p_tol else p_tol
            checks.append(
                _check(
                    f"parity.tolerance:{name}",
                    cmp.status,
                    cmp.message + (_adapted_note(name, adapter) if adapter is not None else ""),
                    "TRT805",
                    path,
                    evidence,
                )
            )
            if tol.cosine_min is not None:  # declared: judged; otherwise the similarity is a figure in the evidence
                status, message = judge_cosine(name, cmp.cosine, tol.cosine_min)
                cosine_ev = {"output": name, "cosine_min": tol.cosine_min, "cosine": cmp.cosine, **adapted}
                checks.append(
                    _check(
                        f"parity.cosine:{name}",
                        status,
                        message,
                        "TRT805",
                        path + ("cosine_min",) if path else path,
                        cosine_ev,
                    )
                )

    if malformed:
        checks.append(_with(check_malformed(under_test, first_feed, p_rt, text_limits), adapted))
    if concurrency and concurrency > 1 and not sig:
        checks.append(
            _with(
                check_concurrency(under_test, first_feed, first_out, concurrency, concurrency_exact, tolerances, p_rt),
                adapted,
            )
        )
    return checks


def _adapted_note(name: str, adapter: TrtmcFeed) -> str:
    from trtls.gates.parity.trtmc_feed import REFERENCE_OUTPUT

    rows = sum(adapter.rows_per_feed)
    skipped = f"; not compared: {', '.join(adapter.not_compared)}" if adapter.not_compared else ""
    return f" ({name} of {rows} int32 [n] requests, one per batch row, vs the reference's {REFERENCE_OUTPUT}{skipped})"


def _with(check: GateCheck, evidence: Mapping[str, Any]) -> GateCheck:
    """`check` with `evidence` added (the adapter a check was fed through)."""
    import dataclasses

    return dataclasses.replace(check, evidence={**check.evidence, **evidence}) if evidence else check
