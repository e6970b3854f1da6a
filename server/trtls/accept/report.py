"""The acceptance report: a row per scenario and criterion, latency statistics per cancel source,
rendered as text, JSON or JUnit XML (through `trtls.gates.reports.to_junit`)."""

from __future__ import annotations

import json
import math
import platform
import time
from typing import Any

from trtls.accept.criteria import FAIL, NA, PASS, Observation, judge
from trtls.gates.reports import Check, to_junit


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
        s = o.summary or {}
        src = s.get("cancelSource")
        if not src or o.skipped:
            continue
        key = f"{src} (forced)" if s.get("forced") else src
        g = groups.setdefault(key, {"request_to_ack_ms": [], "ack_to_cleanup_ms": []})
        if isinstance(s.get("cancelLatencyMs"), (int, float)):
            g["request_to_ack_ms"].append(float(s["cancelLatencyMs"]))
        if isinstance(s.get("cleanupLatencyMs"), (int, float)):
            g["ack_to_cleanup_ms"].append(float(s["cleanupLatencyMs"]))
    return {k: {m: stats(v) for m, v in g.items()} for k, g in sorted(groups.items())}


def build_report(
    observations: list[Observation], proves: dict[str, str], meta: dict[str, Any] | None = None
) -> dict[str, Any]:
    scenarios = []
    for o in observations:
        rows = [
            {"criterion": num, "title": title, "status": v.status, "message": v.message} for num, title, v in judge(o)
        ]
        s = o.summary or {}
        scenarios.append(
            {
                "scenario": o.scenario,
                "proves": proves.get(o.scenario, ""),
                "outcome": s.get("outcome"),
                "cancelSource": s.get("cancelSource"),
                "forced": s.get("forced"),
                "timingCacheMode": s.get("timingCacheMode"),
                "retryOutcome": ((o.retry or {}).get("summary") or {}).get("outcome"),
                "note": o.extra.get("note"),
                "skipped": o.skipped,
                "error": o.error,
                "durationS": o.extra.get("durationS"),
                "passed": all(r["status"] != FAIL for r in rows),
                "criteria": rows,
            }
        )
    return {
        "framework": "trtls stuck-build acceptance",
        "createdAt": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "host": platform.platform(),
        **(meta or {}),
        "passed": all(s["passed"] for s in scenarios),
        "scenarios": scenarios,
        "cancelLatency": latency_table(observations),
    }


def to_text(report: dict[str, Any]) -> str:
    mark = {PASS: "pass", FAIL: "FAIL", NA: "n/a "}
    lines = [
        f"trtls accept — {report.get('recipe', '')} engine {report.get('engine', '')}: "
        f"{'PASSED' if report['passed'] else 'FAILED'}"
    ]
    for s in report["scenarios"]:
        head = f"\n{s['scenario']}: outcome {s['outcome']}"
        if s.get("cancelSource"):
            head += f", cancel {s['cancelSource']}{' (forced)' if s.get('forced') else ''}"
        head += f", cache {s.get('timingCacheMode')}, retry {s.get('retryOutcome')}"
        if s.get("skipped"):
            head = f"\n{s['scenario']}: SKIPPED — {s['skipped']}"
        lines.append(head)
        if s.get("note"):
            lines.append(f"  note: {s['note']}")
        for r in s["criteria"]:
            lines.append(f"  [{mark.get(r['status'], r['status'])}] {r['criterion']} {r['title']}: {r['message']}")
    lines.append("\ncancel latency (ms): source — request→ack p50/p95/max — ack→cleanup p50/p95/max (n)")
    for src, g in report["cancelLatency"].items():
        a, c = g["request_to_ack_ms"], g["ack_to_cleanup_ms"]
        lines.append(f"  {src:22} {a['p50']}/{a['p95']}/{a['max']} — {c['p50']}/{c['p95']}/{c['max']} (n={a['n']})")
    return "\n".join(lines) + "\n"


def to_json(report: dict[str, Any]) -> str:
    return json.dumps(report, indent=2, default=str) + "\n"


def junit(report: dict[str, Any]) -> str:
    status = {PASS: "pass", FAIL: "fail", NA: "skip"}
    checks = [
        Check(
            f"accept.{s['scenario']}",
            f"{r['criterion']} {r['title']}",
            status[r["status"]],
            r["message"],
            float(s.get("durationS") or 0.0) / max(1, len(s["criteria"])),
        )
        for s in report["scenarios"]
        for r in s["criteria"]
    ]
    return to_junit(checks, name="trtls accept")


def render(report: dict[str, Any], fmt: str) -> str:
    return {"text": to_text, "json": to_json, "junit": junit}[fmt](report)
