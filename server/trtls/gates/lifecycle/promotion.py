"""Promotion: a supported, current verdict becomes the route's promoted bundle, with an approval record.

`promote` appends a `promote` record to the ledger (`ledger.py`) only when the route's last complete gates run
(`.trtls/routes/<route>/complete-summary.json`, written by every run of all five gates) decided `supported` and is
still current — no fact it rested on drifted (`rested_on.drifts`, every kind) — and every item the runbook asks for is
there: the bundle digest, the gates evidence digest, the runtime target, the approver, the canary plan
(`canary_plan` in the route table) and the rollback artifact (`previous_bundle`, its digest). Anything missing
refuses the promotion, naming each missing item; nothing is written then.

The promoted pointer of a route is its last `promote` or `rollback` record; `status.py` judges it.
"""

from __future__ import annotations

import hashlib
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trtls.core.paths import UnsafeWrite, real
from trtls.core.route import RouteModel, route_dir
from trtls.core.route_summary_record import RouteSummary, loaded_route_summary
from trtls.core.terminal_text import terminal_safe
from trtls.fs import Kind, atomic_write_bytes, ensure_folder, parse_json, read_bytes
from trtls.gates.files import RECORD_LIMIT
from trtls.gates.lifecycle.ledger import LedgerTampered, append_record, read_ledger, tampered_text
from trtls.gates.lifecycle.rested_on import bundle_digest, current_facts, drifts

COMPLETE_SUMMARY = "complete-summary.json"


@dataclass
class Outcome:
    """What a lifecycle command did: `ok` with the record it wrote, or refused with every reason."""

    ok: bool
    message: str
    record: dict[str, Any] | None = None
    refused: list[dict[str, str]] = field(default_factory=list)  # {"item": …, "reason": …}
    advice: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        # the lines a person reads name an approver, a bundle path, a ledger line: escaped once, here (item 13)
        self.message = terminal_safe(self.message)
        self.refused = [{k: terminal_safe(v) for k, v in r.items()} for r in self.refused]
        self.advice = [terminal_safe(a) for a in self.advice]

    def as_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "message": self.message,
            "record": self.record,
            "refused": self.refused,
            "advice": self.advice,
        }


def utc_now() -> float:
    return time.time()


