"""The words of a capability answer (trtls.builds.worker.capability): what TensorRT's parser and builder said about an
engine's ONNX before any build, as findings on the engine's `onnx` key.

One function computes them and every face renders them: the editor's diagnostics, `trtls check --capability`
(text, JSON, SARIF) and the HTML report. A finding says only what TensorRT answered: the parser's own reason for each
node it refused (TRT130), the builder's own logged reason when it refuses the parsed network (TRT131), the error of a
trial build stopped at its first tactic timing when it fails before it (TRT133), and, when a question could not be
asked, why (TRT132, information: nothing was measured).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from trtls.core.display import human_seconds
from trtls.core.findings import Finding, Origin, Severity

if TYPE_CHECKING:
    from trtls.core.summary_record import Summary

MAX_NODES = 20  # one finding per refused node, up to this many; the rest are counted in the last one


def _node_words(node: dict[str, Any]) -> str:
    index = f"node {node['index']}" if node.get("index") is not None else "a node"
    name = f" '{node['name']}'" if node.get("name") else ""
    op = f" ({node['op']})" if node.get("op") else ""
    inside = f", inside function {' → '.join(node['functions'])}" if node.get("functions") else ""
    where = f" [{node['where']}]" if node.get("where") else ""
    return f"{index}{name}{op}{inside}: {node.get('reason') or 'no reason given'}{where}"


def _ranges(indexes: list[int]) -> str:
    """[3, 4, 5, 9] → '3–5, 9'."""
    out: list[str] = []
    for i in sorted(indexes):
        if out and out[-1].split("–")[-1] == str(i - 1):
            out[-1] = f"{out[-1].split('–')[0]}–{i}"
        else:
            out.append(str(i))
    return ", ".join(out)


def capability_findings(engine: str, answer: dict[str, Any]) -> list[Finding]:
    """The findings of one engine's capability answer, on `engines.<engine>.onnx` (empty when TensorRT takes it)."""
    path = ("engines", engine, "onnx")
    module = answer.get("module") or "TensorRT"
    status = answer.get("status")
    if status not in ("refused", "supported", "parsed"):
        reason = answer.get("reason") or "no answer"
        return [_finding("TRT132", Severity.information, f"capability not checked: {reason}", path, answer)]
    parser = answer.get("parser") or {}
    out: list[Finding] = []
    if not parser.get("supported", True):
        nodes = list(parser.get("nodes") or [])
        for node in nodes[:MAX_NODES]:
            words = f"the ONNX parser of {module} does not support {_node_words(node)}"
            out.append(_finding("TRT130", Severity.error, words, path, {"node": node, "module": module}))
        if len(nodes) > MAX_NODES:
            out[-1] = _finding(
                "TRT130",
                Severity.error,
                out[-1].message + f" (and {len(nodes) - MAX_NODES} more nodes: trtls check --capability --format json)",
                path,
                {"nodes": nodes, "module": module},
            )
        if not nodes:  # refused subgraphs, no per-node error: name the nodes by index
            cut = [n for s in parser.get("subgraphs") or [] if not s.get("supported") for n in s.get("nodes") or []]
            which = f"nodes {_ranges(cut)}" if cut else "the model"
            words = f"the ONNX parser of {module} does not support {which} (it gave no reason)"
            out.append(_finding("TRT130", Severity.error, words, path, {"nodes": [], "module": module}))
    builder = answer.get("builder") or {}
    if builder.get("status") == "refused":
        words = (
            f"the builder of {module} refuses the network although its parser takes every node "
            f"(is_network_supported, with this engine's profiles and settings): {builder.get('reason')}"
        )
        out.append(_finding("TRT131", Severity.error, words, path, {"builder": builder, "module": module}))
    trial = answer.get("trial") or {}
    if trial.get("status") == "refused" and builder.get("status") != "refused":  # one builder error, said once
        lead = f"a trial build by {module} (this engine's profiles and settings, stopped at its first tactic timing)"
        if str(trial.get("asked") or "").startswith("the build itself"):
            lead = f"the build by {module}"
        words = (
            f"{lead} fails before the builder times any tactic, although its parser and is_network_supported take "
            f"the network: {trial.get('reason')}"
        )
        out.append(_finding("TRT133", Severity.error, words, path, {"trial": trial, "module": module}))
    elif trial.get("status") == "not_checked":
        words = f"capability checked in part: the parser and the builder take the network; {trial.get('reason')}"
        out.append(_finding("TRT132", Severity.information, words, path, {"trial": trial, "module": module}))
    return out


def _finding(code: str, severity: Severity, message: str, path: tuple[str, ...], data: dict[str, Any]) -> Finding:
    return Finding(code, severity, message, path, Origin.recipe, on_value=True, data={"capability": data})


