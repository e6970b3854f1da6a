"""A build as a Chrome trace (the Trace Event Format that Perfetto and chrome://tracing open).

Tracks of one process ("trtls build <engine>"):
- `builder` (one per builder thread id the worker reported): every phase as a complete slice (`X`),
  nested by time, with its status, steps and usual duration in `args`;
- `quiet`: the stretches with no builder callback (≥ QUIET_GAP_S) as slices named `quiet 3.9 s`;
- `trtls`: instant events (`i`) for build start, builder return, TensorRT warnings and errors, and a
  cancel's request / seen / return / cleanup;
- counters (`C`): the step count of every phase that announced more than two steps.
Times are microseconds from the build's first event.
"""

from __future__ import annotations

from typing import Any

from trtls.core.display import quiet_text
from trtls.report.evidence import QUIET_GAP_S, BuildEvidence

PID = 1
QUIET_TID, TRTLS_TID = 1_000_000, 1_000_001
CANCEL_LABELS = {
    "request": "cancel requested",
    "seen": "cancel seen by the builder (step_complete returned False)",
    "return": "builder returned",
    "cleanup": "cleanup done",
}


def _us(seconds: float) -> float:
    return round(seconds * 1e6, 3)


def chrome_trace(ev: BuildEvidence) -> dict[str, Any]:
    s = ev.summary
    out: list[dict[str, Any]] = [
        {
            "ph": "M",
            "pid": PID,
            "name": "process_name",
            "args": {"name": f"trtls build {s.engine} ({ev.build_id})"},
        },
        {
            "ph": "M",
            "pid": PID,
            "tid": QUIET_TID,
            "name": "thread_name",
            "args": {"name": "quiet (no builder callback)"},
        },
        {"ph": "M", "pid": PID, "tid": TRTLS_TID, "name": "thread_name", "args": {"name": "trtls"}},
    ]
    for tid in sorted({sp.tid for sp in ev.spans}):
        out.append({"ph": "M", "pid": PID, "tid": tid, "name": "thread_name", "args": {"name": f"builder {tid}"}})
    # parents before children at equal start times, so viewers nest them
    for sp in sorted(ev.spans, key=lambda x: (x.start_s, x.depth)):
        out.append(
            {
                "ph": "X",
                "pid": PID,
                "tid": sp.tid,
                "name": sp.name,
                "cat": "phase",
                "ts": _us(sp.start_s),
                "dur": _us(max(sp.end_s - sp.start_s, 0.0)),
                "args": {
                    "phase_id": sp.id,
                    "status": sp.status,
                    "steps": f"{sp.steps or 0}/{sp.num_steps}",
                    "usual_s": sp.usual_s,
                },
            }
        )
    for a, b in ev.quiet_gaps:
        out.append(
            {
                "ph": "X",
                "pid": PID,
                "tid": QUIET_TID,
                "name": quiet_text(b - a),
                "cat": "quiet",
                "ts": _us(a),
                "dur": _us(b - a),
            }
        )
    names = {sp.id: sp for sp in ev.spans}
    for e in ev.events:
        t = ev.seconds(e["t_ns"]) or 0.0
        kind = e["type"]
        if kind == "build_started":
            out.append(_instant("build started", t, {"buildConfigHash": e.get("build_config_hash")}))
        elif kind == "builder_returned":
            out.append(_instant("builder returned", t, {"ok": e.get("ok")}))
        elif kind == "log" and e.get("severity") in ("WARNING", "ERROR", "INTERNAL_ERROR"):
            out.append(_instant(f"[{e['severity']}] {str(e.get('msg', ''))[:120]}", t, {"msg": e.get("msg")}, "log"))
        elif kind in ("step", "phase_start", "phase_finish"):
            span = names.get(e.get("phase_id", ""))
            if span is None or span.num_steps <= 2:
                continue
            value = 0 if kind == "phase_start" else (e.get("step") if e.get("step") is not None else None)
            if value is None:
                continue
            done = value if kind == "phase_start" else value + 1
            out.append(
                {
                    "ph": "C",
                    "pid": PID,
                    "name": f"steps: {span.name} [{span.id}]",
                    "ts": _us(t),
                    "args": {"steps": done},
                }
            )
    for key, t in sorted(ev.cancel_marks().items(), key=lambda kv: kv[1]):
        out.append(_instant(CANCEL_LABELS[key], t, {"cancelSource": s.cancelSource}, "cancel", scope="g"))
    return {
        "traceEvents": out,
        "displayTimeUnit": "ms",
        "otherData": {
            "trtls": "build trace",
            "buildId": ev.build_id,
            "engine": s.engine,
            "outcome": s.outcome,
            "cancelSource": s.cancelSource,
            "cancelLatencyMs": s.cancelLatencyMs,
            "cleanupLatencyMs": s.cleanupLatencyMs,
            "quietGapThresholdS": QUIET_GAP_S,
        },
    }


def _instant(name: str, t: float, args: dict[str, Any], cat: str = "build", scope: str = "t") -> dict[str, Any]:
    return {"ph": "i", "pid": PID, "tid": TRTLS_TID, "name": name, "cat": cat, "ts": _us(t), "s": scope, "args": args}
