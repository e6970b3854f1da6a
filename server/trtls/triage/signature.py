"""What "still fails" means for a reduction: the same failure, not any failure.

Two builds fail the same way when their classified failures (`summary.failure`, from `core.builder_errors`) agree on
the kind, TensorRT's error code, the assertion or check, and TensorRT's source file; a layer is compared only when
the original failure named one that is not a fused `{ForeignNode[…]}` (whose name changes with every cut). A parser
rejection (`ONNX parse failed: node N 'name' (Op): message`) is classified here: the same node (by name) rejected
with the same message. A failure that nothing classified has no signature: it cannot be reduced, because any
unrelated error would "still fail" — unless the user says what the failure looks like (`--fail-regex`, Polygraphy's
option): then a candidate still fails when its build fails and its error or log matches one of the patterns.
"""

from __future__ import annotations

import ast
import re
from typing import TYPE_CHECKING

from trtls.core.triage_records import FailureSignature

if TYPE_CHECKING:
    from trtls.core.summary_record import Summary

RULE = (
    "a candidate still fails when its build fails with the same classified failure as the original: same kind, "
    "TensorRT error code, assertion or check, and source file (a named, unfused layer must match too; a parser "
    "rejection: the same node and message); any other outcome or failure counts as not reproducing"
)
RULE_REGEX = (
    "a candidate still fails when its build fails and its error, log or stderr matches one of the --fail-regex "
    "patterns; any other outcome counts as not reproducing"
)

# the node's name as the worker writes it, `repr()` of it (builds/worker/adapter): in single quotes, or in double
# quotes when it holds an apostrophe (`"o'det"`), its control characters as escapes — read back by literal_eval
_PARSE = re.compile(
    r"ONNX parse failed: node \d+ (?P<node>'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\") \((?P<op>[^)]*)\): (?P<message>.*)",
    re.S,
)


LINE_LIMIT = 4096  # characters of one line a failure pattern is matched against


def failure_text(summary: Summary) -> str:
    """Everything a failed build said: its error, every log line, its stderr's tail — each line cut at LINE_LIMIT
    characters. A pattern pattern_problem accepts is still matched from every start, so its time can grow with the
    square of a line's length (`\\d+\\.` on a line of digits); a cut line bounds that, on the loop that serves
    Stop, and no message TensorRT writes is that long."""
    logs = [str(e.get("msg", "")) for e in summary.logs or [] if isinstance(e, dict)]
    tail = [str(line) for line in summary.stderrTail or []]
    text = "\n".join([str(summary.error or ""), *logs, *tail])
    return "\n".join(line[:LINE_LIMIT] for line in text.split("\n"))


def regex_signature(summary: Summary, patterns: list[str]) -> FailureSignature | None:
    """The first of `patterns` a failed build's text matches, as a signature; None when none does."""
    if summary.outcome != "failed":
        return None
    text = failure_text(summary)
    for pattern in patterns:
        m = re.search(pattern, text, re.M)
        if m is not None:
            named = LAYER_NAMED.search(text)  # the layer TensorRT names, if any: a reduction tries it alone first
            return FailureSignature(
                kind="fail_regex",
                patterns=list(patterns),
                pattern=pattern,
                matched=m.group(0)[:200],
                layer=named.group(1) if named else None,
            )
    return None


LAYER_NAMED = re.compile(r"\bI[A-Za-z]+Layer ([^\s:]+):")  # `ITopKLayer topk: topk: K exceeds …`


def parser_rejection(summary: Summary) -> FailureSignature | None:
    """A build the ONNX parser refused, by the node it refused and why (its position in the model is not compared:
    it changes with every cut)."""
    m = _PARSE.search(str(summary.error or ""))
    if summary.outcome != "failed" or m is None:
        return None
    return FailureSignature(
        kind="parser_rejection",
        errorCode=None,
        assertion=m.group("message").strip().splitlines()[0][:300] if m.group("message").strip() else "",
        sourceFile=None,
        layer=_node_name(m.group("node")) or None,
        op=m.group("op"),
    )


def _node_name(literal: str) -> str:
    """The node's real name from the string literal the worker wrote (a literal only: nothing else is evaluated)."""
    try:
        name = ast.literal_eval(literal)
    except (ValueError, SyntaxError):
        return literal[1:-1]
    return name if isinstance(name, str) else literal[1:-1]


def failure_signature(summary: Summary, patterns: list[str] | None = None) -> FailureSignature | None:
    """The parts of a failed build's failure that a reduction compares; None when nothing classified it (and, with
    `patterns`, when its text matches none of them)."""
    if patterns:
        return regex_signature(summary, patterns)
    failure = summary.failure
    if summary.outcome != "failed":
        return None
    if failure is None:
        return parser_rejection(summary)
    source, layer = failure.source, failure.layer
    return FailureSignature(
        kind=failure.kind,
        # TensorRT's error code; a setting's, a plugin's, a precision step's trtls code when it has none
        errorCode=failure.errorCode if failure.errorCode is not None else failure.code,
        assertion=failure.assertion or failure.summary,
        sourceFile=source.split(":", 1)[0] if source is not None else None,
        layer=layer if layer is not None and "ForeignNode" not in layer else None,
    )


def same_failure(target: FailureSignature, summary: Summary) -> bool:
    if target.kind == "fail_regex":
        return regex_signature(summary, list(target.patterns or [])) is not None
    got = failure_signature(summary)
    if got is None:
        return False
    same = (got.kind, got.errorCode, got.assertion, got.sourceFile) == (
        target.kind,
        target.errorCode,
        target.assertion,
        target.sourceFile,
    )
    return same and (not target.layer or got.layer == target.layer)


def describe(signature: FailureSignature) -> str:
    """One line: `internal_error 1 · CHECK_GE(smem_limit, …) · kernel_gen_utils.cpp`."""
    if signature.kind == "fail_regex":
        return f"fail_regex {signature.pattern!r} · {signature.matched}"
    if signature.kind == "parser_rejection":
        return f"parser_rejection · {signature.layer} ({signature.op}) · {signature.assertion}"
    parts = [signature.kind, str(signature.errorCode)]
    parts += [str(v) for v in (signature.assertion, signature.sourceFile, signature.layer) if v]
    return " · ".join(parts)
