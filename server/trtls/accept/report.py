"""The acceptance report, which is the evidence: per scenario the full evidence record of the build it stopped
(or faulted) and of its retry, how the fault was produced (real or simulated), and each criterion with the
values it judged. Rendered as text, JSON, or JUnit XML (evidence as <properties>).

A criterion passes or fails only on what was measured. `not_checked` (should have been measured, was not) is
never a pass: the run passes only when it was waived by name (`--waive 6`, `--waive deep_tactics`,
`--waive disk_full:6`).
"""

from __future__ import annotations

import json
import math
import platform
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from typing import Any

from trtls.accept.criteria import FAIL, NA, NOT_CHECKED, PASS, Observation, judge
from trtls.core.evidence import SEED_FIELDS
from trtls.core.summary_record import Summary
from trtls.core.vocabulary import NO_WORKER_OUTCOMES

# The evidence record as the report carries it: the runbook's fields first, then what supports them.
EVIDENCE_KEYS = (
    *SEED_FIELDS,
    "buildId",
    "engine",
    "outcome",
    "error",
    "forced",
    "cleanupLatencyMs",
    "retryRule",
    "builderModule",
    "computeCapability",
    "target",
    "network",
    "effectiveSettings",
    "timingCache",
    "previousEngineIntact",
    "engineArtifact",
    "artifacts",
    "outputCheck",
    "resources",
    "environment",
    "durationS",
    "notes",
)


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty list."""
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def stats(values: list[float]) -> dict[str, Any]:
    if not values:
        return {"n": 0, "p50": None, "p95": None, "max": None}
    return {
        "n": len(values),
        "p50": round(percentile(values, 50), 3),
        "p95": round(percentile(values, 95), 3),
        "max": round(max(values), 3),
    }


def latency_table(observations: list[Observation]) -> dict[str, dict[str, Any]]:
    """Per cancel source (forced stops counted apart, never mixed with cooperative ones)."""
    groups: dict[str, dict[str, list[float]]] = {}
    for o in observations:
        s = Summary.written(o.summary or {})
        src = s.cancelSource
        if not src or o.skipped:
            continue
        key = f"{src} (forced)" if s.forced else src
        g = groups.setdefault(key, {"request_to_ack_ms": [], "ack_to_cleanup_ms": []})
        if isinstance(s.cancelLatencyMs, (int, float)):
            g["request_to_ack_ms"].append(float(s.cancelLatencyMs))
        if isinstance(s.cleanupLatencyMs, (int, float)):
            g["ack_to_cleanup_ms"].append(float(s.cleanupLatencyMs))
    return {k: {m: stats(v) for m, v in g.items()} for k, g in sorted(groups.items())}


def evidence_record(record: dict[str, Any] | None) -> dict[str, Any] | None:
    """The evidence a summary.json holds, every runbook field included (a missing one shows as absent). Its values
    are copied from the record as JSON, as it holds them: the report carries them, checked or not."""
    if record is None:
        return None
    evidence = {k: record[k] for k in EVIDENCE_KEYS if k in record}
    evidence["phases"] = len(Summary.written(record).phaseTree or [])
    return evidence


def waived(waivers: Iterable[str], scenario: str, criterion: str) -> bool:
    w = set(waivers)
    return bool({criterion, scenario, f"{scenario}:{criterion}"} & w)


def build_report(
    observations: list[Observation],
    scenarios: dict[str, Any],
    meta: dict[str, Any] | None = None,
    waivers: Iterable[str] = (),
) -> dict[str, Any]:
    """`scenarios`: name → Scenario (its declared fault, criteria, proves / does not prove)."""
    waivers = list(waivers)
    out: list[dict[str, Any]] = []
    for o in observations:
        sc = scenarios.get(o.scenario)
        declared = sc.criteria if sc is not None else None
        rows = []
        for num, title, v in judge(o, declared):
            w = v.status == NOT_CHECKED and waived(waivers, o.scenario, num)
            rows.append(
                {
                    "criterion": num,
                    "title": title,
                    "status": v.status,
                    "waived": w,
                    "message": v.message,
                    "measured": v.measured,
                }
            )
        s = Summary.written(o.summary or {})
        r = o.retry or {}
        fault: dict[str, Any] = o.fault or (
            {"kind": sc.fault, "how": sc.how} if sc is not None else {"kind": None, "how": None}
        )
        passed = all(row["status"] in (PASS, NA) or row["waived"] for row in rows)
        out.append(
            {
                "scenario": o.scenario,
                "passed": passed,
                "proves": sc.proves if sc else "",
                "doesNotProve": sc.does_not_prove if sc else "",
                "fault": fault,
                "outcome": s.outcome,
                "cancelSource": s.cancelSource,
                "forced": s.forced,
                "timingCacheMode": s.timingCacheMode,
                "note": o.extra.get("note"),
                "skipped": o.skipped,
                "error": o.error,
                "durationS": o.extra.get("durationS"),
                "evidence": evidence_record(o.summary_on_disk or o.summary),
                "evidencePath": _evidence_path(o),
                "retry": {
                    "advised": s.retryPolicy,
                    "applied": r.get("policy"),
                    "action": r.get("action", "none"),
                    "previousVerified": r.get("previous_verified"),
                    "deserializes": r.get("deserializes"),
                    "evidence": evidence_record(r.get("summary_on_disk") or r.get("summary")),
                },
                "evidenceFolder": o.evidence_dir,
                "criteria": rows,
            }
        )
    not_checked = [
        f"{s['scenario']}:{r['criterion']}"
        for s in out
        for r in s["criteria"]
        if r["status"] == NOT_CHECKED and not r["waived"]
    ]
    store, bypassed = store_use(observations)
    return {
        "framework": "trtls stuck-build acceptance",
        "createdAt": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "host": platform.platform(),
        **(meta or {}),
        "passed": all(s["passed"] for s in out) and bypassed,  # an engine from the store measures no build
        "engineStore": store,
        "waivers": waivers,
        "notChecked": not_checked,
        "failedScenarios": [s["scenario"] for s in out if not s["passed"]],
        "keptFolders": {s["scenario"]: s["evidenceFolder"] for s in out if s["evidenceFolder"]},
        "scenarios": out,
        "cancelLatency": latency_table(observations),
    }


def _evidence_path(o: Observation) -> str | None:
    build_id = Summary.written(o.summary or {}).buildId
    if not build_id or not o.evidence_dir:
        return None
    return f"{o.evidence_dir}/.trtls/runs/{build_id}/summary.json"


MARK = {PASS: "pass", FAIL: "FAIL", NA: "n/a ", NOT_CHECKED: "NOT CHECKED"}


def store_use(observations: list[Observation]) -> tuple[str, bool]:
    """What the scenarios' own records say of the engine store, and whether it was bypassed: a scenario measures a
    build, and an engine from the store (`reused`, `rolled_back`: no worker) measures none (docs/store.md). Said from
    the records, not assumed: a record from the store is named, and so is a lookup that missed before a build (the
    CLI scenarios' `trtls build` looks the store up; the supervisor's scenarios never do)."""
    records = []
    for o in observations:
        retry = o.retry or {}
        for rec in (o.summary_on_disk or o.summary, retry.get("summary_on_disk") or retry.get("summary")):
            if isinstance(rec, dict):
                records.append((o.scenario, Summary.written(rec)))
    if not records:
        return "not measured: no scenario left a build record", True
    served = [f"{name} ({rec.outcome})" for name, rec in records if rec.outcome in NO_WORKER_OUTCOMES]
    if served:
        return "NOT bypassed: an engine from the store in " + ", ".join(served), False
    looked = sum(1 for _, rec in records if "store" in rec.model_fields_set)
    missed = f"; {looked} looked it up first and built" if looked else ""
    return f"bypassed: none of the {len(records)} build records is an engine from the store{missed}", True


def to_text(report: dict[str, Any]) -> str:
    lines = [
        f"trtls accept — {report.get('recipe', '')} engine {report.get('engine', '')}: "
        f"{'PASSED' if report['passed'] else 'FAILED'}",
        f"engine store: {report.get('engineStore', 'not recorded')}",
    ]
    for s in report["scenarios"]:
        f = s.get("fault") or {}
        head = f"\n{s['scenario']} [{f.get('kind')} fault: {f.get('how')}]: outcome {s['outcome']}"
        if s.get("cancelSource"):
            head += f", cancel {s['cancelSource']}{' (forced)' if s.get('forced') else ''}"
        head += f", cache {s.get('timingCacheMode')}, retry {s['retry']['advised']} → {s['retry']['action']}"
        if s.get("skipped"):
            head = f"\n{s['scenario']}: NOT RUN HERE — {s['skipped']}"
        lines.append(head)
        if s.get("note"):
            lines.append(f"  note: {s['note']}")
        ev = s.get("evidence") or {}
        if ev:
            lines.append("  evidence: " + ", ".join(f"{k}={_short(ev.get(k, '(absent)'))}" for k in SEED_FIELDS))
        for r in s["criteria"]:
            mark = "waived" if r["waived"] else MARK.get(r["status"], r["status"])
            lines.append(f"  [{mark}] {r['criterion']} {r['title']}: {r['message']}")
        if s.get("evidenceFolder"):
            lines.append(f"  evidence kept in {s['evidenceFolder']}")
    lines.append("\ncancel latency (ms): source — request→ack p50/p95/max — ack→cleanup p50/p95/max (n)")
    for src, g in report["cancelLatency"].items():
        a, c = g["request_to_ack_ms"], g["ack_to_cleanup_ms"]
        lines.append(f"  {src:22} {a['p50']}/{a['p95']}/{a['max']} — {c['p50']}/{c['p95']}/{c['max']} (n={a['n']})")
    if report.get("notChecked"):
        lines.append(f"\nnot checked (not waived): {', '.join(report['notChecked'])}")
    return "\n".join(lines) + "\n"


def _short(v: Any) -> str:
    text = v if isinstance(v, str) else json.dumps(v, default=str)
    return text if len(text) <= 24 else text[:12] + "…"


def to_json(report: dict[str, Any]) -> str:
    return json.dumps(report, indent=2, default=str) + "\n"


def _x(text: str) -> str:
    """XML 1.0 cannot hold most control characters (a TensorRT log line may carry one)."""
    return "".join(c if c in "\t\n\r" or ord(c) >= 0x20 else "?" for c in text)


def _properties(parent: ET.Element, values: dict[str, Any], prefix: str = "") -> None:
    props = ET.SubElement(parent, "properties")
    for k, v in values.items():
        text = v if isinstance(v, str) else json.dumps(v, default=str)
        ET.SubElement(props, "property", {"name": prefix + k, "value": _x(text)})


def junit(report: dict[str, Any]) -> str:
    """One <testsuite> per scenario (its evidence record and fault as <properties>), one <testcase> per
    criterion (its measured values as <properties>). not_checked is a failure unless waived (then skipped)."""

    def counts(rows: list[dict[str, Any]]) -> dict[str, str]:
        return {
            "tests": str(len(rows)),
            "failures": str(sum(_failed(r) for r in rows)),
            "errors": "0",
            "skipped": str(sum(r["status"] == NA or r["waived"] for r in rows)),
        }

    every = [r for s in report["scenarios"] for r in s["criteria"]]
    root = ET.Element("testsuites", {"name": "trtls accept", **counts(every)})
    for s in report["scenarios"]:
        suite = ET.SubElement(root, "testsuite", {"name": f"accept.{s['scenario']}", **counts(s["criteria"])})
        fault = s.get("fault") or {}
        props = {"fault": fault.get("kind"), "faultHow": fault.get("how"), "evidencePath": s.get("evidencePath")}
        props.update({f"evidence.{k}": v for k, v in (s.get("evidence") or {}).items()})
        props.update({f"retry.{k}": v for k, v in s["retry"].items() if k != "evidence"})
        _properties(suite, props)
        per = float(s.get("durationS") or 0.0) / max(1, len(s["criteria"]))
        for r in s["criteria"]:
            case = ET.SubElement(
                suite,
                "testcase",
                {
                    "classname": f"accept.{s['scenario']}",
                    "name": f"{r['criterion']} {r['title']}",
                    "time": f"{per:.3f}",
                },
            )
            if r["measured"]:
                _properties(case, r["measured"], "measured.")
            if _failed(r):
                ET.SubElement(case, "failure", {"type": r["status"], "message": _x(r["message"])}).text = _x(
                    r["message"]
                )
            elif r["status"] == NA or r["waived"]:
                msg = f"waived: {r['message']}" if r["waived"] else r["message"]
                ET.SubElement(case, "skipped", {"message": _x(msg)})
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _failed(r: dict[str, Any]) -> bool:
    return r["status"] == FAIL or (r["status"] == NOT_CHECKED and not r["waived"])


def render(report: dict[str, Any], fmt: str) -> str:
    return {"text": to_text, "json": to_json, "junit": junit}[fmt](report)
