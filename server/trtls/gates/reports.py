"""CI reports: findings as SARIF 2.1.0 (code scanning annotates the recipe), gate checks as JUnit XML.

SARIF: one rule per finding code (helpUri = the code's section under docs/codes/, its description the registered
title, `core.codes`), one result per
finding, located in the recipe through `locate(path) -> (line, col, end_line, end_col)`, 1-based with an
exclusive end column, or None (the result then points at the whole file). Columns count Unicode code
points (what `core.tomlpos` produces), declared to consumers via `columnKind`.
Severity → level: error → "error", warning → "warning", information/hint → "note".

JUnit: one <testcase> per check, grouped into one <testsuite> per `suite` (in order of first appearance).
Status → element:
  pass   → nothing (the testcase passes)
  fail   → <failure type="fail">
  reject → <failure type="reject">
  hold   → <failure type="hold">   a hold is not a pass: CI must not go green while proof is missing,
                                   and JUnit's <skipped> is shown as green by most CI systems
  error  → <error>                 the check itself could not run
  skip   → <skipped>               the check did not apply
  not_checked → <skipped>          the check did not run or had nothing to compare; the route still holds
                                   unless the recipe waives it (the decision, not JUnit, says so)
"""

from __future__ import annotations

import json
import os
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Any
from urllib.parse import quote

from trtls.core.codes import CODES
from trtls.core.findings import DOCS_BASE, Finding, Severity, TomlPath
from trtls.core.paths import real
from trtls.fs import parse_json, write_report

SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
TOOL_URI = DOCS_BASE.split("/blob/")[0]

Region = tuple[int, int, int, int]  # start line, start column, end line, end column (1-based, end exclusive)
Locate = Callable[[TomlPath], Region | None]

_LEVEL = {Severity.error: "error", Severity.warning: "warning", Severity.information: "note", Severity.hint: "note"}


def _title(code: str) -> str:
    entry = CODES.get(code)
    return f"{code} {entry.title}" if entry is not None else f"trtls {code}"


def _jsonable(value: Any) -> Any:
    """Finding.data may hold anything; SARIF property bags must be JSON."""
    return parse_json(json.dumps(value, default=str))


def _artifact_location(recipe_path: str | os.PathLike[str]) -> dict[str, Any]:
    p = PurePath(recipe_path)
    if p.is_absolute():
        return {"uri": Path(p).as_uri()}
    # Relative paths stay relative to the checkout root, which is what code scanning resolves against.
    return {"uri": quote(p.as_posix()), "uriBaseId": "%SRCROOT%"}


