"""Gate 5 on a route: every release check in order (`check_release`) and the hook `trtls.gates.run` calls."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from trtls.bundle import sidecar_path
from trtls.core.findings import TomlPath
from trtls.core.gate_result import CheckStatus, GateCheck, gate_check
from trtls.core.sha256 import sha256_file
from trtls.fs import ensure_folder
from trtls.gates.context import GateContext
from trtls.gates.files import scratch as scratch_folder
from trtls.gates.parity.check import toml_path
from trtls.gates.parity.route import merge_set_checks
from trtls.gates.parity.trtmc_feed import TrtmcFeed, adapted_files, trtmc_feed
from trtls.gates.release.baseline import check_baseline, load_baseline, write_baseline
from trtls.gates.release.interleaved import artifact_spec, check_baseline_interleaved
from trtls.gates.release.measure import Measurement, Thresholds, measure, session_words
from trtls.gates.release.performance import check_build_time, check_canary, check_performance
from trtls.gates.release.rollback import SmokeFn, bundle_smoke, rollback_drill
from trtls.gates.release.scratch import copy_in, deployed_smoke
from trtls.gates.release.session import check_session
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
    baseline_spec: RuntimeSpec | str | None = None,
    input_names: Sequence[str] | None = None,
) -> list[GateCheck]:
    """Gate 5's checks.

    `spec`: the new bundle's model as a runtime; `inputs`: benchmark inputs (.npz paths or dicts);
    `root`: the folder holding `.trtls/` (the recipe's folder); `build_summary`: the build evidence
    summary.json (`durationS`); `smoke` defaults to `bundle_smoke(bundle, smoke_inputs or inputs)`.
    `paths` keys: "thresholds", "canary_inputs", "previous_bundle", "bundle", "runtime", "build", "route";
    `input_names`: the input set each of `inputs` is (the route's set names), judged each on its own.
    """
    paths = dict(paths or {})
    t = Thresholds.of(thresholds)
    checks: list[GateCheck] = []
    names = list(input_names) if input_names and len(input_names) == len(inputs) else None
    # each input set measured on its own: percentiles pooled over two shapes describe neither
    sets = list(zip(names, ([i] for i in inputs), strict=True)) if names and len(inputs) > 1 else [("", list(inputs))]
    measured: list[tuple[str, Measurement | RunResult]] = [
        (name, measure(spec, set_inputs, warmup=t.warmup, iterations=t.iterations))
        for name, set_inputs in sets
        if set_inputs
    ] or [("", RunResult("error", "no benchmark inputs"))]
    session = spec.session_settings()
    said = "" if session is None else f" ({session_words(session)})"
    failed = next(((n, m) for n, m in measured if isinstance(m, RunResult)), None)
    if failed is not None:
        name, res = failed
        assert isinstance(res, RunResult)
        status: CheckStatus = "not_checked" if res.status == "unavailable" or not inputs else "reject"
        where = f" on input set {name}" if name else ""
        checks.append(
            _check(
                "release.measure",
                status,
                f"cannot measure the runtime{where}: {res.summary()}",
                "TRT909",
                toml_path(paths, "runtime"),
                {"session": session},
            )
        )
        checks += unmeasured(f"not measured: {res.summary()}", toml_path(paths, "thresholds"))
    else:
        ms = [(n, m) for n, m in measured if isinstance(m, Measurement)]
        m = max((m for _, m in ms), key=lambda x: x.peak_rss_mib or 0.0)  # the memory figure: the largest set's
        per_set = {n: x.as_dict() for n, x in ms if n}
        checks.append(
            _check(
                "release.measure",
                "pass",
                f"measured {m.iterations} requests"
                + (f" per input set ({', '.join(per_set)})" if per_set else "")
                + f" on {m.runtime}{said}",
                "TRT909",
                toml_path(paths, "runtime"),
                {**m.as_dict(), "session": session, **({"input_sets": per_set} if per_set else {})},
            )
        )
        if per_set:
            checks += merge_set_checks([(n, check_performance(x, t, paths)) for n, x in ms])
        else:
            checks += check_performance(m, t, paths)
        base = load_baseline(root, route)
        if base is not None and baseline_spec is not None:  # the rule established in this run (interleaved.py)
            checks.append(
                check_baseline_interleaved(
                    spec, baseline_spec, inputs, m, base, t, toml_path(paths, "thresholds"), input_names
                )
            )
        else:
            checks.append(check_baseline(m, base, t, toml_path(paths, "thresholds")))
        if update_baseline:
            write_baseline(
                root,
                route,
                m,
                bundle_sha256=sha256_file(active_bundle) if active_bundle and Path(active_bundle).is_file() else None,
                input_sets=per_set or None,
                session=session,
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


MEASURED_CHECKS = (
    ("release.latency", "TRT901"),
    ("release.throughput", "TRT902"),
    ("release.memory", "TRT903"),
    ("release.warmup", "TRT904"),
    ("release.baseline", "TRT906"),
)


def unmeasured(why: str, path: TomlPath) -> list[GateCheck]:
    """The checks a measurement would have judged, each `not_checked` with why: a check that did not run is shown
    as such, never dropped (a TensorRT route on a machine without a GPU still lists its latency check)."""
    return [_check(name, "not_checked", why, code, path, {"not_measured": True}) for name, code in MEASURED_CHECKS]


def record_of(checks: Sequence[GateCheck]) -> dict[str, str]:
    """canary_inputs_status / rollback_status for the route summary (`not_run` when gate 3 failed). The summary's
    `canary_status` is the promoted bundle's canary, from the ledger (`lifecycle.status.canary_state`)."""
    by = {c.name: c for c in checks}

    def status(name: str, ok: str, bad: str, otherwise: str) -> str:
        c = by.get(name)
        if c is not None and c.evidence.get("not_run"):
            return "not_run"
        return {"pass": ok, "reject": bad}.get(c.status if c is not None else "", otherwise)

    return {
        "canary_inputs_status": status("release.canary", "pass", "failed", "not_started"),
        "rollback_status": status("release.rollback", "tested", "failed", "blocked"),
    }


# ------------------------------------------------------------------------------ orchestrator hook (run.py)


def _build_summary(ctx: GateContext) -> Path | None:
    ev = ctx.gate2.evidence if ctx.gate2 is not None else None
    if isinstance(ev, dict) and (ev.get("path") or ev.get("record")):
        return Path(ev.get("path") or ev["record"])
    if ctx.route.engine is None:
        record = Path(ctx.recipe_dir) / ".trtls" / "routes" / ctx.route_name / "route-build.json"
        return record if record.is_file() else None
    from trtls.gates.environment_evidence import latest_successful_build

    linked = latest_successful_build(Path(ctx.recipe_dir), ctx.route.engine)
    return linked[0] if linked else None


def _bundle_header(bundle: Path | None) -> dict[str, Any] | None:
    from trtls.bundle import BundleError, read_bundle

    try:
        return read_bundle(bundle).header if bundle is not None and bundle.is_file() else None
    except (BundleError, OSError):
        return None


def _not_run(name: str, code: str, why: str, path: TomlPath) -> GateCheck:
    return _check(name, "not_checked", f"not run: {why}", code, path, {"not_run": True})


def _baseline_spec(
    ctx: GateContext, deployed: RuntimeSpec, active: Path | None, previous: Path | None, scratch: Path
) -> RuntimeSpec | str | None:
    """The artifact the recorded baseline was measured on, as a runtime to interleave with the candidate: the
    bundle's (then candidate and baseline are the same artifact) or the previous bundle's, matched by sha256."""
    recorded = load_baseline(ctx.recipe_dir, ctx.route_name)
    if recorded is None:
        return None
    want = recorded.get("bundle_sha256")
    for candidate in (active, previous):
        if want and candidate is not None and candidate.is_file() and sha256_file(candidate) == want:
            return deployed if candidate == active else artifact_spec(deployed, ctx.route.deploys, candidate, scratch)
    return f"the bundle it was measured on (sha256 {str(want)[:12]}…) is neither the bundle nor previous_bundle"


def run_gate(ctx: GateContext) -> list[GateCheck]:
    """Gate 5 for `trtls.gates.run`. Everything runs on the artifact the route deploys, as its bundle carries it,
    through the runtime under test — measured, canaried and rolled back on copies in a scratch folder: the gates
    never write the user's bundle, previous bundle or sidecars (a kill at any point leaves them as they were).
    When gate 3 did not pass, the canary and the rollback are `not_run`. Never writes the baseline."""
    from trtls.core.route import input_set_paths
    from trtls.gates.deployed import RefusedPath, contained, extract_artifact
    from trtls.gates.parity import on_artifact, route_runtimes

    route = ctx.route
    base: TomlPath = ("routes", ctx.route_name)
    spec, _, _, problems = route_runtimes(ctx)
    gate3 = [c for c in ctx.checks if c.gate == 3]
    gate3_ok = all(c.status == "pass" for c in gate3)  # not selected in this run (--gate 5): not judged here
    if spec is None or problems:
        checks = problems or [_check("release.measure", "hold", "no runtime to measure", "TRT909", base + ("runtime",))]
        checks = checks + unmeasured("not measured: no runtime to measure", base + ("thresholds",))
        ctx.record.update(record_of(checks))
        return checks
    with scratch_folder("trtls-gate5-") as scratch:
        ensure_folder(scratch / "artifact", within=scratch)
        artifact = extract_artifact(ctx, scratch / "artifact")
        bundle_copy = scratch / "slot" / Path(route.bundle).name
        deployed = on_artifact(spec, artifact, bundle_copy)
        refused: list[GateCheck] = []

        def inside(key: str, rel: str | None = None, where: TomlPath | None = None, what: str = "") -> Path | None:
            rel = rel if rel is not None else getattr(route, key, None)
            if rel is None:
                return None
            try:
                return contained(ctx, rel)
            except RefusedPath as exc:
                refused.append(
                    _check(f"release.paths:{key}", "hold", what + str(exc), "TRT910", where or base + (key,))
                )
                return None

        # every reference input set is measured (the benchmark cycles through them) and smoke-run
        set_files = {
            name: inside("reference_inputs", rel, where, f"set {name}: " if route.named_input_sets else "")
            for name, rel, where in input_set_paths(route, base)
        }
        canary = [p for p in [inside("canary_inputs")] if p is not None]
        previous = inside("previous_bundle")
        active = inside("bundle")
        adapter = trtmc_feed((_bundle_header(active) or {}).get("io_map"))
        if adapter is not None:  # TRTMC's BERT I/O: batch-1 int32 [n] requests (gates.parity.trtmc_feed)
            set_files, canary = _trtmc_requests(adapter, set_files, canary, scratch, refused, base)
        ref_inputs = [p for p in set_files.values() if p is not None]
        if isinstance(artifact, str):
            deployed_ok = False
            checks = [
                _check("release.measure", "not_checked", f"not measured: {artifact}", "TRT909", base + ("bundle",))
            ] + unmeasured(f"not measured: {artifact}", base + ("thresholds",))
        else:
            deployed_ok = True
            checks = []
        smoke = deployed_smoke(spec, route.deploys, ref_inputs)
        active_copy = previous_copy = None
        if gate3_ok and active is not None and active.is_file():
            copy_in(active, bundle_copy, within=scratch)
            if sidecar_path(active).is_file():
                copy_in(sidecar_path(active), sidecar_path(bundle_copy), within=scratch)
            active_copy = bundle_copy
        if gate3_ok and previous is not None and previous.is_file():
            previous_copy = scratch / "previous" / previous.name
            copy_in(previous, previous_copy, within=scratch)
            if sidecar_path(previous).is_file():
                copy_in(sidecar_path(previous), sidecar_path(previous_copy), within=scratch)
        elif previous is not None and not previous.exists():
            previous_copy = previous  # not found: the drill says so
        baseline_spec = _baseline_spec(ctx, deployed, active_copy, previous_copy, scratch / "baseline")
        if deployed_ok:
            checks = check_release(
                deployed,
                ref_inputs,
                root=ctx.recipe_dir,
                route=ctx.route_name,
                thresholds=route.thresholds,
                canary_inputs=canary,
                build_summary=_build_summary(ctx),
                active_bundle=active_copy,
                previous_bundle=previous_copy,
                smoke=smoke,
                paths={"route": base, "build": ("routes", ctx.route_name, "engine" if route.engine else "onnx")},
                baseline_spec=baseline_spec,
                input_names=[n for n, p in set_files.items() if p is not None] if route.named_input_sets else None,
            )
        if deployed_ok:
            session = check_session(deployed, _bundle_header(active), base + ("runtime_options",))
            checks += [session] if session is not None else []
        if not gate3_ok:
            why = "gate 3 did not pass: the bundle is not verified"
            checks = [c for c in checks if c.name not in ("release.canary", "release.rollback")]
            checks.append(_not_run("release.canary", "TRT907", why, base + ("canary_inputs",)))
            checks.append(_not_run("release.rollback", "TRT908", why, base + ("previous_bundle",)))
        checks = refused + checks
        if adapter is not None:
            checks = [_adapted(c, adapter) for c in checks]
    ctx.record.update(record_of(checks))
    return checks


ADAPTED_CHECKS = ("release.measure", "release.latency", "release.throughput", "release.baseline", "release.canary")


def _trtmc_requests(
    adapter: TrtmcFeed,
    set_files: dict[str, Path | None],
    canary: list[Path],
    scratch: Path,
    refused: list,
    base: TomlPath,
) -> tuple[dict[str, Path | None], list[Path]]:
    """Each reference input set as one TRTMC request (its first row, int32 [sequence]) and every canary row as one,
    written into the scratch folder; an input that cannot be adapted holds at its key (TRT909) and is not measured."""
    sets, problems = adapted_files(adapter, set_files, scratch / "trtmc-sets", scratch, every_row=False)
    rows, canary_problems = adapted_files(
        adapter, {"canary_inputs": canary[0]} if canary else {}, scratch / "trtmc-canary", scratch, every_row=True
    )
    for what, key in ((problems, "reference_inputs"), (canary_problems, "canary_inputs")):
        if what:
            why = "the inputs cannot be fed to a model with TRTMC's BERT I/O: " + "; ".join(what[:3])
            refused.append(_check("release.measure", "hold", why, "TRT909", base + (key,)))
    return {n: (sets[n][0] if n in sets else None) for n in set_files}, rows.get("canary_inputs", [])


def _adapted(check: GateCheck, adapter: TrtmcFeed) -> GateCheck:
    """A measured check with the adapter it was fed through in its evidence."""
    import dataclasses

    if check.name not in ADAPTED_CHECKS or (check.name != "release.measure" and check.status == "hold"):
        return check  # a hold here ran nothing through it (no baseline, no canary inputs)
    if check.name == "release.canary" and check.status == "not_checked":
        return check
    said = {
        "adapter": "trtmc_bert",
        "requests": "each reference input set's first row as one int32 [sequence] request (TRTMC serves batch 1); "
        "each canary row as one",
    }
    return dataclasses.replace(check, evidence={**check.evidence, "adapter": said})
