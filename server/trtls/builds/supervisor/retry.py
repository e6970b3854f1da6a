"""A retry, as every face offers it: the kinds of retry and the build overrides each one means.

The retry *advice* (which kind a finished build calls for) is `core.evidence.retry_advice`; this module turns the
kind a user picked (an LSP quick fix, `trtls build --cold`) into the overrides `Supervisor.start` takes.
"""

from __future__ import annotations

from typing import Any, Literal

RetryKind = Literal["cold", "with_cache", "reduced_tactics"]
RETRY_KINDS: tuple[RetryKind, ...] = ("cold", "with_cache", "reduced_tactics")
# the retry each advised policy (summary.json `retryPolicy`) points at
RETRY_FOR_POLICY: dict[str, RetryKind] = {
    "retry_cold": "cold",
    "retry_with_cache": "with_cache",
    "investigate": "reduced_tactics",
}
REDUCED_MAX_NUM_TACTICS = 4  # enough to show where a build stalls, far fewer than a full search
# how a face offers each retry (the TRT205 quick fixes; the one RETRY_FOR_POLICY picks is the preferred one)
RETRY_TITLES: dict[RetryKind, str] = {
    "cold": "Retry cold",
    "with_cache": "Retry with the timing cache",
    "reduced_tactics": "Retry with a reduced tactic search (diagnosis)",
}


def retry_overrides(retry: RetryKind | None, optimization_level: int) -> dict[str, Any]:
    """Build overrides for a retry: `cold` ignores the timing cache; `reduced_tactics` lowers the tactic search
    (optimization level ≤ 1, at most 4 tactics) to diagnose a build that keeps stopping; `with_cache` changes
    nothing (the cache is trusted)."""
    if retry == "cold":
        return {"cache_mode": "off"}
    if retry == "reduced_tactics":
        return {
            "settings": {"optimization_level": min(optimization_level, 1), "max_num_tactics": REDUCED_MAX_NUM_TACTICS}
        }
    return {}
