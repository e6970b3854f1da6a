"""Run a route's gates in order and turn their checks into one decision and its evidence.

`run_gates` is what the CLI (`trtls gates`) and the language server (`trtls.runGates`, in a thread) call.
Every gate is one entry of `GATES` (gate number → `hook(ctx: GateContext) -> list[GateCheck]`), imported
statically: a gate that cannot be imported breaks the import of this module, loudly. A gate that raises yields a
`hold` naming the exception, and one that returns no checks a `hold` too: a gate that did not run is never a pass.

Evidence: `.trtls/routes/<route>/summary.json` (atomic) with route_name, checkpoint_revision,
bundle_digest, runtime_target, validation_status, canary_status (the promotion ledger's), canary_inputs_status,
rollback_status, the decision and every check of every gate; beside it `report.sarif` (SARIF 2.1.0) and `junit.xml`.
Gates 3–5 share results through `ctx.record` (e.g. `bundle_digest`, `validation_status`, `canary_inputs_status`,
`rollback_status`), which the summary picks up.

Baseline: a normal run never writes gate 5's performance baseline. `record_baseline=True` (`trtls gates
--record-baseline`, run by a person after review) writes this run's gate-5 measurement to
`.trtls/routes/<route>/baseline.json` (`release.write_baseline`) — unless the run was cancelled, gate 5 did not
measure, or the gates rejected: a rejected route's numbers are never a baseline. This run's TRT906 still
says there was no baseline; the next run compares against the recorded one. The summary's `baseline` says
what happened.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trtls import __version__
from trtls.core.findings import Finding, Origin, Severity
from trtls.core.gate_result import GATE_NAMES, Decision, GateCheck, apply_waivers, decide
from trtls.core.paths import real
from trtls.core.route import route_dir, route_model
from trtls.core.route_summary_record import ROUTE_SUMMARY_FORMAT, RouteSummary
from trtls.core.sha256 import sha256_file
from trtls.core.terminal_text import terminal_safe
from trtls.fs import Kind, atomic_write_text, ensure_folder
from trtls.fs.hold import test_pause
from trtls.gates import bundle, parity, release, runbook_holds
from trtls.gates.context import GateContext, GateHook
from trtls.gates.engine_portability import loads_on_record
from trtls.gates.environment import check_environment
from trtls.gates.export_source import export_source_checks
from trtls.gates.lifecycle.notes import promotion_finding, promotion_note
from trtls.gates.lifecycle.promotion import COMPLETE_SUMMARY
from trtls.gates.lifecycle.rested_on import run_facts
from trtls.gates.lifecycle.status import canary_state
from trtls.gates.parity.fidelity import fidelity_checks
from trtls.gates.release import Measurement, write_baseline
from trtls.gates.reports import to_junit, to_sarif
from trtls.gates.source import check_checkpoint

SUMMARY_FORMAT = ROUTE_SUMMARY_FORMAT
ALL_GATES = (1, 2, 3, 4, 5)


def run_source(ctx: GateContext) -> list[GateCheck]:
    """Gate 1 (its result, with the layout and file digests, stays on the context for the later gates); on a route
    from an export, its checks `not_checked` by name (`gates.export_source`)."""
    if ctx.route.from_export:
        return export_source_checks(ctx)
    ctx.gate1 = check_checkpoint(
        ctx.loaded, ctx.route_name, ctx.route, use_digest_cache=ctx.use_digest_cache, cancel=ctx.cancel
    )
    return ctx.gate1.checks


def run_environment(ctx: GateContext) -> list[GateCheck]:
    """Gate 2 (its result, with the linked build evidence, stays on the context for the later gates)."""
    ctx.gate2 = check_environment(ctx.loaded, ctx.route_name, ctx.route, ctx.environment)
    return ctx.gate2.checks + runbook_holds.boundary_checks(ctx)


def run_bundle(ctx: GateContext) -> list[GateCheck]:
    return bundle.run_gate(ctx) + runbook_holds.plugin_checks(ctx)


def run_parity(ctx: GateContext) -> list[GateCheck]:
    return parity.run_gate(ctx) + runbook_holds.precision_checks(ctx) + fidelity_checks(ctx)


def run_release(ctx: GateContext) -> list[GateCheck]:
    return release.run_gate(ctx) + runbook_holds.portability_checks(ctx)


# The runbook's hold reasons (plugins, FFI boundaries, precision change, portability) join the gate they belong to.
GATES: dict[int, GateHook] = {
    1: run_source,
    2: run_environment,
    3: run_bundle,
    4: run_parity,
    5: run_release,
}
GATE_CODES = {1: "TRT500", 2: "TRT600", 3: "TRT700", 4: "TRT800", 5: "TRT900"}


@dataclass
class RouteResult:
    route_name: str
    checks: list[GateCheck]
    decision: Decision  # of the route: supported only when all five gates ran and passed
    gates_decision: Decision  # of the gates that ran (what `trtls gates --gate N` exits with)
    summary: RouteSummary  # the route record, as summary.json holds it (core.route_summary_record)
    findings: list[Finding]
    summary_path: Path | None = None
    cancelled: bool = False
    baseline: dict[str, Any] | None = None  # with record_baseline: {"recorded": bool, "path"|"reason", …}

    def gate_status(self, gate: int) -> str | None:
        mine = [c for c in self.checks if c.gate == gate]
        return decide(mine) if mine else None


def _not_run(gate: int, message: str) -> GateCheck:
    return GateCheck(gate, "not_run", "hold", message, GATE_CODES[gate], (), False)


def run_gates(
    loaded: Any,
    route_name: str,
    gates: list[int] | tuple[int, ...] | None = None,
    progress: Callable[[int, str], None] | None = None,
    cancel: Callable[[], bool] | None = None,
    *,
    use_digest_cache: bool = True,
    environment: dict[str, Any] | None = None,
    write_evidence: bool = True,
    record_baseline: bool = False,
) -> RouteResult:
    """Run `gates` (default all five, in order) for `route_name` of a loaded, error-free recipe."""
    route = route_model(loaded, route_name)
    selected = sorted(set(gates or ALL_GATES))
    ctx = GateContext(
        loaded,
        route_name,
        route,
        cancel=cancel,
        progress=progress,
        use_digest_cache=use_digest_cache,
        environment=environment,
    )
    cancelled = False
    for gate in selected:
        if cancel is not None and cancel():
            cancelled = True
            break
        if progress is not None:
            progress(gate, f"gate {gate}: {GATE_NAMES[gate]}")
        # tests only (`TRTLS_TEST_PAUSE=gate_<n>:<folder>`): hold at the start of gate n until a stop is asked, so a
        # test's Ctrl-C lands inside a known gate however loaded the machine is
        test_pause(f"gate_{gate}", route_name, until=lambda: cancel is not None and cancel())
        t0 = time.monotonic()
        try:
            new = list(GATES[gate](ctx))
            if not new:
                new = [_not_run(gate, f"gate {gate} returned no checks")]
        except Exception as exc:
            from trtls.checkpoint.hashing import HashCancelled

            if isinstance(exc, HashCancelled):
                cancelled = True
                break
            new = [_not_run(gate, f"gate {gate} could not run: {type(exc).__name__}: {exc}")]
        for c in new:  # a message names what checkpoints, bundles and recipes carry: escaped once, here (item 13)
            c.message = terminal_safe(c.message)
            c.evidence.setdefault("duration_s", round(time.monotonic() - t0, 3))
        ctx.checks.extend(new)
    checks = ctx.checks
    waivers = apply_waivers(checks, route.waive)
    gates_decision = decide(checks)
    complete = not cancelled and selected == list(ALL_GATES)
    decision: Decision = gates_decision if (complete or gates_decision == "reject") else "hold"
    summary = _summary(ctx, selected, decision, gates_decision, cancelled)
    summary["waivers"] = waivers
    summary["rested_on"] = rested_on = run_facts(ctx)
    summary["complete"] = complete
    rejects = [c.name for c in checks if c.status == "reject"]
    promotion = promotion_note(loaded, route_name, route, rested_on, rejects)
    if promotion is not None:
        summary["promotion"] = promotion
    baseline = _record_baseline(ctx, gates_decision, cancelled) if record_baseline else None
    if baseline is not None:
        summary["baseline"] = baseline
    findings = [f for f in (c.finding() for c in checks) if f is not None]
    if complete:
        findings += unmatched_waivers(route_name, waivers)
    if promotion is not None and promotion["state"] != "valid":
        findings.append(promotion_finding(route_name, promotion))
    record = RouteSummary.written(summary)  # built as a dict above, typed once: what the file will hold
    result = RouteResult(route_name, checks, decision, gates_decision, record, findings, None, cancelled, baseline)
    if write_evidence:
        try:
            result.summary_path = write_route_evidence(loaded, result)
        except OSError as exc:  # a full disk, a read-only or refused .trtls: said, never a traceback
            where = route_dir(loaded, route_name)
            why = f"{exc.strerror or exc}" + (f" ({exc.filename})" if exc.filename else "")
            message = f"the gates' evidence cannot be written to {where}: {why}; the decision stands unrecorded"
            result.findings.append(Finding("TRT412", Severity.error, message, (), Origin.gates))
    return result


def unmatched_waivers(route_name: str, waivers: dict[str, dict[str, Any]]) -> list[Finding]:
    """A waiver that met no check of a complete run names nothing: a misspelt name would otherwise look like a
    waiver in the recipe while the check it meant still holds the route (said only after all five gates ran: a
    partial run has not made every check)."""
    out = []
    for name, did in waivers.items():
        if did["applied_to"] or did["not_applied"]:
            continue
        did["not_applied"].append("no check of this run has this name")
        out.append(
            Finding(
                "TRT116",
                Severity.warning,
                f"waiver '{name}' names no check of this route's gates (check names: docs/gates.md)",
                ("routes", route_name, "waive", name),
                Origin.gates,
                data={"waiver": name},
            )
        )
    return out


def _record_baseline(ctx: GateContext, gates_decision: Decision, cancelled: bool) -> dict[str, Any]:
    """Write this run's gate-5 measurement as the route's baseline, or say why not (see the module doc)."""
    measured = next((c for c in ctx.checks if c.gate == 5 and c.name == "release.measure" and c.status == "pass"), None)
    if cancelled:
        return {"recorded": False, "reason": "the run was cancelled"}
    if measured is None:
        return {"recorded": False, "reason": "gate 5 did not measure the runtime in this run"}
    if gates_decision == "reject":
        return {
            "recorded": False,
            "reason": "the gates rejected the route: a rejected route's numbers are never a baseline",
        }
    from dataclasses import fields

    recorded: dict[str, Any] = {f.name: measured.evidence.get(f.name) for f in fields(Measurement)}
    m = Measurement(**recorded)
    bundle = ctx.resolve(ctx.route.bundle)
    sha = sha256_file(bundle) if bundle.is_file() else None
    try:
        path = write_baseline(ctx.recipe_dir, ctx.route_name, m, bundle_sha256=sha)
    except OSError as exc:
        return {"recorded": False, "reason": f"the baseline cannot be written: {exc.strerror or exc}"}
    return {"recorded": True, "path": str(path), "bundle_sha256": sha, "measurement": m.as_dict()}


def _status_of(checks: list[GateCheck], gate: int) -> str:
    mine = [c for c in checks if c.gate == gate]
    return "not_run" if not mine else {"supported": "pass", "hold": "hold", "reject": "reject"}[decide(mine)]


def hold_reasons(checks: list[GateCheck]) -> list[str]:
    """Why the route holds, in words: every hold, then every unwaived not_checked (deployed artifact first)."""
    first = [c for c in checks if c.name == DEPLOYED_CHECK and c.holds]
    rest = [c for c in checks if c.holds and c.name != DEPLOYED_CHECK]
    return [f"{c.name}: {c.message}" for c in first + rest]


def _summary(
    ctx: GateContext, selected: list[int], decision: Decision, gates_decision: Decision, cancelled: bool
) -> dict[str, Any]:
    r = ctx.record
    g1 = ctx.gate1.record if ctx.gate1 else {}
    revision = g1.get("commit") or (ctx.route.checkpoint.revision if ctx.route.checkpoint else None)
    gates: dict[str, Any] = {}
    for gate in ALL_GATES:
        gates[str(gate)] = {
            "name": GATE_NAMES[gate],
            "status": _status_of(ctx.checks, gate),
            "checks": [
                {
                    "name": c.name,
                    "status": c.status,
                    **({"waived": c.waived} if c.waived is not None else {}),
                    "code": c.code,
                    "message": c.message,
                    "path": list(c.path),
                    "evidence": c.evidence,
                }
                for c in ctx.checks
                if c.gate == gate
            ],
        }
    validation = r.get("validation_status") or {"pass": "pass", "reject": "reject"}.get(gates["4"]["status"], "hold")
    return {
        "format": SUMMARY_FORMAT,
        "route_name": ctx.route_name,
        "decision": decision,
        "hold_reasons": hold_reasons(ctx.checks) if decision == "hold" else [],
        "gates_decision": gates_decision,
        "gates_run": selected,
        "cancelled": cancelled,
        "checkpoint_id": ctx.route.checkpoint.id if ctx.route.checkpoint else None,
        "checkpoint_revision": revision,
        "checkpoint_revision_pinned": ctx.route.revision_pinned,
        "bundle_path": str(ctx.resolve(ctx.route.bundle)),
        "bundle_digest": r.get("bundle_digest"),
        "runtime_target": runtime_target(ctx),
        "runtime_target_loads_on": loads_on_record(ctx),  # core.loads_on's answer for the engine (None: ONNX)
        "deployed_artifact": r.get("deployed_artifact"),
        "runtime_under_test": r.get("runtime_under_test") or ctx.route.runtime,
        "reference_runtime": r.get("reference") or ctx.route.reference,
        **_engine_note(ctx, gates),
        "validation_status": validation,
        # the canary of the promoted bundle, from the promotion ledger (the one record of it); the gate-5 run on the
        # canary inputs is `canary_inputs_status` — a smoke run is not a canary of real traffic
        "canary_status": canary_state(ctx.loaded, ctx.route_name),
        "canary_inputs_status": r.get("canary_inputs_status", "not_started"),
        "rollback_status": r.get("rollback_status", "blocked"),
        "license": g1.get("license"),
        "intended_use": ctx.route.intended_use,
        "checkpoint": g1,
        "environment": ctx.gate2.environment if ctx.gate2 else None,
        "build_evidence": ctx.gate2.evidence if ctx.gate2 else None,
        "engine_settings": ctx.gate2.record if ctx.gate2 else None,
        "record": {k: v for k, v in r.items()},
        "gates": gates,
        "recipe": str(ctx.loaded.path),
        "generatedAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


DEPLOYED_CHECK = "parity.deployed_artifact"


def runtime_target(ctx: GateContext) -> str:
    """What the deployed artifact is for: the engine table's builder_module when the route deploys an engine (a
    TensorRT-RTX engine is `tensorrt_rtx`, never plain `tensorrt`), else the route's own rule."""
    recipe = ctx.loaded.recipe
    eng = recipe.engines.get(ctx.route.engine) if recipe is not None and ctx.route.engine else None
    module = eng.builder_module if eng is not None else None
    return str(module) if module in ("tensorrt", "tensorrt_rtx") else ctx.route.runtime_target


