"""What kind of failure a TensorRT log describes: an internal error (a bug or limit inside TensorRT) is not
a bad recipe and not bad luck, so it gets its own record and its own advice.

TensorRT reports them as `Error Code 2: Internal Error (Assertion … failed. In analyze at …graphScope.cpp:…)`,
`Error Code 10: Internal Error (Could not find any implementation for node …)`, or, from its Myelin
compiler, `Error Code 1: Myelin ([…] MyelinCheckException: file.cpp:278: CHECK(…) failed. In compileGraph at
…)` — the last measured here: TensorRT-RTX 1.7 on a CPU with `tactic_shared_memory_kib = 32`, and with REFIT
or STRIP_PLAN (their compile needs a GPU). The first internal error in the log is the cause; later ones
(`Assertion engine != nullptr failed`) are its consequences.
"""

from __future__ import annotations

import re
from typing import Any

_INTERNAL = re.compile(r"Error Code (?P<code>\d+): (?P<family>Internal Error|Myelin) \((?P<detail>.*)\)\s*$", re.S)
_ASSERTION = re.compile(r"Assertion (?P<assertion>.+?) failed")
_CHECK = re.compile(r"(?P<where>[\w./-]+\.(?:cpp|hpp|h|cu)):(?P<line>\d+): (?P<assertion>CHECK\w*\(.*?\)) failed")
_IN_AT = re.compile(r"In (?P<function>\w+) at (?P<file>[^\s)]+?\.(?:cpp|hpp|h|cu))(?::(?P<line>\d+))?")
_PREFIX = re.compile(r"\[(?P<file>[\w.]+\.(?:cpp|hpp|h|cu))::(?P<function>\w+)::(?P<line>\d+)\]")
# Where TensorRT names the layer: "… for node X.", "node {ForeignNode[A...B]}", "(X: message", "layer X"
_LAYER_PATTERNS = (
    re.compile(r"for node (?P<layer>\{ForeignNode\[.*?\]\}|[^\s.,)]+(?:\.[^\s.,)]+)*)"),
    re.compile(r"\bnode (?P<layer>\{ForeignNode\[.*?\]\})"),
    re.compile(r"\blayer (?P<layer>[^\s,;:)]+)"),
    re.compile(r"\b(?:for|at|in) (?P<layer>/[^\s,;:)]+)"),
    re.compile(r"^(?P<layer>/[^\s:]+|[A-Za-z_][\w./-]*_\d+):\s"),
)
_CONSEQUENCES = ("engine != nullptr", "enginePtr != nullptr")


def internal_error(logs: list[dict[str, str]] | list[tuple[str, str]]) -> dict[str, Any] | None:
    """The first TensorRT internal error in the logs, as a record; None when there is none."""
    found: list[dict[str, Any]] = []
    for entry in logs:
        severity, msg = (entry["severity"], entry["msg"]) if isinstance(entry, dict) else entry
        if severity not in ("ERROR", "INTERNAL_ERROR"):
            continue
        record = parse_internal_error(msg)
        if record is not None:
            found.append(record)
    causes = [r for r in found if not any(c in (r.get("assertion") or "") for c in _CONSEQUENCES)]
    return (causes or found)[0] if found else None


def parse_internal_error(msg: str) -> dict[str, Any] | None:
    m = _INTERNAL.search(msg)
    if m is None:
        return None
    detail = m.group("detail")
    if m.group("family") == "Myelin" and "Exception" not in detail and "failed" not in detail:
        return None  # a Myelin message that is not an internal check
    record: dict[str, Any] = {
        "kind": "internal_error",
        "errorCode": int(m.group("code")),
        "message": msg.strip(),
        "assertion": None,
        "source": None,
        "layer": None,
    }
    check = _CHECK.search(detail)
    assertion = _ASSERTION.search(detail)
    if check is not None:
        record["assertion"] = check.group("assertion")
        record["source"] = f"{check.group('where').rsplit('/', 1)[-1]}:{check.group('line')}"
    elif assertion is not None:
        record["assertion"] = assertion.group("assertion").strip()
    else:  # e.g. "Could not find any implementation for node …": the first sentence says what happened
        record["summary"] = re.split(r"(?<=\w)\.\s|\.$", detail.strip(), maxsplit=1)[0][:200]
    where = _IN_AT.search(detail)
    prefix = _PREFIX.search(msg)
    if where is not None:
        record["function"] = where.group("function")
        if record["source"] is None:
            line = where.group("line")
            record["source"] = where.group("file").rsplit("/", 1)[-1] + (f":{line}" if line else "")
    elif prefix is not None:
        record["function"] = prefix.group("function")
        record["source"] = record["source"] or f"{prefix.group('file')}:{prefix.group('line')}"
    record["layer"] = _layer(detail)
    return record


_SOURCE_FILE = re.compile(r"\.(?:cpp|hpp|h|cu)(?::\d+)?$")


def _layer(detail: str) -> str | None:
    for pattern in _LAYER_PATTERNS:
        for m in pattern.finditer(detail):
            layer = m.group("layer").rstrip(".")
            # "In analyze at /_src/optimizer/common/graphScope.cpp:471" names TensorRT's source, not a layer
            # (measured: silero-vad's If-based model on TensorRT-RTX 1.7, tests/onnx_files/test_third_party_models.py)
            if not _SOURCE_FILE.search(layer):
                return layer
    return None


def describe(record: dict[str, Any]) -> str:
    """One line for a diagnostic: what failed, where, and in which layer when the log names one."""
    what = (
        f"{record['assertion']} failed" if record.get("assertion") else record.get("summary") or "internal check failed"
    )
    where = f" in {record['function']}" if record.get("function") else ""
    where += f" ({record['source']})" if record.get("source") else ""
    layer = f"; layer named by the log: {record['layer']}" if record.get("layer") else ""
    return f"TensorRT internal error (Error Code {record.get('errorCode')}): {what}{where}{layer}"


_LEAN = re.compile(r"Unable to load library: (?P<lib>libnvinfer_lean[\w.]*)")


def setting_failure(logs: list[dict[str, str]] | list[tuple[str, str]]) -> dict[str, Any] | None:
    """Failures the log pins on one recipe key. Measured: TensorRT-RTX 1.7 with version_compatible alone fails
    with `Error Code 6: API Usage Error (Unable to load library: libnvinfer_lean.so.1 …)` — the wheel ships no
    lean runtime to embed; with exclude_lean_runtime it builds."""
    for entry in logs:
        severity, msg = (entry["severity"], entry["msg"]) if isinstance(entry, dict) else entry
        m = _LEAN.search(msg) if severity in ("ERROR", "INTERNAL_ERROR") else None
        if m is not None:
            return {
                "kind": "setting",
                "code": "TRT146",
                "key": "version_compatible",
                "hint": f"version_compatible embeds the lean runtime, and this TensorRT has no {m.group('lib')} "
                "to embed: set exclude_lean_runtime = true (the lean runtime must then be installed where the "
                "engine runs)",
            }
    return None
