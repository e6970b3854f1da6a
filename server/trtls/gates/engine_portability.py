"""Gate 5's "engine portability" (TRT911): will the route's engine load where it goes.

* `release.engine_portability`, for a route that deploys an engine: what TensorRT-RTX said of the linked build's
  engine on the GPU the build ran on (`engineValidity`, builds.worker.engine_validity). `invalid` holds, with the
  named reason "engine portability" and TensorRT's own sentence; `valid` and `suboptimal` pass; not measured (no GPU
  on the build machine, a record from before the question was asked, no build at all) is `not_checked` with the
  reason — never a pass on nothing measured.
* What the engine loads on (`built_loads_on`): core.loads_on's rule over the linked build's record (the module that
  built it, its `target`), else over the recipe's engine table; `runbook_holds.portability_checks` holds each target
  outside it, and the route summary shows it as `runtime_target_loads_on`.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

from trtls.core.gate_result import GateCheck, gate_check
from trtls.core.loads_on import LoadsOn, engine_loads_on, loads_on
from trtls.gates.context import GateContext

if TYPE_CHECKING:
    from trtls.core.summary_record import Summary

CHECK = "release.engine_portability"
REASON = "engine portability"  # the runbook's named reason to pause a route


def linked_build(ctx: GateContext) -> tuple[str, Summary] | None:
    """The route's engine's newest successful build (gate 2's link): its record's path and the record."""
    from trtls.gates.environment_evidence import latest_successful_build

    if ctx.route.engine is None:
        return None
    linked = latest_successful_build(ctx.recipe_dir, ctx.route.engine)
    return (str(linked[0]), linked[1]) if linked else None


def built_loads_on(ctx: GateContext, summary: Summary | None = None) -> LoadsOn | None:
    """What the route's engine loads on: as the linked build was made (its module and target), else as the recipe
    asks; None for a route that deploys its ONNX."""
    if ctx.route.engine is None:
        return None
    if summary is None:
        linked = linked_build(ctx)
        summary = linked[1] if linked else None
    if summary is not None and summary.builderModule:
        t = summary.target
        return loads_on(
            summary.builderModule,
            t.computeCapabilities if t else None,
            t.hardwareCompatibilityLevel if t else None,
            (t.deviceComputeCapability if t else None) or summary.computeCapability,
        )
    recipe = ctx.loaded.recipe
    eng = recipe.engines.get(ctx.route.engine) if recipe is not None else None
    return engine_loads_on(eng) if eng is not None else None


def loads_on_record(ctx: GateContext) -> dict[str, object] | None:
    """The route summary's `runtime_target_loads_on`: `built_loads_on`'s answer as a record; None for an ONNX route."""
    built = built_loads_on(ctx)
    return built.record() if built is not None else None


def validity_check(ctx: GateContext, linked: tuple[str, Summary] | None) -> GateCheck | None:
    """The linked build's `engineValidity`, as a check (None for a route that deploys its ONNX)."""
    route, name = ctx.route, ctx.route_name
    if route.engine is None:
        return None
    check = partial(gate_check, 5, CHECK)
    where = ("routes", name, "engine")
    if linked is None:
        why = f"no successful build of engine {route.engine} is recorded (trtls build --engine {route.engine})"
        return check("not_checked", f"{REASON}: not measured: {why}", "TRT911", where, {"reason": REASON})
    path, summary = linked
    validity: dict[str, Any] = dict(summary.engineValidity or {})
    t = summary.target
    device = (t.device if t else None) or "the build machine's GPU"
    cc = validity.get("gpuComputeCapability") or (t.deviceComputeCapability if t else None)
    on = f"{device}" + (f" (compute capability {cc})" if cc else "")
    evidence = {
        "reason": REASON,
        "buildId": summary.buildId,
        "evidence_path": path,
        "device": t.device if t else None,
        **{k: validity.get(k) for k in ("status", "reason", "diagnosticsNames", "supportedComputeCapabilities")},
        "gpuComputeCapability": cc,
    }
    status = validity.get("status")
    said = str(validity.get("reason") or "")
    if status == "invalid":
        message = f"{REASON}: the engine will not load on {on}, where build {summary.buildId} asked: {said}"
        return check("hold", message, "TRT911", where, evidence)
    if status in ("valid", "suboptimal"):
        how = "loads" if status == "valid" else f"loads, suboptimally ({said})"
        return check("pass", f"{REASON}: TensorRT-RTX says the engine {how} on {on}", "TRT911", where, evidence)
    why = said or f"build {summary.buildId} recorded no engineValidity (made before trtls asked TensorRT)"
    return check("not_checked", f"{REASON}: not measured: {why}", "TRT911", where, evidence)
