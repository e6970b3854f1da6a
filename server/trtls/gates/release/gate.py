"""Gate 5 on a route: every release check in order (`check_release`) and the hook `trtls.gates.run` calls."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from trtls.core.findings import TomlPath
from trtls.core.gate_result import CheckStatus, GateCheck, gate_check
from trtls.gates.parity.check import toml_path
from trtls.gates.release.baseline import check_baseline, load_baseline, write_baseline
from trtls.gates.release.measure import Thresholds, measure
from trtls.gates.release.performance import check_build_time, check_canary, check_performance
from trtls.gates.release.rollback import SmokeFn, bundle_smoke, rollback_drill, sha256_of
from trtls.runtimes import RunResult, RuntimeSpec

GATE = 5
_check = partial(gate_check, GATE)


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
