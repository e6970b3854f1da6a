"""What the faces show of a promoted route: the gates run's `promotion` note, the located finding on the route
table (TRT950 revalidate, TRT951 canary failed, TRT952 tampered ledger) and the code lens title. Computed here once;
the CLI and the language server only render them."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from trtls.core.findings import Finding, Origin, Severity
from trtls.core.route import RouteModel
from trtls.gates.lifecycle.ledger import read_ledger, tampered_text
from trtls.gates.lifecycle.promotion import pointer, utc_now
from trtls.gates.lifecycle.rested_on import Fact, current_facts
from trtls.gates.lifecycle.status import RouteStatus, judge, route_status

STATE_CODES = {"revalidate": "TRT950", "canary_failed": "TRT951", "tampered": "TRT952"}
STATE_SEVERITY = {"revalidate": Severity.warning, "canary_failed": Severity.error, "tampered": Severity.error}


def promotion_note(
    loaded: Any, route_name: str, route: RouteModel, run_facts: dict[str, Fact], rejects: Sequence[str] = ()
) -> dict[str, Any] | None:
    """For a gates run: the promoted pointer judged against what this run measured on and what it rejects (None:
    never promoted). One output never says `decision: reject` beside `promotion: valid`."""
    ledger = read_ledger(Path(loaded.base_dir))
    if ledger.problem is not None:
        return RouteStatus(route_name, "tampered", tampered_text(ledger.problem)).as_dict()
    records = ledger.for_route(route_name)
    if pointer(records) is None:
        return None
    return judge(route_name, route, records, run_facts, now=utc_now(), rejects=rejects).as_dict()


def promotion_finding(route_name: str, status: dict[str, Any]) -> Finding:
    """The located finding on `[routes.NAME]` for a promoted route that is not valid."""
    state = status["state"]
    text = "; ".join(status.get("reasons") or []) or status.get("message", "")
    lead = {
        "revalidate": "promoted route must be revalidated: ",
        "canary_failed": "the promoted bundle's canary failed: ",
        "tampered": "",
    }.get(state, "")
    advice = " — " + "; ".join(status["advice"]) if status.get("advice") else ""
    return Finding(
        STATE_CODES[state],
        STATE_SEVERITY[state],
        f"{lead}{text}{advice}",
        ("routes", route_name),
        Origin.gates,
        False,
        data={"state": state, "drifts": status.get("drifts") or []},
    )


_ENV_CACHE: dict[str, Any] = {}
ENV_TTL_S = 60.0  # the editor asks on every validation; the machine's versions change far less often


def _environment() -> dict[str, Any]:
    from trtls.gates.environment_probe import discover_environment

    if time.monotonic() - _ENV_CACHE.get("at", -1e9) > ENV_TTL_S:
        _ENV_CACHE.update(env=discover_environment(), at=time.monotonic())
    return dict(_ENV_CACHE["env"])


def editor_view(loaded: Any, route_names: list[str]) -> dict[str, tuple[str, Finding | None]]:
    """route → (code lens title, finding or None), for the promoted routes of a recipe (nothing for the others)."""
    from trtls.core.route import route_model

    ledger = read_ledger(Path(loaded.base_dir))
    out: dict[str, tuple[str, Finding | None]] = {}
    for name in route_names:
        if ledger.problem is None and pointer(ledger.for_route(name)) is None:
            continue
        try:
            route = route_model(loaded, name)
        except (KeyError, ValueError):
            continue
        if ledger.problem is not None:
            status = route_status(loaded, name, route)
        else:
            status = judge(
                name, route, ledger.for_route(name), current_facts(loaded, name, route, _environment()), now=utc_now()
            )
        out[name] = (
            lens_title(status),
            promotion_finding(name, status.as_dict()) if status.state in STATE_CODES else None,
        )
    return out


def lens_title(status: RouteStatus) -> str:
    ptr = status.pointer or {}
    if status.state == "tampered":
        return "promotion ledger tampered"
    digest = str(ptr.get("bundle_digest", ""))[7:19]
    what = "promoted" if ptr.get("event") == "promote" else "rolled back"
    day = str(status.since)[:10]
    return f"{what} {digest}… on {day} by {ptr.get('approver')} · {status.state} · canary {status.canary}"


# route → its promoted-state lens title, per recipe folder: filled by promotion_findings (which the server runs in a
# thread after each check — judging validity reads the environment, nvidia-smi included) and only read by the code
# lens handler, which runs on the event loop and must never wait for a probe.
_LENSES: dict[str, dict[str, str]] = {}


def promotion_findings(loaded: Any) -> list[Finding]:
    """The editor's diagnostics for a recipe's promoted routes (TRT950–TRT952 on each route table); also keeps the
    promoted-state lens titles `promotion_lens` answers with."""
    from trtls.core.route import route_names

    if getattr(loaded, "recipe", None) is None:
        return []
    view = editor_view(loaded, route_names(loaded))
    _LENSES[str(loaded.base_dir)] = {name: title for name, (title, _) in view.items()}
    return [f for _, f in view.values() if f is not None]


def promotion_lens(loaded: Any, route_name: str) -> str | None:
    """The code lens title of a promoted route as the last check judged it (None: never promoted, or not judged yet)."""
    if getattr(loaded, "recipe", None) is None:
        return None
    return _LENSES.get(str(loaded.base_dir), {}).get(route_name)


def last_gates_lens(loaded: Any, route_name: str) -> str | None:
    """`last gates: supported · 2026-12-01 14:02` from the route's last evidence record (None: never run here). A
    run that was cancelled says so: it decided nothing."""
    from trtls.core.route import route_dir
    from trtls.core.route_summary_record import loaded_route_summary
    from trtls.gates.files import read_json

    path = route_dir(loaded, route_name) / "summary.json"
    summary = loaded_route_summary(read_json(path))
    try:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(path.stat().st_mtime))
    except OSError:
        return None
    if summary is None:
        return None
    if summary.cancelled:
        return f"last gates: cancelled (no decision) · {when}"
    decision = summary.decision or "no decision"
    scope = "" if summary.complete else f" (gates {', '.join(str(g) for g in summary.gates_run)})"
    return f"last gates: {decision}{scope} · {when}"
