"""A promoted route's state, its canary and its rollback.

`route_status` judges the promoted pointer (the route's last promote or rollback record) against now:

* `not_promoted` — the ledger has no promotion of this route;
* `valid` — nothing the promoted verdict rested on drifted (of the kinds `revalidate_on` counts), and it is not
  older than `revalidate_after_days`;
* `revalidate` — something drifted ("onnxruntime 1.20.1 → 1.21.0 since promotion on 2026-11-02"), the promotion is
  too old, or the pointer was rolled back to an artifact never promoted through the gates;
* `canary_failed` — the promoted bundle's canary failed: roll back (`trtls route rollback`);
* `tampered` — the ledger's chain is broken (nothing is judged on a ledger that was edited).

The canary of a promotion: `not_started → running → pass | failed`, one ledger record per step, each with its
figures. `rollback` moves the pointer to the ledger's previous promoted bundle (else the promotion's rollback
artifact) with a new record — never to a bundle whose canary failed; it never touches the user's files, and says so.
"""

from __future__ import annotations

import calendar
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from trtls.core.route import RouteModel
from trtls.core.route_lifecycle import CanaryPlan
from trtls.gates.lifecycle.figures import judge_figures
from trtls.gates.lifecycle.ledger import LedgerTampered, append_record, read_ledger, tampered_text
from trtls.gates.lifecycle.promotion import APPROVER_HOW, Outcome, approver_from_env, iso, pointer, utc_now
from trtls.gates.lifecycle.rested_on import Fact, bundle_digest, current_facts, drifts, recorded_inside

CANARY_NEXT = {"start": ("not_started", "running"), "pass": ("running", "pass"), "fail": ("running", "failed")}


@dataclass
class RouteStatus:
    route: str
    state: str
    message: str
    pointer: dict[str, Any] | None = None
    since: str | None = None
    canary: str = "not_started"
    canary_figures: dict[str, Any] = field(default_factory=dict)
    reasons: list[str] = field(default_factory=list)
    drifts: list[dict[str, Any]] = field(default_factory=list)
    advice: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "route": self.route,
            "state": self.state,
            "message": self.message,
            "promoted_bundle": (self.pointer or {}).get("bundle_digest"),
            "record": (self.pointer or {}).get("seq"),
            "event": (self.pointer or {}).get("event"),
            "decision": (self.pointer or {}).get("decision"),
            "approver": (self.pointer or {}).get("approver"),
            "since": self.since,
            "canary": self.canary,
            "canary_figures": self.canary_figures,
            "reasons": self.reasons,
            "drifts": self.drifts,
            "advice": self.advice,
        }


def _parse_iso(text: str | None) -> float | None:
    try:
        return float(calendar.timegm(time.strptime(str(text), "%Y-%m-%dT%H:%M:%SZ")))
    except (TypeError, ValueError):
        return None


