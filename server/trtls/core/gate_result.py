"""What a gate check returns, and how five gates become one decision.

A check ends in one of four statuses:

* `pass` — it ran and what it measured is within the rule;
* `reject` — it ran and the route is wrong;
* `hold` — it ran (or tried to) and the proof is missing or contradicts itself (a branch revision, no GPU
  to run the engine the route deploys);
* `not_checked` — it did not run, or had nothing to compare (no threshold set, no token ids reported by the
  runtime): it measured nothing, so it is never a pass.

A route is `supported` only when every check passes, except `not_checked` checks the recipe waives by name
with a reason (`[routes.X] waive = {"release.throughput" = "why"}`); the waiver and its reason are recorded
in the evidence. Any `reject` rejects; any `hold`, or any `not_checked` without a waiver, holds.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from trtls.core.findings import Finding, Origin, Severity, TomlPath

CheckStatus = Literal["pass", "hold", "reject", "not_checked"]
CHECK_STATUSES: tuple[str, ...] = ("pass", "hold", "reject", "not_checked")
Decision = Literal["supported", "hold", "reject"]
GATE_NAMES = {
    1: "source and checkpoint",
    2: "environment and recipe",
    3: "bundle and manifest",
    4: "parity",
    5: "release",
}


@dataclass
class GateCheck:
    gate: int  # 1..5
    name: str  # stable id within the gate, e.g. "revision_pinned"
    status: CheckStatus
    message: str
    code: str  # TRT5xx (gate 1) … TRT9xx (gate 5)
    path: TomlPath = ()  # the recipe key that caused it
    on_value: bool = True
    evidence: dict[str, Any] = field(default_factory=dict)
    waived: str | None = None  # a not_checked check the recipe waives: the recipe's reason

    @property
    def holds(self) -> bool:
        """Does this check keep the route from `supported` (without rejecting it)?"""
        return self.status == "hold" or (self.status == "not_checked" and self.waived is None)

    def finding(self) -> Finding | None:
        if self.status == "pass":
            return None
        severity = {"reject": Severity.error, "hold": Severity.warning}.get(self.status, Severity.information)
        message = self.message
        if self.status == "not_checked":
            message = f"not checked: {message}" + (f" (waived: {self.waived})" if self.waived else "")
        data = {"gate": self.gate, "check": self.name, "status": self.status, **self.evidence}
        if self.waived is not None:
            data["waived"] = self.waived
        return Finding(self.code, severity, message, tuple(self.path), Origin.gates, self.on_value, data)


def apply_waivers(checks: Iterable[GateCheck], waivers: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """Mark the `not_checked` checks the recipe waives; return what each waiver did (for the evidence).

    A waiver applies only to `not_checked`: a check that ran and held or rejected is never waived.
    """
    used: dict[str, dict[str, Any]] = {
        name: {"reason": reason, "applied_to": [], "not_applied": []} for name, reason in waivers.items()
    }
    for c in checks:
        if c.name not in waivers:
            continue
        if c.status == "not_checked":
            c.waived = waivers[c.name]
            used[c.name]["applied_to"].append(c.name)
        else:
            used[c.name]["not_applied"].append(f"{c.name} is {c.status}: only a not_checked check can be waived")
    return used


def gate_check(
    gate: int,
    name: str,
    status: CheckStatus,
    message: str,
    code: str,
    path: TomlPath,
    evidence: dict[str, Any] | None = None,
    on_value: bool = True,
) -> GateCheck:
    """The one way a gate makes a check (each gate binds its number: `partial(gate_check, GATE)`)."""
    return GateCheck(gate, name, status, message, code, tuple(path), on_value, dict(evidence or {}))


def decide(checks: list[GateCheck]) -> Decision:
    if any(c.status == "reject" for c in checks):
        return "reject"
    if not checks or any(c.holds for c in checks):
        return "hold"
    return "supported"