def capability_summary(answer: dict[str, Any]) -> str:
    """One line for a report or a terminal: the verdict and what it rests on."""
    status = answer.get("status")
    module = answer.get("module") or "TensorRT"
    seconds = answer.get("seconds")
    took = f" in {human_seconds(seconds)}" if isinstance(seconds, (int, float)) else ""
    trial = (answer.get("trial") or {}).get("status")
    if status == "supported":
        tried = {"supported": ", and a trial build reaches its first timing", "not_checked": " (trial not finished)"}
        said = tried.get(str(trial), "")
        return f"{module}: the parser takes every node and the builder takes the network{said}{took}"
    if status == "parsed":
        why = (answer.get("builder") or {}).get("reason") or "not asked"
        return f"{module}: the parser takes every node{took}; the builder was not asked ({why})"
    if status == "refused":
        nodes = len((answer.get("parser") or {}).get("nodes") or [])
        if nodes:
            return f"{module}: the parser refuses {nodes} node{'s' if nodes != 1 else ''}{took}"
        if trial == "refused" and (answer.get("builder") or {}).get("status") != "refused":
            return f"{module}: a trial build fails before its first timing{took}"
        return f"{module}: the builder refuses the network{took}"
    return f"capability not checked: {answer.get('reason') or 'no answer'}"


def build_capability(
    outcome: str | None, sent: dict[str, Any] | None, parsed: bool, module: str | None
) -> dict[str, Any]:
    """The capability answer a build measured by building, for its evidence (`summary.json`'s `capability`, shown by
    the report), from what its worker sent (`build_finished.capability`, builds.worker.capability): the parser's own
    record of its parse (every node it refused, with its reasons) and, when the build failed after a whole parse, the
    builder's `is_network_supported` on the build's own network and config. A built engine is the builder taking the
    network. `parsed`: the worker reported `build_started` (it comes after the parse): a worker that sent no answer
    (an external one) but parsed says the parser took every node; one that ended before its parse measured nothing."""
    answer: dict[str, Any] = {"module": module, "source": "the build's own parse"}
    parser = (sent or {}).get("parser")
    if not isinstance(parser, dict):
        if not parsed:
            why = "the build ended before its model was parsed, or its worker sent no parser answer"
            return {**answer, "status": "not_checked", "reason": why}
        parser = {"supported": True, "nodes": []}
    answer["parser"] = parser
    if not parser.get("supported", True):
        return {**answer, "status": "refused"}
    if outcome == "built":
        return {**answer, "status": "supported", "builder": {"status": "supported", "reason": "it built"}}
    builder = (sent or {}).get("builder")
    trial = (sent or {}).get("trial")
    if isinstance(builder, dict) and builder.get("status") in ("supported", "refused"):
        source = "the build's own parse, and is_network_supported on its network after the build failed"
        status = builder["status"]
        if isinstance(trial, dict) and trial.get("status") in ("supported", "refused"):
            answer["trial"] = trial  # the build itself as the trial: did it fail before its first timing
            status = "refused" if "refused" in (status, trial["status"]) else status
        return {**answer, "source": source, "status": status, "builder": builder}
    if not isinstance(builder, dict):
        why = f"the build {outcome or 'ended'} after the parse; is_network_supported was not asked"
        if outcome == "cancelled":
            why = "the build was stopped after the parse; the builder is never asked during a stop"
        builder = {"status": "not_asked", "reason": why}
    return {**answer, "status": "parsed", "builder": builder}


PARSE_FAILED = "ONNX parse failed: "  # the worker's error when its parse of the model refused nodes (builds/worker)
_PARSER_ERROR = re.compile(r"node (\d+)(?: (['\"])(.*?)\2)?(?: \(([^()]*)\))?: (.*)", re.DOTALL)


def _parser_error_node(words: str) -> dict[str, Any]:
    """One of the worker's parser errors (`node 3 'If_0' (If): <the parser's reason>`) as a capability node."""
    m = _PARSER_ERROR.fullmatch(words.strip())
    if m is None:
        return {"index": None, "name": "", "op": "", "reason": words.strip()}
    return {"index": int(m.group(1)), "name": m.group(3) or "", "op": m.group(4) or "", "reason": m.group(5).strip()}


def recorded_capability(summary: Summary) -> dict[str, Any]:
    """A build's capability answer as its evidence recorded it; `not_checked` for evidence that has none (written
    before trtls recorded it, or by a path that parsed nothing: an engine reused from the store)."""
    answer = summary.capability
    if isinstance(answer, dict) and answer.get("status"):
        return answer
    error = summary.error
    if isinstance(error, str) and error.startswith(PARSE_FAILED):
        # Only for evidence recorded before the worker sent the parser's answer as data (build_finished.capability):
        # its parse error's text is all there is, read back into nodes. Never used for a build recorded now.
        nodes = [_parser_error_node(w) for w in error.removeprefix(PARSE_FAILED).split("; ") if w.strip()]
        module = summary.builderModule
        source = "the build's parse error, as its evidence recorded the text"
        return {"module": module, "source": source, "status": "refused", "parser": {"supported": False, "nodes": nodes}}
    return {"status": "not_checked", "reason": "this build's evidence does not record it"}
