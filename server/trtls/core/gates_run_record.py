"""What a gates run the language server started answers as its record (lsp.gates_command.GatesRun.record, what
trtls.showEvidence sends for it): the route, the decision, whether it was stopped and the run's outcome
(`core.outcome.gates_outcome`). The gates' own evidence (every check of every gate) is the summary the gates wrote
beside the route (gates.run.write_route_evidence); the run names that file, this is the run's verdict on it.

A declared model (issue 28, typed seams): a face reads `record.outcome`, not `summary["outcome"]`. `record()` is the
JSON trtls.showEvidence sent before the model existed, key for key and in the same order: a run that raised before the
gates decided holds only `decision` and `outcome`, and is written so.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from trtls.core.gate_result import Decision


class GatesRunRecord(BaseModel):
    """A finished gates run: `decision` None when the gates made none (stopped, or failed)."""

    model_config = ConfigDict(frozen=True, strict=True, extra="forbid")

    route: str | None = None  # absent from the record of a run that raised
    decision: Decision | None
    stopped: bool | None = None  # absent likewise
    outcome: str  # core.outcome.gates_outcome's word: the decision, `cancelled`, `no_decision`; `failed` if it raised

    def record(self) -> dict[str, Any]:
        """As JSON data: the keys it was given, in the order declared."""
        return self.model_dump(mode="json", exclude_unset=True)