def _engine_note(ctx: GateContext, gates: dict[str, Any]) -> dict[str, Any]:
    """`engine_executed`, `deployed_artifact_executed` and `runtime_note`: what the runtime under test ran, plainly.

    Gate 4's `parity.deployed_artifact` check (TRT811) decides it; without gate 4 nothing was executed."""
    check = next((c for c in ctx.checks if c.name == DEPLOYED_CHECK), None)
    executed = check is not None and check.status == "pass"
    note = check.message if check is not None else "gate 4 did not run: the deployed artifact was not executed"
    return {
        "engine_executed": executed and ctx.route.deploys == "engine",
        "deployed_artifact_executed": executed,
        "runtime_note": note,
    }


def junit_checks(result: RouteResult) -> list[dict[str, Any]]:
    return [
        {
            "suite": f"gate{c.gate}.{GATE_NAMES[c.gate].replace(' ', '_')}",
            "name": c.name,
            "status": c.status,
            "message": f"not checked: {c.message}" + (f" (waived: {c.waived})" if c.waived else "")
            if c.status == "not_checked"
            else c.message,
            "duration_s": float(c.evidence.get("duration_s", 0.0) or 0.0),
        }
        for c in result.checks
    ]


def sarif_of(loaded: Any, result: RouteResult) -> dict[str, Any]:
    def locate(path: Any) -> Any:
        if not path:
            return None
        rng = loaded.source_map.range(path, True)
        return (rng.start_line + 1, rng.start_col + 1, rng.end_line + 1, rng.end_col + 1)

    return to_sarif(result.findings, locate, loaded.path, __version__)


def junit_of(result: RouteResult) -> str:
    return to_junit(junit_checks(result), name=f"trtls route {result.route_name}")


def write_route_evidence(loaded: Any, result: RouteResult) -> Path:
    """The run's evidence under `.trtls/routes/<route>/`, each file atomic and inside the recipe's real folder (a
    `.trtls` swapped for a symlink leading out is refused at the write: an OSError, which `run_gates` reports)."""
    folder = route_dir(loaded, result.route_name)
    within = real(loaded.base_dir)
    ensure_folder(folder, within=within)
    summary = result.summary.text()
    sarif = json.dumps(sarif_of(loaded, result), indent=2, default=str) + "\n"
    files = {"summary.json": summary, "report.sarif": sarif, "junit.xml": junit_of(result)}
    if result.summary.complete:  # what `trtls route promote` promotes: a later --gate N run leaves it be
        files[COMPLETE_SUMMARY] = summary
    for name, text in files.items():
        atomic_write_text(folder / name, text, kind=Kind.evidence, within=within)
    return folder / "summary.json"
