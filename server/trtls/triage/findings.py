"""A reduction's and a divergence search's result as one located finding each (TRT980, TRT981), on the table of the
engine or route they were run for: the faces (the language server's diagnostics, the terminal) render these."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trtls.core.codes import lookup
from trtls.core.findings import Finding, Origin
from trtls.core.triage_records import DivergenceResult, ReductionResult


def reduction_finding(result: ReductionResult) -> Finding:
    minimal = result.minimal
    parts = [result.headline]
    if result.failureText:
        parts.append(f"reproduces {result.failureText}")
    if minimal is not None and minimal.nodeNames:
        parts.append(f"the minimal model ends at node {minimal.nodeNames[-1]}")
    parts.append(result.causeText)
    if result.outcome == "cancelled":
        parts.append(f"stopped ({result.stoppedBy}): the smallest failing model found so far is kept")
    if result.evidenceError:  # the run's record could not be written (TRT413): the editor says where
        parts.append(result.evidenceError)
    return Finding(
        "TRT980",
        lookup("TRT980").severity,
        "; ".join(parts),
        path=("engines", result.engine),
        origin=Origin.build,
        data={
            "reductionId": result.id,
            "engine": result.engine,
            "minimalModel": result.minimalPath,
            "profiles": minimal.profiles if minimal is not None else None,
            "cause": result.cause,
        },
    )


def measured_exclusion(result: DivergenceResult) -> list[str] | None:
    """The nodes a quick fix may add to `exclude_nodes`: only an exclusion measured to pass — a search with `fix`
    whose outputs came within tolerance with it (`fixed`). A proposal never converted and compared, or one whose
    outputs stayed out of tolerance or got worse, is said in the message and offered as no edit."""
    if result.cancelled or result.error or result.fixed is not True:
        return None
    return list(result.excludeNodes or []) or None


def divergence_finding(result: DivergenceResult, fix: dict[str, Any] | None = None) -> Finding:
    """TRT981 on the route's or engine's table. `fix` (`exclude_edit.exclude_nodes_fix`) is the quick fix that keeps
    the diverging node in its original precision; a stopped or failed search says so and proposes nothing."""
    from trtls.triage.diverge import error_text

    first = result.firstDiverging
    compared = f"the {result.precision} conversion"
    if result.mode == "models":  # two given models (`candidate`)
        compared = f"the candidate {Path(str(result.candidate)).name} against {result.reference}"
    if result.error:
        message = f"the divergence search failed: {result.error}"
    elif first is None and result.cancelled:
        message = f"the divergence search was stopped ({result.cancelSource}) before a comparison ended"
    elif first is None:
        message = f"no tensor of {compared} leaves tolerance on these inputs"
    else:
        message = (
            f"first tensor out of tolerance in {compared}: {first.tensor} from node "
            f"{first.node} ({first.op}), {error_text(first, result.rangeRtol or 0.0)}"
        )
        if result.mode == "models":
            pass  # two given models: the answer is the node named, there is no conversion to exclude it from
        elif not result.fixAsked:
            message += f"; excluding it (exclude_nodes = {[first.node]}) was not measured: search with fix to do so"
        elif result.fixed:
            widened = result.widened or []
            message += f"; with exclude_nodes = {result.excludeNodes} the outputs are within tolerance" + (
                f" (widened upstream to {widened}: excluding {first.node} alone did not lower the outputs' error)"
                if widened
                else ""
            )
        elif result.fixed is None:  # a stop before any exclusion was measured: nothing tried, nothing failed
            message += f"; whether excluding it (exclude_nodes = {[first.node]}) fixes it was not checked"
        else:
            message += "; no exclusion tried brought the outputs within tolerance: none is offered"
        if result.cancelled:
            message += f"; stopped ({result.cancelSource}) before the search ended"
    trt = result.tensorrt
    if trt is not None and trt.status == "not_checked":
        message += f"; TensorRT engine layers: not_checked: {trt.reason}"
    if result.evidenceError:
        message += f"; {result.evidenceError}"
    path = ("routes", result.route) if result.route else ("engines", str(result.engine))
    data: dict[str, Any] = {
        "divergenceId": result.id,
        "engine": result.engine,
        "excludeNodes": result.excludeNodes,
        "firstNode": first.node if first else None,
    }
    if fix is not None:
        data["fix"] = fix  # the editor turns it into a WorkspaceEdit quick fix (lsp/editor.code_actions)
    return Finding("TRT981", lookup("TRT981").severity, message, path=path, origin=Origin.build, data=data)
