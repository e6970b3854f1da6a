"""A reduction's and a divergence search's result as one located finding each (TRT980, TRT981), on the table of the
engine or route they were run for: the faces (the language server's diagnostics, the terminal) render these."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trtls.core.codes import lookup
from trtls.core.findings import Finding, Origin


def reduction_finding(record: dict[str, Any]) -> Finding:
    minimal = record.get("minimal") or {}
    parts = [record["headline"]]
    if record.get("failureText"):
        parts.append(f"reproduces {record['failureText']}")
    if minimal.get("nodeNames"):
        parts.append(f"the minimal model ends at node {minimal['nodeNames'][-1]}")
    parts.append(record["causeText"])
    if record.get("outcome") == "cancelled":
        parts.append(f"stopped ({record.get('stoppedBy')}): the smallest failing model found so far is kept")
    if record.get("evidenceError"):  # the run's record could not be written (TRT413): the editor says where
        parts.append(str(record["evidenceError"]))
    return Finding(
        "TRT980",
        lookup("TRT980").severity,
        "; ".join(parts),
        path=("engines", record["engine"]),
        origin=Origin.build,
        data={
            "reductionId": record["id"],
            "engine": record["engine"],
            "minimalModel": record.get("minimalPath"),
            "profiles": minimal.get("profiles"),
            "cause": record.get("cause"),
        },
    )


def measured_exclusion(record: dict[str, Any]) -> list[str] | None:
    """The nodes a quick fix may add to `exclude_nodes`: only an exclusion measured to pass — a search with `fix`
    whose outputs came within tolerance with it (`fixed`). A proposal never converted and compared, or one whose
    outputs stayed out of tolerance or got worse, is said in the message and offered as no edit."""
    if record.get("cancelled") or record.get("error") or record.get("fixed") is not True:
        return None
    return list(record.get("excludeNodes") or []) or None


def divergence_finding(record: dict[str, Any], fix: dict[str, Any] | None = None) -> Finding:
    """TRT981 on the route's or engine's table. `fix` (`exclude_edit.exclude_nodes_fix`) is the quick fix that keeps
    the diverging node in its original precision; a stopped or failed search says so and proposes nothing."""
    from trtls.triage.diverge import error_text

    first = record.get("firstDiverging")
    compared = f"the {record.get('precision')} conversion"
    if record.get("mode") == "models":  # two given models (`candidate`)
        compared = f"the candidate {Path(str(record.get('candidate'))).name} against {record.get('reference')}"
    if record.get("error"):
        message = f"the divergence search failed: {record['error']}"
    elif first is None and record.get("cancelled"):
        message = f"the divergence search was stopped ({record.get('cancelSource')}) before a comparison ended"
    elif first is None:
        message = f"no tensor of {compared} leaves tolerance on these inputs"
    else:
        message = (
            f"first tensor out of tolerance in {compared}: {first['tensor']} from node "
            f"{first['node']} ({first['op']}), {error_text(first, record['rangeRtol'])}"
        )
        if record.get("mode") == "models":
            pass  # two given models: the answer is the node named, there is no conversion to exclude it from
        elif not record.get("fixAsked"):
            message += f"; excluding it (exclude_nodes = {[first['node']]}) was not measured: search with fix to do so"
        elif record.get("fixed"):
            widened = record.get("widened") or []
            message += f"; with exclude_nodes = {record['excludeNodes']} the outputs are within tolerance" + (
                f" (widened upstream to {widened}: excluding {first['node']} alone did not lower the outputs' error)"
                if widened
                else ""
            )
        else:
            message += "; no exclusion tried brought the outputs within tolerance: none is offered"
        if record.get("cancelled"):
            message += f"; stopped ({record.get('cancelSource')}) before the search ended"
    trt = record.get("tensorrt")
    if isinstance(trt, dict) and trt.get("status") == "not_checked":
        message += f"; TensorRT engine layers: not_checked: {trt['reason']}"
    if record.get("evidenceError"):
        message += f"; {record['evidenceError']}"
    path = ("routes", record["route"]) if record.get("route") else ("engines", record["engine"])
    data: dict[str, Any] = {
        "divergenceId": record["id"],
        "engine": record["engine"],
        "excludeNodes": record.get("excludeNodes"),
        "firstNode": first["node"] if first else None,
    }
    if fix is not None:
        data["fix"] = fix  # the editor turns it into a WorkspaceEdit quick fix (lsp/editor.code_actions)
    return Finding("TRT981", lookup("TRT981").severity, message, path=path, origin=Origin.build, data=data)