def iso(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


APPROVER_HOW = (
    "give one: --approver NAME, or set TRTLS_APPROVER=NAME (CI), or `git config user.email you@example.com` in the "
    "recipe's repository"
)


def git_user_email(recipe_dir: Path | None) -> str | None:
    """`git config user.email` as git answers in the recipe's folder (None when git is not installed, the folder
    is gone, or no email is set). Bounded: a hung git never holds a promotion."""
    import shutil
    import subprocess

    git = shutil.which("git")
    if git is None:
        return None
    try:
        done = subprocess.run(
            [git, "config", "--get", "user.email"],
            cwd=str(recipe_dir) if recipe_dir is not None else None,
            capture_output=True,
            text=True,
            timeout=10,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return (done.stdout.strip() or None) if done.returncode == 0 else None


def approver_from_env(explicit: str | None, recipe_dir: Path | None = None) -> str | None:
    """Who approves: `--approver`, else $TRTLS_APPROVER, else git's user.email (in the recipe's repository), else
    $USER (unset in most CI jobs and containers: APPROVER_HOW says what to give instead)."""
    for value in (explicit, os.environ.get("TRTLS_APPROVER")):
        if value and value.strip():
            return value.strip()
    email = git_user_email(recipe_dir)
    if email:
        return email
    user = os.environ.get("USER")
    return user.strip() if user and user.strip() else None


def last_complete_run(loaded: Any, route_name: str) -> tuple[Path, bytes, RouteSummary] | None:
    """The route's last complete gates run (its path, bytes and summary), or None when there is none. Read within
    the recipe's folder: a `.trtls` (or a folder under it) swapped for a link out of it raises UnsafeWrite naming the
    path, never reads another folder's evidence as if it were this route's (or none, as if it had never run); so
    does a read that fails for any reason but the file's absence (a link met mid-walk when the swap came during the
    read itself, found by the 20,000-state run of 2026-12-04)."""
    path = route_dir(loaded, route_name) / COMPLETE_SUMMARY
    try:
        data = read_bytes(path, limit=RECORD_LIMIT, follow=False, within=real(loaded.base_dir))
        summary = parse_json(data)
    except UnsafeWrite:
        raise
    except FileNotFoundError:
        return None
    except OSError as exc:  # a link met on the way as the read walked it (ELOOP), a FIFO, a folder: said, not "none"
        raise UnsafeWrite(f"{path}: {exc.strerror or exc}") from None
    except (ValueError, RecursionError):  # RecursionError: JSON nested deeper than the parser's stack
        return None
    record = loaded_route_summary(summary)  # a record that is no JSON object, or does not hold together: none
    return (path, data, record) if record is not None else None


def pointer(records: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The route's promoted pointer: its last promote or rollback record."""
    moves = [r for r in records if r.get("event") in ("promote", "rollback")]
    return moves[-1] if moves else None


def promote(
    loaded: Any,
    route_name: str,
    route: RouteModel,
    *,
    approver: str | None = None,
    environment: dict[str, Any] | None = None,
    now: float | None = None,
) -> Outcome:
    """Promote the route's bundle (see the module doc); `environment` replaces this machine's (tests)."""
    now = utc_now() if now is None else now
    refused: list[dict[str, str]] = []

    def refuse(item: str, reason: str) -> None:
        refused.append({"item": item, "reason": reason})

    base = Path(loaded.base_dir)
    ledger = read_ledger(base)
    if ledger.problem is not None:
        return Outcome(
            False,
            "not promoted: " + tampered_text(ledger.problem),
            None,
            [{"item": "ledger", "reason": ledger.problem}],
        )
    try:
        run = last_complete_run(loaded, route_name)
    except UnsafeWrite as exc:
        said = f"the gates evidence cannot be read: {exc}"
        return Outcome(False, f"not promoted: {said}", None, [{"item": "gates evidence", "reason": str(exc)}])
    summary = run[2] if run else RouteSummary()
    evidence_digest = f"sha256:{hashlib.sha256(run[1]).hexdigest()}" if run else None
    if run is None:
        refuse(
            "gates evidence", f"no complete gates run of route '{route_name}': run `trtls gates --route {route_name}`"
        )
    elif summary.decision != "supported":
        reasons = "; ".join(summary.hold_reasons)[:300]
        refuse(
            "decision",
            f"the last complete gates run decided {summary.decision}" + (f" ({reasons})" if reasons else ""),
        )
    now_facts = current_facts(loaded, route_name, route, environment)
    if run is not None:
        rested = summary.rested_on
        if rested is None:
            refuse("gates evidence", "the last complete gates run records nothing it rested on: run the gates again")
        else:
            for d in drifts(rested, now_facts):
                refuse("current", f"{d['message']} since the gates run at {summary.generatedAt}")
    bundle = now_facts["bundle"]["value"]
    if bundle is None:
        refuse("bundle digest", f"no bundle at {route.bundle}")
    approver = approver_from_env(approver, base)
    if approver is None:
        refuse("approver", f"nobody approved: {APPROVER_HOW}")
    if route.canary_plan is None:
        refuse("canary plan", f'set canary_plan = {{ stages = [...], abort_if = "..." }} in [routes.{route_name}]')
    rollback: dict[str, Any] | None = None
    if route.previous_bundle is None:
        refuse("rollback artifact", f"set previous_bundle in [routes.{route_name}] (the bundle to roll back to)")
    else:
        digest = bundle_digest(loaded.resolve(route.previous_bundle))
        if digest is None:
            refuse("rollback artifact", f"previous_bundle {route.previous_bundle} is not a readable file")
        else:
            rollback = {"path": route.previous_bundle, "digest": digest}
    if refused:
        names = ", ".join(dict.fromkeys(r["item"] for r in refused))
        return Outcome(False, f"not promoted: missing or not current: {names}", None, refused)
    current = pointer(ledger.for_route(route_name))
    if (
        current is not None
        and current.get("evidence_digest") == evidence_digest
        and current.get("bundle_digest") == bundle
    ):
        return Outcome(True, f"already promoted on this evidence (record #{current['seq']}): nothing written", current)
    record = {
        "event": "promote",
        "route": route_name,
        "decision": "promote",
        "bundle_digest": bundle,
        "bundle_path": route.bundle,
        "evidence_digest": evidence_digest,
        "verdict_at": summary.generatedAt,
        "runtime_target": summary.runtime_target or route.runtime_target,  # what the gates judged it for
        "approver": approver,
        "when": iso(now),
        "canary_plan": route.canary_plan.model_dump(mode="json") if route.canary_plan else None,
        "canary": "not_started",
        "rollback_artifact": rollback,
        "rested_on": summary.rested_on,
    }
    assert run is not None
    keep = route_dir(loaded, route_name) / "evidence" / f"{evidence_digest.split(':')[1]}.json"  # type: ignore[union-attr]
    try:
        within = real(base)
        ensure_folder(keep.parent, within=within)
        atomic_write_bytes(keep, run[1], kind=Kind.evidence, within=within)  # readable after later runs replace it
        written = append_record(base, record)
    except LedgerTampered as exc:
        return Outcome(
            False,
            "not promoted: " + tampered_text(exc),
            None,
            [{"item": "ledger", "reason": str(exc)}],
        )
    except OSError as exc:  # a refused or failing write (a symlinked .trtls or ledger, a full disk): nothing promoted
        why = f"{exc.strerror or exc}" + (f" ({exc.filename})" if exc.filename else "")
        return Outcome(False, f"not promoted: TRT412 cannot write: {why}", None, [{"item": "write", "reason": why}])
    return Outcome(
        True, f"promoted {route_name}: bundle {bundle} (record #{written['seq']}, approver {approver})", written
    )
