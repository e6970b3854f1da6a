"""What "still fails" means for a reduction: the same failure, not any failure.

Two builds fail the same way when their classified failures (`summary.failure`, from `core.builder_errors`) agree on
the kind, TensorRT's error code, the assertion or check, and TensorRT's source file; a layer is compared only when
the original failure named one that is not a fused `{ForeignNode[…]}` (whose name changes with every cut). A failure
that nothing classified has no signature: it cannot be reduced, because any unrelated error would "still fail".
"""

from __future__ import annotations

from typing import Any

RULE = (
    "a candidate still fails when its build fails with the same classified failure as the original: same kind, "
    "TensorRT error code, assertion or check, and source file (a named, unfused layer must match too); any other "
    "outcome or failure counts as not reproducing"
)


def failure_signature(summary: dict[str, Any]) -> dict[str, Any] | None:
    """The parts of a failed build's classified failure that a reduction compares; None when nothing classified it."""
    failure = summary.get("failure")
    if summary.get("outcome") != "failed" or not isinstance(failure, dict):
        return None
    source = failure.get("source")
    layer = failure.get("layer")
    return {
        "kind": failure.get("kind"),
        "errorCode": failure.get("errorCode", failure.get("code")),
        "assertion": failure.get("assertion") or failure.get("summary"),
        "sourceFile": source.split(":", 1)[0] if isinstance(source, str) else None,
        "layer": layer if isinstance(layer, str) and "ForeignNode" not in layer else None,
    }


def same_failure(target: dict[str, Any], summary: dict[str, Any]) -> bool:
    got = failure_signature(summary)
    if got is None:
        return False
    keys = ["kind", "errorCode", "assertion", "sourceFile"] + (["layer"] if target.get("layer") else [])
    return all(got[k] == target[k] for k in keys)


def describe(signature: dict[str, Any]) -> str:
    """One line: `internal_error 1 · CHECK_GE(smem_limit, …) · kernel_gen_utils.cpp`."""
    parts = [str(signature.get("kind")), str(signature.get("errorCode"))]
    parts += [str(signature[k]) for k in ("assertion", "sourceFile", "layer") if signature.get(k)]
    return " · ".join(parts)