def to_sarif(
    findings: Iterable[Finding],
    locate: Locate,
    recipe_path: str | os.PathLike[str],
    tool_version: str,
    *,
    rule_titles: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A SARIF 2.1.0 log with one run. `rule_titles` overrides a rule's one-line description (default: the code's
    registered title, `core.codes`)."""
    findings = list(findings)
    location = _artifact_location(recipe_path)
    codes = sorted({f.code for f in findings})
    rule_index = {code: i for i, code in enumerate(codes)}
    first: dict[str, Finding] = {}
    for f in findings:
        first.setdefault(f.code, f)
    rules = [
        {
            "id": code,
            "shortDescription": {"text": (rule_titles or {}).get(code) or _title(code)},
            "helpUri": first[code].doc_url,
            "defaultConfiguration": {"level": _LEVEL[first[code].severity]},
        }
        for code in codes
    ]
    results = []
    for f in findings:
        physical: dict[str, Any] = {"artifactLocation": dict(location)}
        region = locate(f.path)
        if region is not None:
            line, col, end_line, end_col = region
            physical["region"] = {"startLine": line, "startColumn": col, "endLine": end_line, "endColumn": end_col}
        results.append(
            {
                "ruleId": f.code,
                "ruleIndex": rule_index[f.code],
                "level": _LEVEL[f.severity],
                "message": {"text": f.message},
                "locations": [{"physicalLocation": physical}],
                "properties": {
                    "tomlPath": [str(k) if not isinstance(k, int) else k for k in f.path],
                    "origin": f.origin.value,
                    "onValue": f.on_value,
                    "data": _jsonable(f.data),
                },
            }
        )
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {"name": "trtls", "version": tool_version, "informationUri": TOOL_URI, "rules": rules}
                },
                "columnKind": "unicodeCodePoints",
                "artifacts": [{"location": dict(location), "roles": ["analysisTarget"]}],
                "results": results,
            }
        ],
    }


def write_sarif(path: str | os.PathLike[str], sarif: Mapping[str, Any]) -> None:
    """A `-o` SARIF file: it replaces only a JSON file, never the recipe or a model (`write_report_file`)."""
    write_report_file(path, json.dumps(sarif, indent=2, ensure_ascii=False) + "\n")


def write_report_file(path: str | os.PathLike[str], text: str) -> None:
    """Write a `-o` report atomically inside the output's own real folder, replacing an existing file only when it is
    empty or a report trtls wrote (`fs.write_report`): `trtls gates -o trtls.toml`, `-o model.onnx` or `-o pom.xml`
    is refused (an OSError naming the file) and the file is unchanged."""
    target = Path(path)
    folder = real(target.parent if str(target.parent) else ".")
    write_report(target, text, within=folder)


# ---------------------------------------------------------------------------------------------- JUnit

STATUSES = ("pass", "fail", "reject", "hold", "error", "skip", "not_checked")
_SKIPPED_STATUSES = ("skip", "not_checked")
_FAILURE_STATUSES = ("fail", "reject", "hold")
# XML 1.0 cannot carry most control characters or lone surrogates, even escaped; a check message may.
_NOT_XML = re.compile("[^\u0009\u000a\u000d\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


@dataclass(frozen=True)
class Check:
    suite: str  # e.g. "gate3.bundle"
    name: str  # e.g. "section digests"
    status: str  # one of STATUSES
    message: str = ""
    duration_s: float = 0.0


def _as_check(item: Check | Mapping[str, Any] | Any) -> Check:
    if isinstance(item, Check):
        check = item
    elif isinstance(item, Mapping):
        check = Check(item["suite"], item["name"], item["status"], item.get("message", ""), item.get("duration_s", 0.0))
    else:
        check = Check(
            item.suite, item.name, item.status, getattr(item, "message", ""), getattr(item, "duration_s", 0.0)
        )
    status = getattr(check.status, "value", check.status)  # accept str enums
    if status not in STATUSES:
        raise ValueError(f"check {check.suite}/{check.name}: status {status!r} is not one of {STATUSES}")
    return Check(str(check.suite), str(check.name), status, str(check.message or ""), float(check.duration_s or 0.0))


def _xml_text(text: str) -> str:
    return _NOT_XML.sub("\ufffd", text)


def to_junit(checks: Iterable[Check | Mapping[str, Any] | Any], *, name: str = "trtls") -> str:
    """JUnit XML, one testcase per check (status mapping in the module docstring)."""
    suites: dict[str, list[Check]] = {}
    for item in checks:
        check = _as_check(item)
        suites.setdefault(check.suite, []).append(check)

    def counts(items: Sequence[Check]) -> dict[str, str]:
        return {
            "tests": str(len(items)),
            "failures": str(sum(c.status in _FAILURE_STATUSES for c in items)),
            "errors": str(sum(c.status == "error" for c in items)),
            "skipped": str(sum(c.status in _SKIPPED_STATUSES for c in items)),
            "time": f"{sum(c.duration_s for c in items):.3f}",
        }

    everything = [c for items in suites.values() for c in items]
    root = ET.Element("testsuites", {"name": _xml_text(name), **counts(everything)})
    for suite_name, items in suites.items():
        suite = ET.SubElement(root, "testsuite", {"name": _xml_text(suite_name), **counts(items)})
        for c in items:
            case = ET.SubElement(
                suite,
                "testcase",
                {"classname": _xml_text(c.suite), "name": _xml_text(c.name), "time": f"{c.duration_s:.3f}"},
            )
            message = _xml_text(c.message)
            if c.status in _FAILURE_STATUSES:
                failure = ET.SubElement(case, "failure", {"type": c.status, "message": message})
                failure.text = message
            elif c.status == "error":
                error = ET.SubElement(case, "error", {"type": "error", "message": message})
                error.text = message
            elif c.status in _SKIPPED_STATUSES:
                ET.SubElement(case, "skipped", {"message": message})
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def write_junit(path: str | os.PathLike[str], xml_text: str) -> None:
    """A `-o` JUnit file: it replaces only an XML file (`write_report_file`)."""
    write_report_file(path, xml_text)
