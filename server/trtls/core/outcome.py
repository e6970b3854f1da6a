"""How a finished run ended, in one word every face can act on without reading prose.

`outcome` is what happened: a build is built, cancelled, failed, forced or killed; a build that started no
worker is reused (its engine came from the engine store) or rolled_back (a known-good engine restored); a matrix
(a farm run) has a build's outcome too, `built` only when every cell built, else the worst of its cells
(`builds.supervisor.matrix`); a gates run is supported, hold or reject, `cancelled` when it was stopped (whatever the
gates
before the stop said), or `no_decision` when it ended without one for another reason (`gates_outcome`).
`outcomeKind` is how a face should tell the user:

- `ok`: the work is done and good (an engine was built, reused or rolled back; the route is supported);
- `cancelled`: stopped on request, nothing decided or written;
- `failed`: the work did not complete (the builder failed, ignored a cancel and was forced, or died; a gates
  run with no decision); an outcome not in these tables is a failure, never reported as success;
- `refused`: the work completed and the answer is no (a gate said hold or reject; the findings say why).

These tables are the rule's one owner: the server sends both words with every finished run (the
`trtls/buildTree` notification, the end of its `$/progress`), and the faces render them.
"""

from __future__ import annotations

from trtls.core.vocabulary import NO_WORKER_OUTCOMES, OUTCOMES, OutcomeKind

BUILD_OUTCOME_KIND: dict[str, OutcomeKind] = {  # every `core.vocabulary.Outcome`
    "built": "ok",
    "cancelled": "cancelled",
    "failed": "failed",
    "forced": "failed",
    "killed": "failed",
}

STORE_OUTCOME_KIND: dict[str, OutcomeKind] = {  # a build the engine store served without a worker (docs/store.md)
    "reused": "ok",  # the key was in the store: the engine is the one its build produced
    "rolled_back": "ok",  # a known-good engine restored on request
}
assert tuple(BUILD_OUTCOME_KIND) == OUTCOMES and tuple(STORE_OUTCOME_KIND) == NO_WORKER_OUTCOMES, "core.vocabulary"

GATES_OUTCOME_KIND: dict[str, OutcomeKind] = {
    "supported": "ok",
    "hold": "refused",
    "reject": "refused",
    "cancelled": "cancelled",
}


def build_outcome_kind(outcome: str | None) -> OutcomeKind | None:
    """None while the build runs; an unknown outcome is a failure (never reported as success)."""
    if outcome is None:
        return None
    return BUILD_OUTCOME_KIND.get(outcome) or STORE_OUTCOME_KIND.get(outcome, "failed")


def gates_outcome(decision: str | None, cancelled: bool) -> tuple[str, OutcomeKind]:
    """A cancelled run made no decision, whatever the gates before the cancel said; a run that ended without a
    decision for another reason failed."""
    if cancelled:
        return "cancelled", "cancelled"
    if decision is None:
        return "no_decision", "failed"
    return decision, GATES_OUTCOME_KIND.get(decision, "failed")
