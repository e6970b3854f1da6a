"""What a gate check returns, and how five gates become one decision.

A route is `supported` only when every check of every gate passes; any `reject` rejects it; anything
else missing or unproven is `hold`. A check that could not run (no GPU that TensorRT accepts, no
previous bundle) is a hold with that reason — never a pass.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from trtls.core.findings import Finding, Origin, Severity, TomlPath

CheckStatus = Literal["pass", "hold", "reject"]
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

    def finding(self) -> Finding | None:
        if self.status == "pass":
            return None
        severity = Severity.error if self.status == "reject" else Severity.warning
        return Finding(
            self.code,
            severity,
            self.message,
            tuple(self.path),
            Origin.gates,
            self.on_value,
            {"gate": self.gate, "check": self.name, **self.evidence},
        )


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
    if not checks or any(c.status == "hold" for c in checks):
        return "hold"
    return "supported"