def canary_of(records: list[dict[str, Any]], ptr: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The canary state of the pointer `ptr` (only canary records after it count) and its last figures."""
    state, figures = "not_started", {}
    for r in records:
        if r.get("event") == "canary" and r.get("pointer_seq") == ptr.get("seq"):
            state, figures = str(r.get("state")), dict(r.get("figures") or {})
    return state, figures


def route_pointer(base: Path, route_name: str) -> tuple[str | None, list[dict[str, Any]], dict[str, Any] | None]:
    """(the ledger's problem, the route's records, its promoted pointer): no records and no pointer when the ledger
    is tampered, for nothing is judged or written on a ledger that was edited."""
    ledger = read_ledger(base)
    if ledger.problem is not None:
        return ledger.problem, [], None
    records = ledger.for_route(route_name)
    return None, records, pointer(records)


def canary_state(loaded: Any, route_name: str) -> str:
    """The canary status of the route's promoted bundle, from the ledger (the one place it is recorded):
    not_started, running, pass or failed — `not_started` when nothing is promoted, `unknown` on a tampered ledger.
    The gates summary's `canary_status` renders this."""
    problem, records, ptr = route_pointer(Path(loaded.base_dir), route_name)
    if problem is not None:
        return "unknown"
    return "not_started" if ptr is None else canary_of(records, ptr)[0]


def _failed_canary(records: list[dict[str, Any]], digest: Any) -> dict[str, Any] | None:
    """The latest promotion of bundle `digest` when its canary failed, else None: a bundle whose canary failed is never
    a rollback's target (a second rollback restored it, said `valid`, its failed canary forgotten) — until it is
    promoted again and that canary does not fail."""
    latest = next(
        (r for r in reversed(records) if r.get("event") == "promote" and r.get("bundle_digest") == digest), None
    )
    return latest if latest is not None and canary_of(records, latest)[0] == "failed" else None


def _previous_promotion(records: list[dict[str, Any]], ptr: dict[str, Any]) -> dict[str, Any] | None:
    """The newest promote record before the pointer whose bundle is another one and did not fail its canary: what a
    rollback returns to."""
    for r in reversed([r for r in records if r.get("seq", 0) < ptr.get("seq", 0)]):
        digest = r.get("bundle_digest")
        if r.get("event") == "promote" and digest != ptr.get("bundle_digest") and not _failed_canary(records, digest):
            return r
    return None


def rollback_target(records: list[dict[str, Any]], ptr: dict[str, Any]) -> dict[str, Any]:
    """Where a rollback of the pointer `ptr` goes: {digest, rested_on, from, …} of the previous promotion, else of
    the promotion's rollback artifact (its `digest` None when there is neither)."""
    prev = _previous_promotion(records, ptr)
    if prev is None:
        artifact = ptr.get("rollback_artifact") or {}
        if _failed_canary(records, artifact.get("digest")) is not None:
            artifact = {}  # the artifact holds a bundle whose canary failed: nowhere to go
        return {**artifact, "rested_on": None, "from": "the promotion's rollback artifact"}
    where = f"promotion #{prev['seq']}"
    return {"digest": prev.get("bundle_digest"), "rested_on": prev.get("rested_on"), "from": where}


def judge(
    route_name: str,
    route: RouteModel,
    records: list[dict[str, Any]],
    now_facts: dict[str, Fact],
    *,
    now: float,
    bundle_on_disk: dict[str, str | None] | None = None,
    rejects: Sequence[str] = (),
) -> RouteStatus:
    """The one rule for a promoted route's state, from the ledger's records and the facts as they are now;
    `rejects` names the checks a gates run made now rejects (a promotion is never valid beside a reject)."""
    ptr = pointer(records)
    if ptr is None:
        return RouteStatus(route_name, "not_promoted", f"route {route_name} has never been promoted")
    since = str(ptr.get("when"))
    day = since[:10]
    status = RouteStatus(route_name, "valid", "", ptr, since)
    status.canary, status.canary_figures = canary_of(records, ptr)
    rested = ptr.get("rested_on")
    if not isinstance(rested, dict):
        status.reasons.append(
            f"rolled back to {ptr.get('bundle_path')}, which was never promoted through the gates: run its gates"
        )
    else:
        facts = dict(now_facts)
        held_at = (bundle_on_disk or {}).get(str(ptr.get("bundle_path")))
        if ptr.get("event") == "rollback" and held_at is not None:
            facts["bundle"] = {**facts["bundle"], "value": held_at}  # the pointer names the rollback artifact's file
        status.drifts = drifts(rested, facts, route.revalidate_on)
        verb = "promotion" if ptr.get("event") == "promote" else "rollback"
        status.reasons += [f"{d['message']} since {verb} on {day}" for d in status.drifts]
    if rejects:
        status.reasons.append(f"the gates run now rejects the route ({', '.join(rejects)})")
    when = _parse_iso(since)
    if route.revalidate_after_days is not None and when is not None:
        age = (now - when) / 86400
        if age > route.revalidate_after_days:
            status.reasons.append(
                f"promoted {int(age)} days ago, on {day} (revalidate_after_days = {route.revalidate_after_days})"
            )
    target = (
        f"bundle {ptr.get('bundle_digest')} ({ptr.get('event')} #{ptr.get('seq')}, {day}, by {ptr.get('approver')})"
    )
    if status.canary == "failed":
        status.state = "canary_failed"
        to = rollback_target(records, ptr).get("digest")
        status.advice.append(f"the canary failed: roll back with `trtls route rollback --route {route_name}` (to {to})")
    elif status.reasons:
        status.state = "revalidate"
        status.advice.append(
            f"run `trtls gates --route {route_name}`, then `trtls route promote --route {route_name}` again"
        )
    status.message = f"{status.state}: {target}; canary {status.canary}"
    return status


def route_status(
    loaded: Any,
    route_name: str,
    route: RouteModel,
    *,
    environment: dict[str, Any] | None = None,
    now: float | None = None,
) -> RouteStatus:
    problem, records, ptr = route_pointer(Path(loaded.base_dir), route_name)
    if problem is not None:
        return RouteStatus(route_name, "tampered", tampered_text(problem))
    if ptr is None:
        return judge(route_name, route, records, {}, now=utc_now() if now is None else now)
    on_disk = {p: bundle_digest(loaded.resolve(p)) for p in {route.bundle, route.previous_bundle} if p}
    return judge(
        route_name,
        route,
        records,
        current_facts(loaded, route_name, route, environment),
        now=utc_now() if now is None else now,
        bundle_on_disk=on_disk,
    )


def _append(base: Path, record: dict[str, Any], message: str, advice: list[str] | None = None) -> Outcome:
    try:
        written = append_record(base, record)
    except LedgerTampered as exc:
        return Outcome(
            False,
            "nothing written: " + tampered_text(exc),
            refused=[{"item": "ledger", "reason": str(exc)}],
        )
    except OSError as exc:  # a refused or failing write (a symlinked lock or ledger, a full disk): nothing recorded
        why = f"{exc.strerror or exc}" + (f" ({exc.filename})" if exc.filename else "")
        refused = [{"item": "write", "reason": why}]
        return Outcome(False, f"nothing written: TRT412 cannot write: {why}", refused=refused)
    return Outcome(True, message.replace("#?", f"#{written['seq']}"), written, advice=advice or [])


def canary(
    loaded: Any,
    route_name: str,
    route: RouteModel,
    action: str,
    figures: dict[str, Any],
    *,
    approver: str | None = None,
    now: float | None = None,
) -> Outcome:
    """Move the promoted bundle's canary one step (`start`, `pass`, `fail`), recording its figures."""
    base = Path(loaded.base_dir)
    problem, records, ptr = route_pointer(base, route_name)
    if problem is not None:
        return Outcome(False, "nothing written: " + tampered_text(problem))
    if ptr is None or ptr.get("event") != "promote":
        return Outcome(False, f"route {route_name} has no promoted bundle whose canary could run (promote it first)")
    state, _ = canary_of(records, ptr)
    need, nxt = CANARY_NEXT[action]
    if state != need:
        return Outcome(False, f"the canary is {state}: `{action}` needs it {need}")
    try:
        plan = CanaryPlan.model_validate(ptr.get("canary_plan") or {})
    except ValidationError as exc:
        why = "; ".join(str(e.get("msg")) for e in exc.errors())
        return Outcome(
            False,
            f"the canary plan promotion #{ptr['seq']} recorded cannot be read ({why}): promote again with a plan",
            refused=[{"item": "canary plan", "reason": why}],
        )
    missing = [w for w in plan.needed if w not in figures] if action != "start" else []
    if missing:
        return Outcome(
            False,
            f"the canary plan needs {', '.join(missing)}: give each with --figure NAME=VALUE",
            refused=[{"item": "figure", "reason": m} for m in missing],
        )
    judged = judge_figures(plan.abort_if, figures) if action != "start" else []
    unreadable = [j for j in judged if j["broken"] is None]
    if unreadable:
        return Outcome(
            False,
            "figures the abort rules read are not numbers in their unit: give NAME=NUMBER[UNIT]",
            refused=[{"item": "figure", "reason": j["why"]} for j in unreadable],
        )
    broken = [j for j in judged if j["broken"]]
    if action == "pass" and broken:
        return Outcome(
            False,
            f"not recorded: the canary broke the plan's abort rule{'s' if len(broken) > 1 else ''}: "
            + "; ".join(j["why"] for j in broken)
            + f" — record `trtls route canary --route {route_name} fail` instead",
            refused=[{"item": "abort_if", "reason": j["why"]} for j in broken],
        )
    record = {
        "event": "canary",
        "route": route_name,
        "pointer_seq": ptr["seq"],
        "bundle_digest": ptr["bundle_digest"],
        "state": nxt,
        "figures": figures,
        "abort_rules": judged,
        "approver": approver_from_env(approver, base),
        "when": iso(utc_now() if now is None else now),
    }
    advice = []
    if nxt == "failed":
        to = rollback_target(records, ptr).get("digest")
        advice.append(f"roll back: `trtls route rollback --route {route_name}` moves the promoted pointer to {to}")
    return _append(base, record, f"canary of {route_name} (promotion #{ptr['seq']}): {nxt} (record #?)", advice)


def rollback(
    loaded: Any,
    route_name: str,
    route: RouteModel,
    *,
    approver: str | None = None,
    reason: str | None = None,
    now: float | None = None,
) -> Outcome:
    """Move the promoted pointer back (see the module doc). The user's files stay as they are."""
    base = Path(loaded.base_dir)
    problem, records, ptr = route_pointer(base, route_name)
    if problem is not None:
        return Outcome(False, "nothing written: " + tampered_text(problem))
    if ptr is None:
        return Outcome(False, f"route {route_name} has never been promoted: nothing to roll back")
    target = rollback_target(records, ptr)
    if not target.get("digest"):
        failed = sorted(
            {
                f"#{r['seq']}"
                for r in records
                if r.get("event") == "promote" and _failed_canary(records, r.get("bundle_digest")) is r
            }
        )
        said = (
            f" (the canary failed for promotion {', '.join(failed)}: its bundle is never rolled back to)"
            if failed
            else ""
        )
        return Outcome(False, f"route {route_name}: no previous promotion and no rollback artifact recorded{said}")
    candidates = [p for p in (route.previous_bundle, route.bundle, recorded_inside(loaded, target.get("path"))) if p]
    held = next((p for p in candidates if bundle_digest(loaded.resolve(p)) == target["digest"]), None)
    if held is None:
        return Outcome(
            False,
            f"no file holds bundle {target['digest']} (looked at {', '.join(dict.fromkeys(candidates))}): "
            "restore it first; the pointer was not moved",
        )
    who = approver_from_env(approver, base)
    if who is None:
        return Outcome(
            False,
            f"nobody approved the rollback: {APPROVER_HOW}",
            refused=[{"item": "approver", "reason": "missing"}],
        )
    record = {
        "event": "rollback",
        "route": route_name,
        "decision": "rollback",
        "bundle_digest": target["digest"],
        "bundle_path": held,
        "from_bundle_digest": ptr.get("bundle_digest"),
        "rolled_back_from_seq": ptr.get("seq"),
        "target": target["from"],
        "runtime_target": route.runtime_target,
        "approver": who,
        "when": iso(utc_now() if now is None else now),
        "reason": reason,
        "rested_on": target.get("rested_on"),
    }
    note = (
        f"your files are unchanged: {held} holds the promoted bundle now"
        + (f"; {route.bundle} still holds the bundle rolled back from" if held != route.bundle else "")
        + ": deploy from the promoted bundle's file"
    )
    return _append(
        base,
        record,
        f"rolled back {route_name}: the promoted pointer names {target['digest']} ({target['from']}, record #?)",
        [note],
    )
